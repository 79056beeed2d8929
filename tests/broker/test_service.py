"""The broker's operations called directly, with no protocol in between (DESIGN.md: "tests of
semantics need no protocol"): typed arguments, typed results, typed refusals.

An in-process 3-replica group (``harness.Cluster``); each test goes to ``BrokerServer.services``
of the master or of a slave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import (
    InvalidArgumentError,
    InvalidFilterError,
    InvalidTopicError,
    NoSuchTopicError,
    NotMasterError,
)
from ledgermq.broker.service.send import SendRequest
from ledgermq.messaging.consuming import PullOutcome, PullQuery, QueueRef
from ledgermq.wire.message import decode_records, encode_properties
from ledgermq.wire.route import TopicConfig

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.broker.service.services import BrokerServices

pytestmark = pytest.mark.timeout(90)

CLIENT = "10.0.9.9:4321"


def _request(topic: str, **fields: object) -> SendRequest:
    values: dict[str, object] = {
        "producer_group": "P",
        "topic": topic,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": 0,
        "sys_flag": 0,
        "born_timestamp": 0,
        "flag": 0,
        "encoded": "",
        "reconsume_times": 0,
        "max_reconsume_times": None,
        "batch": False,
    }
    values.update(fields)
    return SendRequest(**values)  # type: ignore[arg-type]


async def _services(cluster: Cluster) -> tuple[BrokerServices, list[BrokerServices]]:
    master = await cluster.master()
    assert master.services is not None
    slaves = [b.services for b in cluster.brokers.values() if b is not master]
    assert all(s is not None for s in slaves)
    return master.services, slaves  # type: ignore[return-value]


def test_send_pull_and_offsets_without_a_protocol(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services, slaves = await _services(cluster)
        props = encode_properties({"TAGS": "a", "UNIQ_KEY": "U1"})
        first = await services.send.send(
            _request("Orders", encoded=props, queue_id=1), b"hello", CLIENT
        )
        assert (first.queue_id, first.queue_offset, first.unique_key) == (1, 0, "U1")
        assert len(first.msg_ids) == 1
        second = await services.send.send(_request("Orders", queue_id=1), b"world", CLIENT)
        assert (second.queue_offset, second.unique_key) == (1, None)

        found = await services.pull.pull(PullQuery("G", QueueRef("Orders", "", 1), 0))
        assert found.outcome is PullOutcome.FOUND
        assert [m.body for m in decode_records(found.stored)] == [b"hello", b"world"]
        assert (found.next_offset, found.count) == (2, 2)
        filtered = await services.pull.pull(
            PullQuery("G", QueueRef("Orders", "", 1), 0, expression="b")
        )
        assert filtered.outcome is PullOutcome.FILTERED
        at_end = await services.pull.pull(PullQuery("G", QueueRef("Orders", "", 1), 2))
        assert at_end.outcome is PullOutcome.NOT_FOUND
        past = await services.pull.pull(PullQuery("G", QueueRef("Orders", "", 1), 9))
        assert (past.outcome, past.next_offset) == (PullOutcome.OFFSET_MOVED, 2)

        assert services.offsets.consumer_offset("G", "Orders", 1) == 0  # nothing committed yet
        await services.offsets.commit("G", "Orders", 1, 2)
        assert services.offsets.consumer_offset("G", "Orders", 1) == 2
        assert services.offsets.queue_bounds("Orders", 1) == (0, 2)

        stats = services.admin.topic_stats("Orders")
        assert [(s.queue_id, s.max_offset) for s in stats] == [(0, 0), (1, 2), (2, 0), (3, 0)]
        assert [s.consumer_offset for s in services.admin.consume_stats("G", "Orders")][1] == 2

        # Writes on a slave are refused with a type that says "go to the master".
        for slave in slaves:
            with pytest.raises(NotMasterError, match="slave"):
                await slave.send.send(_request("Orders"), b"no", CLIENT)
            with pytest.raises(NotMasterError):
                await slave.offsets.commit("G", "Orders", 1, 1)

    run_with_cluster(tmp_path, test)


def test_refusals_are_typed(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services, _ = await _services(cluster)
        with pytest.raises(InvalidTopicError, match="may contain only the characters"):
            await services.send.send(_request("bad topic!"), b"x", CLIENT)
        await services.admin.create_topic(TopicConfig("T", 2, 2))
        with pytest.raises(InvalidArgumentError, match="queueId"):
            await services.send.send(_request("T", queue_id=5), b"x", CLIENT)
        with pytest.raises(NoSuchTopicError):
            await services.pull.pull(PullQuery("G", QueueRef("Nope", "", 0), 0))
        with pytest.raises(InvalidFilterError):
            await services.pull.pull(
                PullQuery("G", QueueRef("T", "", 0), 0, expression="a", expression_type="REGEX")
            )
        with pytest.raises(InvalidArgumentError, match="negative"):
            await services.offsets.commit("G", "T", 0, -2)
        with pytest.raises(InvalidArgumentError):
            await services.admin.create_topic(TopicConfig("T2", 0, 1))

    run_with_cluster(tmp_path, test)


def test_a_queue_shrink_drains_first_and_never_strands_messages(tmp_path: Path) -> None:
    """Issue 27: shrinking a topic of 8 queues holding 40 messages to 4 was accepted and made
    the 20 messages of queues 4..7 unreachable. Now the write count shrinks first, consumers
    drain the queues above it, and only then may the read count follow."""

    async def test(cluster: Cluster) -> None:
        services, _ = await _services(cluster)
        await services.admin.create_topic(TopicConfig("Shrink", 8, 8))
        for i in range(40):
            await services.send.send(_request("Shrink", queue_id=i % 8), b"m%d" % i, CLIENT)
        await services.offsets.commit("G", "Shrink", 0, 0)  # G consumes the topic
        with pytest.raises(InvalidArgumentError, match="shrink the write count first"):
            await services.admin.create_topic(TopicConfig("Shrink", 4, 4))
        with pytest.raises(InvalidArgumentError, match="would be read by no consumer"):
            await services.admin.create_topic(TopicConfig("Shrink", 4, 8))
        await services.admin.create_topic(TopicConfig("Shrink", 8, 4))  # writes leave 4..7
        with pytest.raises(InvalidArgumentError, match=r"queue 4 .* not drained by G"):
            await services.admin.create_topic(TopicConfig("Shrink", 4, 4))
        consumed = 0
        for queue_id in range(8):  # the consumers drain every queue they read
            found = await services.pull.pull(PullQuery("G", QueueRef("Shrink", "", queue_id), 0))
            consumed += found.count
            await services.offsets.commit("G", "Shrink", queue_id, found.next_offset)
        assert consumed == 40
        await services.admin.create_topic(TopicConfig("Shrink", 4, 4))
        config = services.admin.topics()[0]["Shrink"]
        assert (config.read_queue_nums, config.write_queue_nums) == (4, 4)

    run_with_cluster(tmp_path, test)
