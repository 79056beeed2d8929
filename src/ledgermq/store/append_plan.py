"""Turning bodies (leader) or received entries (follower) into exactly the bytes to write.

Both stores call this, so the file store and its in-memory twin assign the same index, position
and CRCs to every entry. Nothing is written here: a plan is built whole first, so an append that
fails (a body too large, a diverging entry, no disk space for the next segment) writes nothing.

The leader path is the hot path of the store. ``_plan_leader_append_py`` is its reference
implementation: one loop, locals bound outside it, one ``Struct.pack`` per header and per index
record, the body bytes referenced rather than copied, and one ``b"".join`` per segment written.
That still costs about 1 us per entry, so when the C extension ``ledgermq.store._speedups`` is
built, ``plan_leader_append`` is the same plan made in C (byte for byte: tests/store/
test_speedups.py compares them). ``LEDGERMQ_PURE_PYTHON=1`` in the environment at import time
selects the reference, as does a missing extension (an install without a C compiler).

The follower path is the same story: ``_plan_replicated_append_py`` is the reference (about
1.4 us per 1 KiB entry), and ``plan_replicated_append`` makes its plan in C (about 0.1 us) for a
batch that passes every check. A batch that fails one, or holds anything unusual (a body that is
not ``bytes``, a field that is not a plain int), goes to the reference, which raises its error
or takes the odd input its own way; tests/store/test_speedups_replicated.py compares the two.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crc32c import crc32c

from ledgermq.errors import EntryTooLargeError, InconsistentLogError
from ledgermq.store.entry_format import (
    BLANK_HEADER,
    BLANK_MAGIC,
    CHAIN_INPUT,
    ENTRY_HEADER,
    HEADER_SIZE,
    INDEX_RECORD,
    MIN_BLANK_LEN,
    Entry,
    EntryType,
)
from ledgermq.store.layout import max_body_size, place_entry

try:
    from ledgermq.store._speedups import plan_leader_append as _encode_leader_batch
    from ledgermq.store._speedups import plan_replicated_append as _encode_replicated_batch
except ImportError:  # built without a C compiler: the reference implementation serves
    HAVE_SPEEDUPS = False
else:
    HAVE_SPEEDUPS = True

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "HAVE_SPEEDUPS",
    "AppendPlan",
    "LogTail",
    "plan_leader_append",
    "plan_replicated_append",
]

_new_entry = tuple.__new__


@dataclass(frozen=True, slots=True)
class LogTail:
    """Where the log ends: what the next entry continues from."""

    next_index: int
    write_pos: int
    """Data-log position of the next write (entry or BLANK)."""
    end_term: int
    chain_crc: int
    """Chain CRC of the last entry; 0 before the first entry."""
    verify_chain: bool = True
    """False when the last entry's chain value is unknown (never the case after recovery)."""


@dataclass(slots=True)
class AppendPlan:
    entries: list[Entry]
    data_writes: list[tuple[int, bytes]]
    """(position, bytes) pieces, each inside one segment, in log order."""
    index_records: bytes
    """Index records of ``entries``, to be written at ``entries[0].index * 32``."""
    end_pos: int
    """Data-log position after the last entry."""


def _plan_leader_append_py(
    tail: LogTail,
    term: int,
    bodies: Sequence[bytes],
    channel: int,
    entry_type: EntryType,
    segment_bytes: int,
    max_body_bytes: int,
) -> AppendPlan:
    """Entries for ``bodies`` appended by a leader in ``term`` (DLedger ``appendAsLeader``)."""
    if term < tail.end_term:
        raise InconsistentLogError(
            f"cannot append in term {term}: the log already ends with term {tail.end_term}"
        )
    max_size = max_body_size(segment_bytes, max_body_bytes)
    magic = int(entry_type)
    crc = crc32c
    new_entry = _new_entry
    entry_class = Entry
    pack_header = ENTRY_HEADER.pack
    pack_chain = CHAIN_INPUT.pack
    pack_record = INDEX_RECORD.pack
    entries: list[Entry] = []
    add_entry = entries.append
    records: list[bytes] = []
    add_record = records.append
    data_writes: list[tuple[int, bytes]] = []
    chunks: list[bytes] = []
    add_chunk = chunks.append
    chunk_start = pos = tail.write_pos
    # layout.place_entry's rule, inlined on this hot path: an entry must end at least
    # MIN_BLANK_LEN bytes before its segment does (section 1.5).
    room_end = pos - pos % segment_bytes + segment_bytes - MIN_BLANK_LEN
    index = tail.next_index
    chain = tail.chain_crc
    for body in bodies:
        if type(body) is not bytes:
            body = bytes(body)  # noqa: PLW2901 - keep an immutable copy of caller buffers
        body_len = len(body)
        if body_len > max_size:
            raise EntryTooLargeError(
                f"entry body of {body_len} bytes exceeds the maximum of {max_size} bytes"
            )
        size = HEADER_SIZE + body_len
        if pos + size > room_end:
            remaining = room_end + MIN_BLANK_LEN - pos
            add_chunk(BLANK_HEADER.pack(BLANK_MAGIC, remaining))
            data_writes.append((chunk_start, b"".join(chunks)))
            chunks.clear()
            pos += remaining
            chunk_start = pos
            room_end += segment_bytes
        body_checksum = crc(body)
        chain = crc(pack_chain(magic, size, index, term, pos, channel, body_checksum), chain)
        add_chunk(
            pack_header(magic, size, index, term, pos, channel, chain, body_checksum, body_len)
        )
        add_chunk(body)
        add_record(pack_record(magic, pos, size, index, term))
        add_entry(
            new_entry(
                entry_class,
                (index, term, pos, size, channel, body, entry_type, body_checksum, chain),
            )
        )
        index += 1
        pos += size
    if chunks:
        data_writes.append((chunk_start, b"".join(chunks)))
    return AppendPlan(entries, data_writes, b"".join(records), pos)


