"""The pull reader of a chaos run: it reads the topic while the faults happen, and commits and
queries its consumer group's offsets as it goes.

What the checker does with its record (``checker.py``, rules 6 and 7):

- every message it read must be one a producer sent and was not refused, at the queue offset
  where the healed cluster holds it (acknowledged there, or of unknown outcome and stored
  there): a read of anything else is a phantom or a dirty read (data that was visible and then
  vanished or changed);
- an offset commit the broker acknowledged (it answers once the ledger committed it) is never
  lost: a query invoked after the acknowledgement, and the group's offset after healing, are at
  least that offset; and a query never answers an offset nobody committed.

The reader follows each queue from offset 0 in turn, ``_PULL_BATCH`` messages a pull, and
commits the next offset to read after every pull that moved; it queries every queue's committed
offset every ``_QUERY_EVERY_S``. Its requests go where the client sends them (the master, or a
slave for pulls while the group has none), with the client's one retry after a route refresh.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

from ledgermq.client import PullConsumer, PullStatus
from ledgermq.errors import LedgerMQError
from ledgermq.testing.chaos.history import LiveRead, OffsetOp, Outcome, parse_body, queue_key
from ledgermq.testing.chaos.workload import classify

if TYPE_CHECKING:
    import threading

    from ledgermq.client import MessageQueue

__all__ = ["READER_GROUP", "PullReader", "final_offsets"]

READER_GROUP: Final = "chaos-reader"
_PULL_BATCH: Final = 64
_TIMEOUT_S: Final = 2.0
_QUERY_EVERY_S: Final = 1.0
_PAUSE_S: Final = 0.05


class PullReader:
    """Reads ``topic`` until ``stop`` is set (module docstring); ``origin`` as the workload's."""

    def __init__(self, namesrv_addr: str, topic: str, *, origin: float) -> None:
        self.namesrv_addr = namesrv_addr
        self.topic = topic
        self.origin = origin
        self.reads: list[LiveRead] = []
        self.offset_ops: list[OffsetOp] = []
        self.errors: list[str] = []

    def now_ms(self) -> float:
        return (time.monotonic() - self.origin) * 1000

    async def run(self, stop: threading.Event) -> None:
        consumer = PullConsumer(
            READER_GROUP,
            self.namesrv_addr,
            request_timeout_s=_TIMEOUT_S,
            instance_name="chaos-reader",
            route_refresh_interval_s=1.0,
        )
        await consumer.start()
        try:
            queues: list[MessageQueue] = []
            while not queues and not stop.is_set():
                try:
                    queues = await consumer.fetch_queues(self.topic)
                except LedgerMQError:
                    await asyncio.sleep(_PAUSE_S)
            position = {queue_key(mq.broker_name, mq.queue_id): 0 for mq in queues}
            committed = dict.fromkeys(position, -1)  # by ``queue_key``, as ``position``
            queried_at = 0.0
            while not stop.is_set():
                for mq in queues:
                    key = queue_key(mq.broker_name, mq.queue_id)
                    await self._pull(consumer, mq, position)
                    moved = position[key] != committed[key]
                    if moved and await self._commit(consumer, mq, position[key]):
                        committed[key] = position[key]
                if time.monotonic() - queried_at >= _QUERY_EVERY_S:
                    queried_at = time.monotonic()
                    for mq in queues:
                        await self._query(consumer, mq)
                await asyncio.sleep(_PAUSE_S)
        except Exception as exc:  # noqa: BLE001 - reported in the run's notes, not lost
            self.errors.append(f"pull reader crashed: {exc!r}")
        finally:
            await consumer.shutdown()

    async def _pull(
        self, consumer: PullConsumer, mq: MessageQueue, position: dict[int, int]
    ) -> None:
        key = queue_key(mq.broker_name, mq.queue_id)
        offset = position[key]
        try:
            result = await consumer.pull(mq, offset, _PULL_BATCH, timeout_s=_TIMEOUT_S)
        except LedgerMQError:
            return  # nothing read; a fault, most likely: the next round tries again
        now = self.now_ms()
        for message in result.messages:
            sent = parse_body(message.body)
            if sent is not None:
                self.reads.append(LiveRead(now, key, message.queue_offset, *sent))
        if result.status in (PullStatus.FOUND, PullStatus.OFFSET_ILLEGAL):
            position[key] = max(offset, result.next_begin_offset)

    async def _commit(self, consumer: PullConsumer, mq: MessageQueue, offset: int) -> bool:
        invoked = self.now_ms()
        try:
            await consumer.commit_offset(mq, offset)
        except LedgerMQError as exc:
            outcome = classify(exc)  # as a send's
        else:
            outcome = Outcome.OK
        key = queue_key(mq.broker_name, mq.queue_id)
        self.offset_ops.append(OffsetOp("commit", key, invoked, self.now_ms(), outcome, offset))
        return outcome is Outcome.OK

    async def _query(self, consumer: PullConsumer, mq: MessageQueue) -> None:
        invoked = self.now_ms()
        try:
            answer = await consumer.fetch_committed_offset(mq)
        except LedgerMQError:
            outcome, offset = Outcome.FAILED, -1
        else:
            outcome, offset = Outcome.OK, -1 if answer is None else answer
        key = queue_key(mq.broker_name, mq.queue_id)
        self.offset_ops.append(OffsetOp("query", key, invoked, self.now_ms(), outcome, offset))


async def final_offsets(namesrv_addr: str, topic: str, attempts: int = 10) -> dict[int, int]:
    """The reader group's committed offset of every queue of ``topic``, as the master answers
    once the cluster is healed (-1: none stored, or no answer after ``attempts`` tries)."""
    found: dict[int, int] = {}
    async with PullConsumer(READER_GROUP, namesrv_addr, request_timeout_s=_TIMEOUT_S) as consumer:
        queues = await consumer.fetch_queues(topic)
        for mq in queues:
            key = queue_key(mq.broker_name, mq.queue_id)
            found[key] = -1
            for _ in range(attempts):
                try:
                    answer = await consumer.fetch_committed_offset(mq)
                except LedgerMQError:
                    await asyncio.sleep(0.5)
                    continue
                found[key] = -1 if answer is None else answer
                break
    return found
