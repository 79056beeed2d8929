"""RocketMQ's CommitLog seen through the ledger: an entry body holds one or more message records.

Spec-broker.md section 1.2: a message's physical offset is the position of its record. For the
first (often only) record of an entry that is the entry's position plus the 48-byte entry
header; the k-th record of an entry starts where the (k-1)-th ends, at ``pos + 48 + its offset
in the body``. ConsumeQueue units and message ids mean exactly what they mean in RocketMQ, and
every reader by offset (``read_record``, ``read_record_at``, ``LedgerStore.read_body``, the key
index, send-back, view-by-id) works unchanged because every record still starts at its own
physical offset. Entries carry a channel: messages and metadata changes share the log (and its
order) and are told apart by it; NOOP entries of new leaders carry neither.

Deviation from DLedgerCommitLog (one record per entry, a batch is N entries): a batch send
(SEND_BATCH_MESSAGE, or SEND_MESSAGE with ``batch=true`` from the C++ client) is stored as ONE
entry whose body is the concatenation of its records, each with the usual layout. Why: the
ledger's cost is mostly per entry (Raft bookkeeping, the index record, the entry header and
CRCs, replication framing, the follower's decode) and on this broker's budget (three replicas
of Python on a couple of cores) it was the largest single cost of a batched send; one entry
per batch amortises it over the batch. It also makes a batch atomic: all of it commits or none
(Java's DLedger mode can commit a prefix of a batch). The exception is a batch whose records
outgrow one entry's ``maxBodyBytes`` (maxMessageSize + 4 KiB; records are larger than batched
messages by their topic and hosts): it spills into further entries of the same append, whole
records each. Going further, the master groups the sends of one event-loop pass (single sends,
send-backs and delayed messages too) into shared entries (``append_group``). The dispatcher
walks every record of a body (``scan_dispatch_records``), and a replica never needs to know how
a record was batched or grouped.

One deliberate difference from DLedgerCommitLog: RocketMQ writes ``pos + 48`` into the record's
PHYSICALOFFSET field with an append hook while the entry is encoded. Our entries are CRC-checked
end to end and encoded by the store's (C) planner, which knows nothing of message records, so the
stored field stays 0 and ``read_record`` fills it from the offset it was read at (``read_records``,
a pull's, has the store do it on its copy); every reader of records goes through one of the two.
Every replica stores identical bytes either way.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from ledgermq.wire.message import PHYSICAL_OFFSET_POSITION

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Sequence

    from ledgermq.ledger.server import AppendResult, LedgerServer

__all__ = ["BODY_OFFSET", "CHANNEL_MESSAGES", "CHANNEL_METADATA", "CommitLog"]

CHANNEL_MESSAGES: Final = 1
"""Entry channel of message records."""
CHANNEL_METADATA: Final = 2
"""Entry channel of metadata changes (broker.state.metadata)."""
BODY_OFFSET: Final = 48
"""Ledger entry header size: physical offset = entry pos + BODY_OFFSET (spec-broker 1.2)."""

_INT64: Final = struct.Struct(">q")


class CommitLog:
    """Appends and reads of message records and metadata changes over one ledger replica."""

    def __init__(self, ledger: LedgerServer) -> None:
        self._ledger = ledger

    def submit_messages(self, records: Sequence[bytes]) -> asyncio.Future[AppendResult]:
        """Propose records as leader (raises at once if refused); the future completes on
        commit. ``physical_offsets`` turns its result into the records' offsets."""
        return self._ledger.submit(records, channel=CHANNEL_MESSAGES)

    @staticmethod
    def physical_offsets(
        result: AppendResult, starts: Sequence[int], firsts: Sequence[int]
    ) -> list[int]:
        """The physical offset of every record of an append whose entries held consecutive
        records: ``starts`` are the records' offsets in their concatenation, ``firsts`` the
        number of each entry's first record."""
        offsets: list[int] = []
        bounds = [*firsts[1:], len(starts)]
        for pos, first, stop in zip(result.positions, firsts, bounds, strict=True):
            base = pos + BODY_OFFSET - starts[first]
            offsets.extend([base + start for start in starts[first:stop]])
        return offsets

    @property
    def max_entry_bytes(self) -> int:
        """The largest entry body the ledger takes."""
        return self._ledger.store.max_body_bytes

    async def append_metadata(self, bodies: Sequence[bytes]) -> int:
        """Append metadata changes as leader; the ledger index of the last, once committed."""
        result = await self._ledger.append(bodies, channel=CHANNEL_METADATA)
        return result.last_index

    def read_record(self, physical_offset: int, size: int) -> bytes:
        """The record of ``size`` bytes at ``physical_offset``, its PHYSICALOFFSET filled in."""
        raw = self._ledger.store.read_body(physical_offset, size)
        at = PHYSICAL_OFFSET_POSITION
        return b"".join((raw[:at], _INT64.pack(physical_offset), raw[at + 8 :]))

    def record_size(self, physical_offset: int) -> int:
        """The TOTALSIZE of the record at ``physical_offset`` (a message id names no size)."""
        head = self._ledger.store.read_body(physical_offset, 4)
        return int.from_bytes(head, "big", signed=True)

    def read_record_at(self, physical_offset: int) -> bytes:
        """The whole record at ``physical_offset`` (a message id or a send-back names an
        offset, not a size)."""
        return self.read_record(physical_offset, self.record_size(physical_offset))

    def read_records(self, offsets: Sequence[int], sizes: Sequence[int]) -> bytes:
        """The records of ``sizes[i]`` bytes at ``offsets[i]``, back to back, each with its
        PHYSICALOFFSET filled in: a PULL response body.

        One store read for all of them, which fills in the field on its copy
        (``read_bodies(stamp_at=...)``): ``read_record`` per message cost a store call, three
        slices and a join each, and joining those was another copy of the whole body.
        """
        if sizes and min(sizes) < PHYSICAL_OFFSET_POSITION + 8:
            # Too short to be records (a damaged queue unit): what read_record makes of them.
            return b"".join(map(self.read_record, offsets, sizes))
        return self._ledger.store.read_bodies(offsets, sizes, stamp_at=PHYSICAL_OFFSET_POSITION)
