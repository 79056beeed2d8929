"""C versions of the store's hot loops (``_speedups.c``); ``append_plan.py`` holds the reference."""

from collections.abc import Sequence
from typing import Final

from _typeshed import ReadableBuffer

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
