"""The client against the real broker: a 3-replica DLedger group and a NameServer in-process.

Producer (auto-created topic, batch, orderly), pull consumer, push consumer with send-back,
admin, and a master failover with producer and consumer running.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import Admin, ConsumeStatus, Producer, PullConsumer, PullStatus, PushConsumer
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
}


def run(tmp: Path, test: Callable[[Cluster], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster(tmp)
        try:
            await cluster.start()
            await cluster.master()
            async with Admin(NAMESRV, network=cluster.network) as admin:
                await admin.wait_for_route("TBW102", ["broker-a"])
            await test(cluster)
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 50))


def test_produce_pull_push_and_admin_against_the_real_broker(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        async with Producer("pg", NAMESRV, network=net) as producer:
            # auto-creation through TBW102, then the topic's own route
            first = await producer.send("Auto", b"hello", tags="a", keys="k1")
            assert first.ok
            results = [await producer.send("Auto", b"m%d" % i, tags="b") for i in range(20)]
            batch = await producer.send_batch("Auto", [b"x", b"y"])
            orderly = [await producer.send_orderly("Auto", b"o%d" % i, "key") for i in range(3)]
        assert all(r.ok for r in [*results, batch, *orderly])
        async with PullConsumer("cg", NAMESRV, network=net) as consumer:
            queues = await consumer.fetch_queues("Auto")
            ids: list[str] = []
            for mq in queues:
                result = await consumer.pull(mq, 0, 256)
                if result.status is PullStatus.FOUND:
                    ids.extend(m.msg_id for m in result.messages)
                only_a = await consumer.pull(mq, 0, 256, "a")
                assert all(m.tags == "a" for m in only_a.messages)
            expected = [first.msg_id, *(r.msg_id for r in results), *batch.msg_id.split(",")]
            expected += [r.msg_id for r in orderly]
            assert Counter(ids) == Counter(expected)
            mq = first.message_queue
            await consumer.commit_offset(mq, 1)
            assert await consumer.fetch_committed_offset(mq) == 1
        # push consumer: everything once, one message sent back and consumed again
        seen: Counter[bytes] = Counter()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            for m in messages:
                seen[m.body] += 1
                if m.body == b"m3" and m.reconsume_times == 0:
                    return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        push = PushConsumer(
            "pushg",
            NAMESRV,
            network=net,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **FAST,
        )
        push.subscribe("Auto")
        push.register_listener(listener)
        await push.start()
        await eventually(lambda: seen[b"m3"] == 2 and sum(seen.values()) == 27, 20)
        await push.shutdown()
        async with Admin(NAMESRV, network=net) as admin:
            progress = await admin.consumer_progress("pushg", "Auto")
            assert sum(p.consumer_offset for p in progress) == 26
            assert all(p.lag == 0 for p in progress)
            stats = await admin.topic_stats("Auto")
            assert sum(s.max_offset for s in stats) == 26
            viewed = await admin.view_message(first.offset_msg_id)
            assert viewed.body == b"hello"
            assert await admin.create_topic("Made", 2) == ["broker-a"]
            await admin.wait_for_route("Made", ["broker-a"])

    run(tmp_path, test)


def test_producer_and_push_consumer_carry_on_across_a_master_failover(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        seen: Counter[bytes] = Counter()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            seen.update(m.body for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        async with Admin(NAMESRV, network=net) as admin:
            await admin.create_topic("F", 2)
            await admin.wait_for_route("F", ["broker-a"])
        push = PushConsumer("g", NAMESRV, network=net, **FAST)
        push.subscribe("F")
        push.register_listener(listener)
        await push.start()
        await eventually(lambda: any(q.topic == "F" for q in push.assigned_queues()), 10)
        acked: list[bytes] = []
        async with Producer("pg", NAMESRV, network=net, send_timeout_s=1.0, retry_times=6) as p:
            for i in range(10):
                assert (await p.send("F", b"a%d" % i)).ok
                acked.append(b"a%d" % i)
            master = await cluster.master()
            old = next(n for n, b in cluster.brokers.items() if b is master)
            await cluster.stop_broker(old)
            for i in range(10):
                body = b"b%d" % i
                for _ in range(20):  # until a new master is elected and registered
                    try:
                        if (await p.send("F", body)).ok:
                            acked.append(body)
                            break
                    except Exception:  # noqa: BLE001 - retried until the election ends
                        await asyncio.sleep(0.2)
        await eventually(lambda: all(seen[b] >= 1 for b in acked), 30)
        assert len(acked) == 20
        await push.shutdown()

    run(tmp_path, test)
