"""How a master changes metadata: through the ledger, batched, answered once applied.

A change is acknowledged only after its ledger entry is committed by a majority *and* applied
here, so a reply "offset committed" survives the loss of this master, and a read right after a
reply sees the change. Consumer offsets arrive often (each consumer commits every queue every
few seconds, and push consumers piggy-back a commit on every pull), so they are staged and
written together: at most one offsets entry is in flight, and everything staged meanwhile goes
into the next one. Staged and in-flight values are visible to this master's reads at once, as
RocketMQ's in-memory offset table is; they are only *acknowledged* once committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ledgermq.broker.errors import (
    MaybeStoredError,
    NotStoredError,
    ServiceError,
    UnavailableError,
)
from ledgermq.broker.state.ops import CommitOffsetsOp
from ledgermq.errors import LedgerMQError, OutcomeUnknownError

if TYPE_CHECKING:
    from ledgermq.broker.state.metadata import BrokerMetadata
    from ledgermq.broker.state.ops import MetadataOp
    from ledgermq.broker.storage.commitlog import CommitLog
    from ledgermq.broker.storage.dispatcher import Dispatcher

__all__ = ["MetadataWriter"]

_log = logging.getLogger(__name__)

_OffsetKey = tuple[str, str, int]
"""(group, topic, queue id)."""


class MetadataWriter:
    def __init__(self, commitlog: CommitLog, dispatcher: Dispatcher, metadata: BrokerMetadata):
        self._commitlog = commitlog
        self._dispatcher = dispatcher
        self._metadata = metadata
        self._staged: dict[_OffsetKey, int] = {}
        self._staged_waiters: list[asyncio.Future[None]] = []
        self._in_flight: dict[_OffsetKey, int] = {}
        self._flusher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ generic changes
    async def submit(self, op: MetadataOp) -> None:
        """Append one change and return once it is committed and applied here."""
        try:
            index = await self._commitlog.append_metadata([op.encode()])
        except LedgerMQError as exc:
            raise _not_stored(exc) from exc
        await self._dispatcher.wait_dispatched(index)

    # ------------------------------------------------------------------ consumer offsets
    def offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The newest offset this broker knows for the queue (staged, in flight or applied)."""
        key = (group, topic, queue_id)
        staged = self._staged.get(key)
        if staged is not None:
            return staged
        in_flight = self._in_flight.get(key)
        if in_flight is not None:
            return in_flight
        return self._metadata.offset(group, topic, queue_id)

    def stage_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record an offset to be written soon; nobody waits for it (a pull's commitOffset)."""
        self._staged[(group, topic, queue_id)] = offset
        self._start_flusher()

    async def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record an offset and return once it is committed (UPDATE_CONSUMER_OFFSET)."""
        self._staged[(group, topic, queue_id)] = offset
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._staged_waiters.append(future)
        self._start_flusher()
        await future

    def _start_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_offsets())

    async def _flush_offsets(self) -> None:
        while self._staged:
            batch, self._staged = self._staged, {}
            waiters, self._staged_waiters = self._staged_waiters, []
            self._in_flight = batch
            op = CommitOffsetsOp(tuple((g, t, q, o) for (g, t, q), o in batch.items()))
            error: BaseException | None = None
            try:
                index = await self._commitlog.append_metadata([op.encode()])
                await self._dispatcher.wait_dispatched(index)
            except LedgerMQError as exc:
                error = _not_stored(exc)
                _log.warning("%d consumer offsets were not stored: %s", len(batch), exc)
            except asyncio.CancelledError:
                error = UnavailableError("the broker is shutting down")
                raise
            finally:
                self._in_flight = {}
                for future in waiters:
                    if not future.done():
                        if error is None:
                            future.set_result(None)
                        else:
                            future.set_exception(error)

    def drop_staged(self) -> None:
        """On losing mastership: staged offsets were never acknowledged; forget them."""
        self._staged.clear()
        for future in self._staged_waiters:
            if not future.done():
                future.set_exception(
                    UnavailableError(
                        "this broker stopped being the master before the offsets were stored"
                    )
                )
        self._staged_waiters = []

    async def close(self) -> None:
        self.drop_staged()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher


def _not_stored(exc: LedgerMQError) -> ServiceError:
    """The answer for a change the ledger did not acknowledge. A refusal stored nothing; an
    unknown outcome (a term change or timeout before the quorum) may still commit, and saying
    "not stored" then would be false: it is ``MaybeStoredError``, as a send answers the same
    case (found by the chaos suite's POP work: an ack told "not stored" could have taken
    effect)."""
    if isinstance(exc, OutcomeUnknownError):
        return MaybeStoredError(f"the change may or may not have been stored: {exc}")
    if exc.retriable:
        return UnavailableError(f"the change was not stored: {exc}")
    return NotStoredError(f"the change was not stored: {exc}")
