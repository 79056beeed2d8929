"""Timer messages through the service and the remoting door (issue 16 section 3): stored
invisible in the timer topic, delivered once into their topic when due (keeping id, keys and
properties, with ``TIMER_OUT_MS``), recalled, refused beyond ``timerMaxDelaySec``, delivered at
once when due in the past, and the pending set surviving the master's loss and a restart.

An in-process 3-replica group (``harness.Cluster``) in virtual time
(``ledgermq.testing.virtual_time``): due times are a second or so away, and cost no wall time.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import (
    IllegalMessageError,
    InvalidArgumentError,
    NotFoundError,
    NotRecallableError,
    UnavailableError,
)
from ledgermq.broker.service.message_writer import MessageWriter
from ledgermq.broker.service.send import SendRequest, SendResult
from ledgermq.broker.service.timers import RecallHandle
from ledgermq.broker.state.ops import TimerOp
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.timers import Fired
from ledgermq.testing import virtual_time
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import MessageExt, decode_records, encode_batch, encode_properties
from ledgermq.wire.route import TopicConfig

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.ops import MetadataOp

pytestmark = pytest.mark.timeout(120)

CLIENT = "10.0.9.9:4321"


async def _master(
    cluster: Cluster, exclude: str | None = None
) -> tuple[BrokerServer, BrokerServices]:
    master = await cluster.master(exclude=exclude)
    assert master.services is not None
    return master, master.services


def _now_ms() -> int:
    return virtual_time.current_clock().wall_ms()


async def _send(
    services: BrokerServices, topic: str, body: bytes, props: Mapping[str, str]
) -> SendResult:
    request = SendRequest(
        producer_group="P", topic=topic, default_topic="TBW102", default_topic_queue_nums=1,
        queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
        encoded=encode_properties(props), reconsume_times=0,
        max_reconsume_times=None, batch=False,
    )  # fmt: skip
    return await services.send.send(request, body, CLIENT)


def _messages(broker: BrokerServer, topic: str) -> list[MessageExt]:
    """Everything in queue 0 of ``topic`` on ``broker``, in order."""
    state = broker.state
    assert state is not None
    queue = state.queues.find(topic, 0)
    if queue is None:
        return []
    found = []
    for offset in range(queue.min_offset, queue.max_offset):
        unit = queue.get(offset)
        assert unit is not None
        found.extend(decode_records(state.commitlog.read_record_at(unit[0])))
    return found


async def _wait_for(broker: BrokerServer, topic: str, count: int, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while len(_messages(broker, topic)) < count:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{topic} has {len(_messages(broker, topic))} of {count}")
        await asyncio.sleep(0.02)


def test_delivered_once_when_due_with_its_id_keys_and_properties(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        sent_ms = _now_ms()
        result = await _send(
            services, "T", b"later",
            {"TIMER_DELAY_MS": "1200", "KEYS": "k1 k2", "TAGS": "a", "UNIQ_KEY": "U1", "x": "y"},
        )  # fmt: skip
        assert result.recall_handle is not None
        handle = RecallHandle.parse(result.recall_handle)
        assert (handle.topic, handle.broker_name, handle.message_id) == ("T", "broker-a", "U1")
        assert sent_ms + 1200 <= handle.due_ms <= _now_ms() + 1200
        assert result.queue_id == 0
        await asyncio.sleep(0.3)
        assert _messages(master, "T") == []  # invisible until due
        assert len(_messages(master, TIMER_TOPIC)) == 1
        assert master.state is not None
        assert len(master.state.metadata.timers) == 1
        await _wait_for(master, "T", 1)
        (delivered,) = _messages(master, "T")
        assert delivered.store_timestamp >= handle.due_ms
        assert delivered.store_timestamp - handle.due_ms < 1000
        assert delivered.body == b"later"
        props = delivered.properties
        assert props["UNIQ_KEY"] == "U1"
        assert (props["KEYS"], props["TAGS"], props["x"]) == ("k1 k2", "a", "y")
        assert props["TIMER_OUT_MS"] == str(handle.due_ms)
        assert "REAL_TOPIC" not in props
        assert "REAL_QID" not in props
        await asyncio.sleep(1.5)
        assert len(_messages(master, "T")) == 1  # once
        assert len(master.state.metadata.timers) == 0
        assert master.state.metadata.timers.wheel.firing() == []
        for broker in cluster.brokers.values():  # every replica saw the timer end
            assert broker.state is not None
            assert len(broker.state.metadata.timers) == 0
            assert broker.state.metadata.timers.wheel.firing() == []

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_past_due_delivers_at_once_and_limits_are_refused(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        past = await _send(services, "T", b"now", {"TIMER_DELIVER_MS": str(_now_ms() - 5000)})
        assert past.recall_handle is None
        assert [m.body for m in _messages(master, "T")] == [b"now"]
        four_days = str(_now_ms() + 4 * 24 * 3600 * 1000)
        with pytest.raises(IllegalMessageError, match="timerMaxDelaySec"):
            await _send(services, "T", b"x", {"TIMER_DELIVER_MS": four_days})
        with pytest.raises(IllegalMessageError, match="whole number"):
            await _send(services, "T", b"x", {"TIMER_DELAY_SEC": "soon"})
        with pytest.raises(IllegalMessageError, match="negative"):
            await _send(services, "T", b"x", {"TIMER_DELAY_MS": "-5"})
        batch = SendRequest(
            producer_group="P", topic="T", default_topic=None, default_topic_queue_nums=1,
            queue_id=0, sys_flag=0, born_timestamp=0, flag=0, encoded="",
            reconsume_times=0, max_reconsume_times=None, batch=True,
        )  # fmt: skip
        body = encode_batch([(b"a", 0, encode_properties({"TIMER_DELAY_SEC": "5"}))])
        with pytest.raises(IllegalMessageError, match="batch"):
            await services.send.send(batch, body, CLIENT)
        assert [m.body for m in _messages(master, "T")] == [b"now"]  # nothing else stored
        assert master.state is not None
        assert len(master.state.metadata.timers) == 0
        # precedence: TIMER_DELAY_SEC over TIMER_DELIVER_MS (RocketMQ's order)
        mixed = await _send(services, "T", b"m", {"TIMER_DELAY_SEC": "60", "TIMER_DELIVER_MS": "1"})
        assert mixed.recall_handle is not None
        assert RecallHandle.parse(mixed.recall_handle).due_ms >= _now_ms() + 59_000

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_recall(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        kept = await _send(services, "T", b"kept", {"TIMER_DELAY_MS": "800", "UNIQ_KEY": "K"})
        gone = await _send(services, "T", b"gone", {"TIMER_DELAY_MS": "800", "UNIQ_KEY": "G"})
        assert kept.recall_handle is not None
        assert gone.recall_handle is not None
        with pytest.raises(InvalidArgumentError, match="topic"):
            await services.timers.recall("Other", gone.recall_handle)
        with pytest.raises(InvalidArgumentError, match="invalid"):
            await services.timers.recall("T", "not a handle!")
        assert await services.timers.recall("T", gone.recall_handle) == "G"
        with pytest.raises(NotFoundError, match="recalled already"):
            await services.timers.recall("T", gone.recall_handle)
        await _wait_for(master, "T", 1)
        await asyncio.sleep(1.0)
        assert [m.body for m in _messages(master, "T")] == [b"kept"]
        with pytest.raises(NotFoundError, match="delivered"):
            await services.timers.recall("T", kept.recall_handle)
        assert master.state is not None
        assert len(master.state.metadata.timers) == 0

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_remoting_send_and_recall(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        props = {"TIMER_DELAY_SEC": "30", "UNIQ_KEY": "R1"}
        sent = await cluster.send(master.address, "T", b"r", properties=props)
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        handle = sent.ext_fields["recallHandle"]
        fields = {"producerGroup": "pg", "topic": "T", "recallHandle": handle}
        recalled = await cluster.request(master.address, MQRequestCode.RECALL_MESSAGE, fields)
        assert recalled.code == MQResponseCode.SUCCESS, recalled.remark
        assert recalled.ext_fields["msgId"] == "R1"
        again = await cluster.request(master.address, MQRequestCode.RECALL_MESSAGE, fields)
        assert again.code == MQResponseCode.NO_MESSAGE
        assert again.remark is not None
        assert "recalled already" in again.remark
        far = {"TIMER_DELAY_SEC": str(4 * 24 * 3600)}
        refused = await cluster.send(master.address, "T", b"f", properties=far)
        assert refused.code == MQResponseCode.MESSAGE_ILLEGAL
        assert refused.remark is not None
        assert "timerMaxDelaySec" in refused.remark

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_failover_and_restart_keep_the_pending_set(tmp_path: Path) -> None:
    """Timers fired before the master goes away are not delivered again; those still pending
    are delivered by its successor; a restarted replica rebuilds the same table."""

    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        for i in range(5):
            await _send(services, "T", b"early%d" % i, {"TIMER_DELAY_MS": "300"})
        for i in range(20):
            await _send(services, "T", b"late%d" % i, {"TIMER_DELAY_MS": "2500"})
        await _wait_for(master, "T", 5)
        node = next(n for n, b in cluster.brokers.items() if b is master)
        await cluster.stop_broker(node)
        successor, _ = await _master(cluster, exclude=node)
        await _wait_for(successor, "T", 25)
        await asyncio.sleep(1.0)
        bodies = sorted(m.body for m in _messages(successor, "T"))
        assert bodies == sorted(
            [b"early%d" % i for i in range(5)] + [b"late%d" % i for i in range(20)]
        )
        restarted = await cluster.start_broker(node)
        assert restarted.state is not None
        assert successor.state is not None
        deadline = asyncio.get_running_loop().time() + 10
        while (
            restarted.state.metadata.timers.snapshot()["wheel"]
            != (successor.state.metadata.timers.snapshot()["wheel"])
            or len(_messages(restarted, "T")) < 25
        ):
            assert asyncio.get_running_loop().time() < deadline, (
                "the restarted replica did not catch up"
            )
            await asyncio.sleep(0.05)
        assert len(restarted.state.metadata.timers) == 0

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_a_timer_left_firing_is_delivered_by_the_next_master(tmp_path: Path) -> None:
    """The master committed a timer's Firing but never wrote its message (its driver is
    stopped here): a recall is too late, and the next master writes the message, once."""

    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        assert master.state is not None
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        for _ in range(500):  # the driver starts once the promotion is done: then stop it
            if services.timers.running:
                break
            await asyncio.sleep(0.01)
        await services.timers.stop()
        sent = await _send(services, "T", b"f", {"TIMER_DELAY_MS": "200", "UNIQ_KEY": "F"})
        assert sent.recall_handle is not None
        await asyncio.sleep(0.4)
        table = master.state.metadata.timers
        plan = table.wheel.plan_fire(_now_ms(), 10)
        assert len(plan) == 1
        await master.state.writer.submit(TimerOp(tuple(plan)))
        assert table.is_firing(plan[0].timer_id)
        with pytest.raises(NotRecallableError, match="being delivered"):
            await services.timers.recall("T", sent.recall_handle)
        await asyncio.sleep(0.3)
        assert _messages(master, "T") == []
        node = next(n for n, b in cluster.brokers.items() if b is master)
        await cluster.stop_broker(node)
        successor, _ = await _master(cluster, exclude=node)
        await _wait_for(successor, "T", 1)
        await asyncio.sleep(0.5)
        (delivered,) = _messages(successor, "T")
        assert delivered.properties["UNIQ_KEY"] == "F"
        assert successor.state is not None
        assert successor.state.metadata.timers.wheel.firing() == []

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_a_compressed_body_is_delivered_inflated(tmp_path: Path) -> None:
    """A remoting client compresses large bodies (sysFlag bit 0): the timer message keeps the
    body as sent, and its delivery carries it inflated with the flag cleared."""

    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        body = b"0123456789" * 1000
        request = SendRequest(
            producer_group="P", topic="T", default_topic=None, default_topic_queue_nums=1,
            queue_id=0, sys_flag=1, born_timestamp=0, flag=7,
            encoded=encode_properties({"TIMER_DELAY_MS": "300"}), reconsume_times=0,
            max_reconsume_times=None, batch=False,
        )  # fmt: skip
        await services.send.send(request, zlib.compress(body), CLIENT)
        await _wait_for(master, "T", 1)
        (delivered,) = _messages(master, "T")
        assert delivered.body == body
        assert delivered.flag == 7
        assert delivered.sys_flag & 1 == 0

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_a_timer_that_can_never_be_delivered_is_dropped_and_the_others_go_on(
    tmp_path: Path,
) -> None:
    """Issue 25 item 7: a timer whose real topic no record can hold (a 132-byte retry topic)
    was retried for ever; one whose name no queue can hold (``%RETRY%orders.v1``) was written,
    quarantined by every replica's dispatcher, and so never ended: written again and again.
    Both are now ended as fired, counted, and the good timer is delivered on time."""

    async def test(cluster: Cluster) -> None:
        master, services = await _master(cluster)
        await services.admin.create_topic(TopicConfig("T", 1, 1))
        state = master.state
        assert state is not None
        writer = MessageWriter(state)
        due = _now_ms() + 300
        for n, topic in enumerate(("%RETRY%" + "g" * 125, "%RETRY%orders.v1")):
            props = {"REAL_TOPIC": topic, "REAL_QID": "0", "TIMER_OUT_MS": str(due),
                     "UNIQ_KEY": f"BAD{n}"}  # fmt: skip
            await writer.put(TIMER_TOPIC, 0, [(b"poison", 0, encode_properties(props))])
        await _send(services, "T", b"good", {"TIMER_DELAY_MS": "800", "UNIQ_KEY": "G"})
        await _wait_for(master, "T", 1, timeout_s=4)
        deadline = asyncio.get_running_loop().time() + 5
        while any(
            b.state is None
            or len(b.state.metadata.timers)
            or b.state.metadata.timers.wheel.firing()
            for b in cluster.brokers.values()
        ):
            assert asyncio.get_running_loop().time() < deadline, (
                "a timer that cannot be delivered stays pending"
            )
            await asyncio.sleep(0.02)
        assert state.stats.scheduler_dropped == {"timer": 2}
        assert [m.body for m in _messages(master, "T")] == [b"good"]
        for broker in cluster.brokers.values():
            assert broker.state is not None
            assert len(broker.state.dispatcher.quarantine) == 0

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_a_dropped_timer_whose_end_must_be_written_again_is_counted_once(tmp_path: Path) -> None:
    """Found in review of issue 25 item 7: when the ``Fired`` write that ends a dropped timer
    failed (no quorum for a moment), the next round dropped it again: a second ERROR line and
    a second count of ``ledgermq_broker_scheduler_dropped_total`` for one timer."""

    async def test(cluster: Cluster) -> None:
        master, _services = await _master(cluster)
        state = master.state
        assert state is not None
        real_submit = state.writer.submit
        failed: list[object] = []

        async def failing_once(op: MetadataOp) -> None:
            ends = isinstance(op, TimerOp) and any(isinstance(r, Fired) for r in op.records)
            if ends and not failed:
                failed.append(op)
                raise UnavailableError("no quorum for a moment")
            await real_submit(op)

        state.writer.submit = failing_once  # type: ignore[method-assign]
        writer = MessageWriter(state)
        props = {"REAL_TOPIC": "%RETRY%orders.v1", "REAL_QID": "0",
                 "TIMER_OUT_MS": str(_now_ms() + 200), "UNIQ_KEY": "BAD"}  # fmt: skip
        await writer.put(TIMER_TOPIC, 0, [(b"poison", 0, encode_properties(props))])
        deadline = asyncio.get_running_loop().time() + 8
        while len(state.metadata.timers) or state.metadata.timers.wheel.firing():
            assert asyncio.get_running_loop().time() < deadline, "the dropped timer stays pending"
            await asyncio.sleep(0.02)
        assert failed, "the Fired write never failed: the test did not test anything"
        assert state.stats.scheduler_dropped == {"timer": 1}

    run_with_cluster(tmp_path, test, in_virtual_time=True)
