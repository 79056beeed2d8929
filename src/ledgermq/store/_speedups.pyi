"""C versions of the store's hot loops (``_speedups.c``); ``append_plan.py``, ``recovery.py`` and
``ledger/codec.py`` hold the references."""

from collections.abc import Sequence
from typing import Final

from _typeshed import ReadableBuffer, WriteableBuffer

from ledgermq.store.entry_format import Entry, EntryType

HARDWARE_CRC32C: Final[bool]
"""Whether CRC-32C uses the CPU's SSE4.2 instruction (else slicing-by-8 tables)."""

def crc32c(data: ReadableBuffer, value: int = 0, portable: bool = False, /) -> int:
    """CRC-32C of ``data`` continuing ``value``, as ``crc32c.crc32c``; ``portable`` forces the
    table-driven code (for tests on machines that have the instruction)."""

def plan_leader_append(
    next_index: int,
    write_pos: int,
    end_term: int,
    chain_crc: int,
    term: int,
    bodies: Sequence[ReadableBuffer],
    channel: int,
    entry_type: EntryType,
    segment_bytes: int,
    max_body_bytes: int,
    entry_class: type[Entry],
    /,
) -> tuple[list[Entry], list[tuple[int, bytes]], bytes, int]:
    """``entries, data_writes, index_records, end_pos`` of ``append_plan.plan_leader_append``."""

def plan_replicated_append(
    next_index: int,
    write_pos: int,
    end_term: int,
    chain_crc: int,
    verify_chain: bool,
    entries: Sequence[Entry],
    segment_bytes: int,
    max_body_bytes: int,
    entry_class: type[Entry],
    /,
) -> tuple[list[Entry], list[tuple[int, bytes]], bytes, int] | None:
    """``entries, data_writes, index_records, end_pos`` of ``append_plan.plan_replicated_append``,
    or None when the batch fails a check or is not plain ``Entry`` tuples with int fields and
    bytes bodies: the caller then runs the reference, which raises its error."""

def scan_entries(
    data: ReadableBuffer,
    off: int,
    limit: int,
    base: int,
    prev_index: int,
    prev_term: int,
    prev_chain: int,
    begin_index: int,
    index: WriteableBuffer | None,
    index_base: int,
    /,
) -> tuple[int, int, int, int, int, int, int, str | None]:
    """Scan one data segment's entries from ``off`` as ``recovery._scan``'s loop does.

    ``(off, scanned, rewritten, prev_index, prev_term, prev_chain, begin_index, reason)``:
    ``reason`` names the bad entry at ``off``, or is None when the caller's loop is to take the
    entry at ``off`` (a BLANK, a zero header, an index record outside ``index``, ``limit``).
    Mismatching index records inside ``index`` are rewritten in place and counted.
    """

def encode_entries(entries: Sequence[object], /) -> bytes | None:
    """The stored bytes of ``entries``, back to back, as ``codec._encode_entries_py`` encodes
    them; None unless ``entries`` is a list or tuple of plain ``Entry`` tuples (int fields in
    their fields' ranges, bytes bodies): the caller then runs the reference."""

def decode_entries(
    buf: ReadableBuffer,
    pos: int,
    count: int,
    entry_class: type[Entry],
    entry_types: tuple[EntryType | None, ...],
    /,
) -> list[Entry] | str:
    """The ``count`` entries filling ``buf`` from ``pos`` to its end, as
    ``codec._decode_entries_py`` decodes and checks them (``entry_types[magic]`` is an entry's
    type; None marks an unknown magic), or a message saying what is wrong with ``buf``."""
