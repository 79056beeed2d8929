"""Trace records batched into trace-topic messages in the background, for whoever stores them:
our clients through their internal producer (``client.trace``), the broker through its own send
service (``broker.service.trace``). One message carries up to 100 records (RocketMQ's
``AsyncTraceDispatcher`` batches alike), its keys the records' message ids; a full queue drops
and counts instead of slowing the traced path down. In ``net``, the lowest layer that runs
asyncio tasks, below both of its users (``wire``, where the record format is, stays pure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["TraceBatches"]

_log = logging.getLogger(__name__)

BATCH_RECORDS: Final = 100
BATCH_WAIT_S: Final = 0.2
QUEUE_LIMIT: Final = 20_000


class TraceBatches:
    """``submit`` never blocks; a background task hands ``store`` one body of records and
    their sorted message ids per batch, at least every 0.2 s or at once when 100 wait."""

    def __init__(self, topic: str, store: Callable[[bytes, list[str]], Awaitable[None]]) -> None:
        self.topic = topic
        self._store = store
        self._pending: list[tuple[str, str]] = []
        """(record, msg id) not stored yet."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.stored = 0
        self.dropped = 0

    def submit(self, record: str, msg_id: str) -> None:
        """Queue a record (past the queue limit it is dropped and counted)."""
        if len(self._pending) >= QUEUE_LIMIT:
            self.dropped += 1
            return
        self._pending.append((record, msg_id))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"trace to {self.topic}"
            )
        if len(self._pending) >= BATCH_RECORDS:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), BATCH_WAIT_S)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Store what is queued now; a batch the store refuses is dropped, counted and logged."""
        while self._pending:
            batch, self._pending = self._pending[:BATCH_RECORDS], self._pending[BATCH_RECORDS:]
            body = "".join(record for record, _ in batch).encode()
            keys = sorted({msg_id for _, msg_id in batch if msg_id})
            try:
                await self._store(body, keys)
                self.stored += len(batch)
            except LedgerMQError as exc:
                self.dropped += len(batch)
                _log.warning("%d trace records for %s dropped: %s", len(batch), self.topic, exc)

    async def close(self) -> None:
        """Store what is left (as far as the store still takes it), then stop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
