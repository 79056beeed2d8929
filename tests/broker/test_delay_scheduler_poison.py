"""A delay level whose head can never be delivered (issue 25 item 7): the level goes on.

A 125-character group's retry topic is 132 bytes, which no record can hold; the delay scheduler
retried that head of level 3 for ever (one warning a second), so every group's first retry and
every level-3 delayed message stopped, on every master after every failover. Now such a head
is dropped with an ERROR line and ``ledgermq_broker_scheduler_dropped_total``, and the good
message behind it is delivered on time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.broker.service.message_writer import MessageWriter
from ledgermq.broker.state.topics import SCHEDULE_TOPIC
from ledgermq.testing import virtual_time
from ledgermq.wire.message import MessageProperty, decode_records, encode_properties

from .harness import Cluster

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)

LEVEL = 3
"""Delay level 3: 1 s in the harness (``message_delay_level``: "1s 1s 1s 1s 1s")."""


def _delayed(real_topic: str, real_qid: str, body: bytes) -> tuple[bytes, int, str]:
    properties = {
        MessageProperty.REAL_TOPIC: real_topic,
        MessageProperty.REAL_QID: real_qid,
        MessageProperty.DELAY: str(LEVEL),
    }
    return body, 0, encode_properties(properties)


def test_a_poisoned_head_of_delay_level_3_does_not_hold_back_the_good_message_behind_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.clock = virtual_time.current_clock()
        try:
            await cluster.start()
            master = await cluster.master()
            made = await cluster.send(master.address, "TopicA", b"plain")
            assert made.code == 0, made.remark
            state = master.state
            assert state is not None
            writer = MessageWriter(state)
            poisons = [
                _delayed("%RETRY%" + "g" * 125, "0", b"132-byte retry topic"),
                _delayed("%RETRY%orders.v1", "0", b"no queue can hold this name"),
                _delayed("TopicA", "zero", b"queue id not a number"),
            ]
            for item in poisons:
                await writer.put(SCHEDULE_TOPIC, LEVEL - 1, [item])
            good = await writer.put(SCHEDULE_TOPIC, LEVEL - 1, [_delayed("TopicA", "0", b"good")])
            loop = asyncio.get_running_loop()
            stored_at = loop.time()
            delivered_at = None
            while loop.time() < stored_at + 6:
                queue = state.queues.find("TopicA", 0)
                if queue is not None and queue.max_offset >= 2:
                    delivered_at = loop.time()
                    break
                await asyncio.sleep(0.02)
            assert delivered_at is not None, "the good message behind the poisoned head waits"
            # Due 1 s after it was stored; the scheduler looks again at least every second.
            assert delivered_at - stored_at < 3.0
            pulled = await cluster.pull(master.address, "TopicA", 0, 1)
            assert [m.body for m in decode_records(pulled.body)] == [b"good"]
            assert good.msg_ids
            assert state.stats.scheduler_dropped == {"delay": 3}
            assert all(b.failure is None for b in cluster.brokers.values())
            assert all(
                len(b.state.dispatcher.quarantine) == 0
                for b in cluster.brokers.values()
                if b.state is not None
            )
        finally:
            await cluster.close()

    with caplog.at_level(logging.ERROR):
        virtual_time.run(asyncio.wait_for(main(), 80))
    dropped = [r.getMessage() for r in caplog.records if "can never be delivered" in r.getMessage()]
    assert len(dropped) == 3
    assert "delay scheduler" in dropped[0]


def test_a_bug_while_delivering_is_retried_not_taken_for_a_poisoned_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain ``KeyError`` / ``ValueError`` / ``TypeError`` out of the write path is a bug of
    ours, not a property of the head: the head is retried (and delivered once the failure
    passes), never dropped. They used to count as "deterministic", so a bug dropped a user's
    delayed message with one ERROR line."""

    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.clock = virtual_time.current_clock()
        try:
            await cluster.start()
            master = await cluster.master()
            made = await cluster.send(master.address, "TopicA", b"plain")
            assert made.code == 0, made.remark
            state = master.state
            assert state is not None
            failures = [KeyError("a bug"), ValueError("another"), TypeError("a third")]
            real_put = MessageWriter.put

            async def failing_put(self: MessageWriter, topic: str, *args: Any, **kw: Any) -> Any:
                if topic == "TopicA" and failures:
                    raise failures.pop(0)
                return await real_put(self, topic, *args, **kw)

            monkeypatch.setattr(MessageWriter, "put", failing_put)
            writer = MessageWriter(state)
            await real_put(writer, SCHEDULE_TOPIC, LEVEL - 1, [_delayed("TopicA", "0", b"late")])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while loop.time() < deadline:
                queue = state.queues.find("TopicA", 0)
                if queue is not None and queue.max_offset >= 2:
                    break
                await asyncio.sleep(0.05)
            assert not failures
            pulled = await cluster.pull(master.address, "TopicA", 0, 1)
            assert [m.body for m in decode_records(pulled.body)] == [b"late"]
            assert state.stats.scheduler_dropped == {}
        finally:
            await cluster.close()

    virtual_time.run(asyncio.wait_for(main(), 80))