def _plan_leader_append_c(
    tail: LogTail,
    term: int,
    bodies: Sequence[bytes],
    channel: int,
    entry_type: EntryType,
    segment_bytes: int,
    max_body_bytes: int,
) -> AppendPlan:
    """``_plan_leader_append_py``, encoded by the C extension."""
    entries, data_writes, index_records, end_pos = _encode_leader_batch(
        tail.next_index,
        tail.write_pos,
        tail.end_term,
        tail.chain_crc,
        term,
        bodies,
        channel,
        entry_type,
        segment_bytes,
        max_body_bytes,
        Entry,
    )
    return AppendPlan(entries, data_writes, index_records, end_pos)


if HAVE_SPEEDUPS and os.environ.get("LEDGERMQ_PURE_PYTHON") != "1":
    plan_leader_append = _plan_leader_append_c
else:
    plan_leader_append = _plan_leader_append_py


def _plan_replicated_append_py(
    tail: LogTail,
    entries: Sequence[Entry],
    segment_bytes: int,
    max_body_bytes: int,
) -> AppendPlan:
    """Check entries received from a leader against the local log and plan writing them as is.

    DLedger ``appendAsFollower`` (section 1.7): each entry must have the next index and exactly
    the position this log would give it (replicas are byte-identical). We also check the body
    CRC and that the chain CRC continues the local log, which catches a leader and follower whose
    logs differ before this entry (Raft's log matching) even when the index and term agree.
    """
    max_size = max_body_size(segment_bytes, max_body_bytes)
    data_writes: list[tuple[int, bytes]] = []
    chunks: list[bytes] = []
    records: list[bytes] = []
    chunk_start = pos = tail.write_pos
    index = tail.next_index
    term = tail.end_term
    chain = tail.chain_crc
    verify_chain = tail.verify_chain
    accepted: list[Entry] = []
    for entry in entries:
        body = entry.body if type(entry.body) is bytes else bytes(entry.body)
        size = HEADER_SIZE + len(body)
        if len(body) > max_size:
            raise EntryTooLargeError(
                f"entry {entry.index} body of {len(body)} bytes exceeds the maximum of {max_size}"
            )
        if entry.index != index:
            raise InconsistentLogError(
                f"entry {entry.index} does not follow the log end {index - 1}"
            )
        if entry.term < term:
            raise InconsistentLogError(
                f"entry {entry.index} has term {entry.term}, lower than the previous {term}"
            )
        if entry.size != size:
            raise InconsistentLogError(f"entry {entry.index} says size {entry.size}, it is {size}")
        entry_pos = place_entry(pos, size, segment_bytes)
        if entry.pos != entry_pos:
            raise InconsistentLogError(
                f"entry {entry.index} is at position {entry.pos} on the leader but would be at "
                f"{entry_pos} here: the logs diverge before it, or the replicas use different "
                "data segment sizes"
            )
        body_checksum = crc32c(body)
        if body_checksum != entry.body_crc:
            raise InconsistentLogError(f"entry {entry.index} body does not match its CRC")
        magic = int(entry.entry_type)
        expected_chain = crc32c(
            CHAIN_INPUT.pack(
                magic, size, entry.index, entry.term, entry_pos, entry.channel, body_checksum
            ),
            chain,
        )
        if verify_chain and expected_chain != entry.chain_crc:
            raise InconsistentLogError(
                f"entry {entry.index} does not continue this log (chain CRC differs): the logs "
                "diverge before it"
            )
        if entry_pos != pos:
            chunks.append(BLANK_HEADER.pack(BLANK_MAGIC, entry_pos - pos))
            data_writes.append((chunk_start, b"".join(chunks)))
            chunks.clear()
            chunk_start = pos = entry_pos
        chunks.append(
            ENTRY_HEADER.pack(
                magic,
                size,
                entry.index,
                entry.term,
                pos,
                entry.channel,
                entry.chain_crc,
                body_checksum,
                len(body),
            )
        )
        chunks.append(body)
        records.append(INDEX_RECORD.pack(magic, pos, size, entry.index, entry.term))
        accepted.append(entry if entry.body is body else entry._replace(body=body))
        chain = entry.chain_crc
        verify_chain = True
        term = entry.term
        index += 1
        pos += size
    if chunks:
        data_writes.append((chunk_start, b"".join(chunks)))
    return AppendPlan(accepted, data_writes, b"".join(records), pos)


def _plan_replicated_append_c(
    tail: LogTail,
    entries: Sequence[Entry],
    segment_bytes: int,
    max_body_bytes: int,
) -> AppendPlan:
    """``_plan_replicated_append_py``, checked and encoded by the C extension.

    The C code takes the common case only: a batch of ``Entry`` tuples with plain int fields and
    bytes bodies that passes every check. For anything else it returns None and the reference
    decides, so a diverging entry raises the reference's error with the reference's message.
    """
    planned = _encode_replicated_batch(
        tail.next_index,
        tail.write_pos,
        tail.end_term,
        tail.chain_crc,
        tail.verify_chain,
        entries,
        segment_bytes,
        max_body_bytes,
        Entry,
    )
    if planned is None:
        return _plan_replicated_append_py(tail, entries, segment_bytes, max_body_bytes)
    accepted, data_writes, index_records, end_pos = planned
    return AppendPlan(accepted, data_writes, index_records, end_pos)


if HAVE_SPEEDUPS and os.environ.get("LEDGERMQ_PURE_PYTHON") != "1":
    plan_replicated_append = _plan_replicated_append_c
else:
    plan_replicated_append = _plan_replicated_append_py
