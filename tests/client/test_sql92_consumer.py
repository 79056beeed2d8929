"""SQL92 subscriptions end to end: our producer and consumers against the in-process broker
group (a NameServer and three replicas)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import (
    Admin,
    ConsumeStatus,
    MessageSelector,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from ledgermq.errors import ConfigError, MQResponseError
from ledgermq.wire import MQResponseCode
from tests.broker.harness import NAMESRV, Cluster

from .conftest import eventually

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from ledgermq.wire import MessageExt

pytestmark = pytest.mark.timeout(60)

FAST: dict[str, Any] = {
    "persist_interval_s": 0.2,
    "rebalance_interval_s": 1.0,
    "suspend_timeout_ms": 500,
    "backoff_s": (0.1, 0.2),
    "route_refresh_interval_s": 0.5,
    "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
}
SELECTOR = "(region IN ('eu', 'us') AND amount > 100) OR TAGS = 'vip'"


def _run(tmp: Path, test: Callable[[Cluster], Awaitable[None]], **settings: object) -> None:
    async def main() -> None:
        cluster = Cluster(tmp, **settings)
        try:
            await cluster.start()
            await cluster.master()
            async with Admin(NAMESRV, network=cluster.network) as admin:
                await admin.wait_for_route("TBW102", ["broker-a"])
                await admin.create_topic("Pay", 4)
                await admin.wait_for_route("Pay", ["broker-a"])
            await test(cluster)
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 50))


def _message(i: int) -> tuple[bytes, dict[str, str], str | None]:
    """Message ``i``: body, properties, tag. A spread of matching and not matching ones,
    including missing properties and amounts that are not numbers."""
    props: dict[str, str] = {}
    if i % 5:
        props["region"] = ["eu", "us", "apac", "EU"][i % 4]
    if i % 7:
        props["amount"] = str((i * 37) % 250) if i % 11 else "n/a"
    tag = "vip" if i % 13 == 0 else ("std" if i % 2 else None)
    return b"p%d" % i, props, tag


def _wanted(i: int) -> bool:
    _, props, tag = _message(i)
    if tag == "vip":
        return True
    amount = props.get("amount", "")
    return props.get("region") in ("eu", "us") and amount.isdigit() and int(amount) > 100


def test_a_sql92_consumer_receives_exactly_the_matching_messages(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        count = 80
        async with Producer("pg", NAMESRV, network=net) as producer:
            for i in range(count):
                body, props, tag = _message(i)
                assert (await producer.send("Pay", body, tags=tag, properties=props)).ok
        wanted = {b"p%d" % i for i in range(count) if _wanted(i)}
        assert 10 < len(wanted) < count - 10

        # pull consumer: each queue's pulls give exactly its matching messages, in order
        pulled: list[bytes] = []
        async with PullConsumer("pullg", NAMESRV, network=net) as consumer:
            for mq in await consumer.fetch_queues("Pay"):
                offset = 0
                while True:
                    result = await consumer.pull(mq, offset, 4, MessageSelector.by_sql(SELECTOR))
                    if result.status is PullStatus.NO_NEW_MSG:
                        break
                    pulled += [m.body for m in result.messages]
                    offset = result.next_begin_offset
        assert Counter(pulled) == Counter(wanted)

        # push consumer: every matching message once, and the group's offsets reach the end
        seen: Counter[bytes] = Counter()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            seen.update(m.body for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        push = PushConsumer("pushg", NAMESRV, network=net, **FAST)
        push.subscribe("Pay", MessageSelector.by_sql(SELECTOR))
        push.register_listener(listener)
        await push.start()
        try:
            await eventually(lambda: set(seen) == wanted, 20)
            async with Admin(NAMESRV, network=net) as admin:

                async def lag() -> int:
                    return sum(p.lag for p in await admin.consumer_progress("pushg", "Pay"))

                for _ in range(100):
                    if await lag() == 0:
                        break
                    await asyncio.sleep(0.1)
                assert await lag() == 0
        finally:
            await push.shutdown()
        assert seen == Counter(wanted), "each matching message exactly once"

    _run(tmp_path, test)


def test_a_consumer_with_a_selector_the_broker_refuses_fails_to_start(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        push = PushConsumer("badg", NAMESRV, network=net, **FAST)
        push.subscribe("Pay", MessageSelector.by_sql("amount >"))
        push.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
        with pytest.raises(MQResponseError) as info:
            await push.start()
        assert info.value.code == MQResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "column 9" in str(info.value)
        await push.shutdown()  # a failed start leaves nothing to shut down
        async with PullConsumer("pullg", NAMESRV, network=net) as consumer:
            mq = (await consumer.fetch_queues("Pay"))[0]
            with pytest.raises(MQResponseError) as pulled:
                await consumer.pull(mq, 0, 4, MessageSelector.by_sql("region = = 'eu'"))
            assert pulled.value.code == MQResponseCode.SUBSCRIPTION_PARSE_FAILED
        with pytest.raises(ConfigError):
            MessageSelector.by_sql("  ")

    _run(tmp_path, test)


def test_without_enable_property_filter_a_sql92_consumer_is_told_so(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        push = PushConsumer("offg", NAMESRV, network=net, **FAST)
        push.subscribe("Pay", MessageSelector.by_sql("amount > 1"))
        push.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
        with pytest.raises(MQResponseError) as info:
            await push.start()
        assert info.value.code == MQResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in str(info.value)
        await push.shutdown()

    _run(tmp_path, test, enable_property_filter=False)
