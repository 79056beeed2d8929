"""Storing messages on the master: queue offsets, records, the ledger append, and its outcome.

One path for every way a message enters the log (a producer's send, a consumer's send-back, a
delayed message coming due), so they all get the same offsets, errors and statistics.
Refusals are typed (``broker.errors``) and follow spec-broker.md section 3.6, with one
correction: RocketMQ answers a refused append (not leader, transfer in progress) with
SYSTEM_ERROR because DLedger hides the reason behind ``pos == -1``; we raise ``UnavailableError``
(remoting: SERVICE_NOT_AVAILABLE, which tells the client to look the route up again), and keep
``MaybeStoredError`` (SYSTEM_ERROR) for "not acknowledged in time" (the message may still be
stored, so a retry can duplicate it, as in RocketMQ) and ``BusyError`` (SYSTEM_BUSY) for
back-pressure.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.broker.errors import (
    BusyError,
    MaybeStoredError,
    NotStoredError,
    ServiceError,
    UnavailableError,
)
from ledgermq.broker.names import require_topic_name
from ledgermq.broker.storage.append_group import AppendGroup, AppendRefusedError
from ledgermq.errors import (
    ConnectError,
    LeaderPendingFullError,
    LedgerMQError,
    LedgerRequestError,
)
from ledgermq.net import split_address
from ledgermq.raft import ResponseCode
from ledgermq.wire.message import SysFlag, create_offset_message_id, encode_records

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["MessageWriter", "PutResult", "split_host_port"]


@dataclass(frozen=True, slots=True)
class PutResult:
    msg_ids: list[str]
    """Offset message ids, one per message."""
    physical_offsets: list[int]
    first_queue_offset: int


@functools.lru_cache(maxsize=4096)
def split_host_port(address: str) -> tuple[str, int]:
    """``"ip:port"`` as the record's host fields want it; ``0.0.0.0:0`` when it is not an
    IPv4 address (an in-memory test connection, a host name)."""
    try:
        host, port = split_address(address)
        ipaddress.IPv4Address(host)
    except (ConnectError, ValueError):
        return "0.0.0.0", 0  # noqa: S104 - a record field, not a bind address
    return host, port


class MessageWriter:
    def __init__(self, state: BrokerState) -> None:
        self._state = state
        self._group = AppendGroup(state.commitlog)

    async def put(
        self,
        topic: str,
        queue_id: int,
        items: Sequence[tuple[bytes, int, str]],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        reconsume_times: int = 0,
    ) -> PutResult:
        """Store ``items`` (body, flag, properties string) in one queue; returns once committed.

        The records join the other puts of this loop pass in shared ledger entries
        (``append_group``'s module docstring says why); a batch is stored or refused as a whole.
        Raises a ``ServiceError`` that says why (``broker.errors``).
        """
        future: asyncio.Future[PutResult] = asyncio.get_running_loop().create_future()

        def settle(outcome: PutResult | ServiceError) -> None:
            if future.done():
                return
            if isinstance(outcome, PutResult):
                future.set_result(outcome)
            else:
                future.set_exception(outcome)

        self.submit(
            topic, queue_id, items, settle,
            sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=born_host,
            reconsume_times=reconsume_times,
        )  # fmt: skip
        return await future

    def submit(
        self,
        topic: str,
        queue_id: int,
        items: Sequence[tuple[bytes, int, str]],
        on_done: Callable[[PutResult | ServiceError], None],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        reconsume_times: int = 0,
    ) -> None:
        """``put`` without a coroutine, for the send path: ``on_done`` gets the result or the
        refusal once, from the append's completion. Raises ``NotMasterError`` at once
        when this replica is not the master, ``InvalidTopicError`` for a topic no replica could
        index (whoever asked: the doors check names first; this is the last stop before the
        ledger, so a bad name never becomes a committed record: issue 25)."""
        state = self._state
        require_topic_name(topic)
        state.require_master("storing messages")
        now = state.now_ms()
        store_host = split_host_port(state.config.address)
        born = split_host_port(born_host)
        table = state.queue_offsets
        first = table.assign(topic, queue_id, len(items))
        blob, starts = encode_records(
            topic=topic,
            queue_id=queue_id,
            items=items,
            first_queue_offset=first,
            sys_flag=sys_flag & ~SysFlag.TRANSACTION_MASK,
            born_timestamp=born_timestamp or now,
            born_host=born,
            store_timestamp=now,
            store_host=store_host,
            reconsume_times=reconsume_times,
        )
        broker_name = state.config.broker_name

        def settle(outcome: list[int] | BaseException) -> None:
            if isinstance(outcome, AppendRefusedError):  # nothing stored; offsets went back
                on_done(_refusal(broker_name, outcome.cause))
            elif isinstance(outcome, asyncio.CancelledError):
                on_done(
                    MaybeStoredError("the broker is shutting down; the message may still be stored")
                )
            elif isinstance(outcome, BaseException):
                on_done(
                    MaybeStoredError(
                        f"the message was not acknowledged by a quorum ({outcome}); it may "
                        "still be stored, so a retry can duplicate it"
                    )
                )
            else:
                host, port = store_host
                state.stats.record_put(topic, len(items), len(blob))
                ids = [create_offset_message_id(host, port, offset) for offset in outcome]
                on_done(PutResult(ids, outcome, first))

        self._group.add_callback(
            blob, starts, lambda: table.roll_back(topic, queue_id, first), settle
        )


def _refusal(broker_name: str, exc: LedgerMQError) -> ServiceError:
    if isinstance(exc, LeaderPendingFullError):
        return BusyError(f"[PC_SYNCHRONIZED] broker busy: {exc}")
    if isinstance(exc, LedgerRequestError) and exc.code == ResponseCode.DISK_FULL:
        # RocketMQ's answer to a store that cannot write (SERVICE_NOT_AVAILABLE): nothing was
        # stored, try again (the master is handing its leadership to a replica with room)
        return UnavailableError(
            f"broker {broker_name} cannot store messages now: {exc}; nothing was stored"
        )
    if isinstance(exc, LedgerRequestError):  # too large for the ledger
        return NotStoredError(f"the message was refused: {exc}")
    return UnavailableError(f"broker {broker_name} cannot accept messages now: {exc}")
