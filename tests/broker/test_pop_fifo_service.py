"""FIFO consumption through the POP service, no protocol (issue 16 section 3): a consumer group
with ``consumeMessageOrderly`` gets each message group's oldest messages in order, and nothing
more of a group while some of it is out and invisible; an unacknowledged one comes back
(attempt + 1) before its successors, on a new master after a failover too; ungrouped messages
are ordered by their queue; the maximum attempts send a head to the dead letters and its group
moves on; a group made FIFO later is ordered from its next receive on. An in-process 3-replica
group (``harness.Cluster``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.service.send import SendRequest
from ledgermq.broker.state.metadata import SubscriptionGroupConfig
from ledgermq.messaging import Receive
from ledgermq.wire.message import encode_properties
from ledgermq.wire.route import TopicConfig

from .harness import run_with_cluster
from .test_pop_service import CLIENT, _master

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.broker.service.pop import PopResult
    from ledgermq.broker.service.services import BrokerServices

    from .harness import Cluster

pytestmark = pytest.mark.timeout(120)


async def _send(services: BrokerServices, topic: str, body: bytes, group: str | None) -> None:
    props = {"TAGS": "t"} | ({"__SHARDINGKEY": group} if group is not None else {})
    request = SendRequest(
        producer_group="P", topic=topic, default_topic=None, default_topic_queue_nums=1,
        queue_id=0, sys_flag=0, born_timestamp=0, flag=0, encoded=encode_properties(props),
        reconsume_times=0, max_reconsume_times=None, batch=False,
    )  # fmt: skip
    await services.send.send(request, body, CLIENT)


def _bodies(result: PopResult) -> list[tuple[bytes, int]]:
    return [(m.message.body, m.attempt) for m in result.messages]


async def _fifo_group(services: BrokerServices, name: str, *, max_attempts: int = 16) -> None:
    await services.admin.put_group(
        SubscriptionGroupConfig(name, consume_message_orderly=True, retry_max_times=max_attempts)
    )


def test_fifo_group_order_redelivery_and_failover(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("F", 1, 1))
        await _fifo_group(services, "G")
        for body, group in [(b"a0", "a"), (b"b0", "b"), (b"a1", "a"), (b"n0", None),
                            (b"b1", "b"), (b"n1", None), (b"a2", "a")]:  # fmt: skip
            await _send(services, "F", body, group)
        first = await services.pop.receive(Receive("G", "F", invisible_ms=700, max_messages=3))
        assert _bodies(first) == [(b"a0", 1), (b"b0", 1), (b"a1", 1)]
        out = {m.message.body: m for m in first.messages}
        await services.pop.ack("G", "F", str(out[b"b0"].handle))
        await services.pop.ack("G", "F", str(out[b"a1"].handle))  # a0 is left unacknowledged
        second = await services.pop.receive(Receive("G", "F", invisible_ms=700))
        # a has a0 out and invisible: a2 waits; b's next; the ungrouped ones, in queue order
        assert _bodies(second) == [(b"n0", 1), (b"b1", 1), (b"n1", 1)]
        for message in second.messages:
            await services.pop.ack("G", "F", str(message.handle))

        # the master dies with a0 unacknowledged; its successor hands a0 out again first
        node = next(n for n, b in cluster.brokers.items() if b is master)
        await cluster.stop_broker(node)
        _, successor = await _master(cluster, exclude=node)
        await asyncio.sleep(0.8)  # a0's invisible time (its own, not the election's) is over
        back = await successor.pop.receive(Receive("G", "F", invisible_ms=700))
        assert _bodies(back) == [(b"a0", 2), (b"a2", 1)]  # a1 was acknowledged
        for message in back.messages:
            await successor.pop.ack("G", "F", str(message.handle))
        assert _bodies(await successor.pop.receive(Receive("G", "F"))) == []

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_dead_letters_move_a_group_on_and_settings_change_under_a_backlog(
    tmp_path: Path,
) -> None:
    async def test(cluster: Cluster) -> None:
        _, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("F", 1, 1))
        await _fifo_group(services, "D", max_attempts=2)
        for i in range(3):
            await _send(services, "F", b"x%d" % i, "x")
        seen = []
        for _ in range(3):
            got = await services.pop.receive(Receive("D", "F", invisible_ms=300, max_messages=1))
            seen += _bodies(got)
            await asyncio.sleep(0.35)
        # x0 twice (never acked), then the dead letters take it and x1 goes out
        assert seen == [(b"x0", 1), (b"x0", 2), (b"x1", 1)]
        dlq = services.admin.topic_stats("%DLQ%D")
        assert sum(row.max_offset for row in dlq) == 1

        # a group consumed unordered, then made FIFO: its next receive is ordered
        await services.admin.put_group(SubscriptionGroupConfig("U"))
        loose = await services.pop.receive(Receive("U", "F", max_messages=1))
        assert _bodies(loose) == [(b"x0", 1)]
        await _fifo_group(services, "U")
        assert _bodies(await services.pop.receive(Receive("U", "F"))) == []  # x0 is out
        await services.pop.ack("U", "F", str(loose.messages[0].handle))
        assert _bodies(await services.pop.receive(Receive("U", "F"))) == [
            (b"x1", 1),
            (b"x2", 1),
        ]

    run_with_cluster(tmp_path, test, in_virtual_time=True)
