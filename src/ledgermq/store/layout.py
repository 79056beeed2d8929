"""Pure arithmetic of the segmented logs: where an entry goes and how files are named.

Both stores plan appends with it (through ``append_plan``), so they hand out the same positions:
replicas must agree byte for byte on every entry's ``pos`` (spec-replication-storage.md section
1.7). The leader's hot loops (Python and C) inline ``place_entry``; tests compare them.
"""

from __future__ import annotations

from typing import Final

from ledgermq.store.entry_format import HEADER_SIZE, MIN_BLANK_LEN

__all__ = [
    "SEGMENT_NAME_DIGITS",
    "max_body_size",
    "parse_segment_name",
    "place_entry",
    "segment_base",
    "segment_name",
]

SEGMENT_NAME_DIGITS: Final = 20


def place_entry(write_pos: int, entry_size: int, segment_bytes: int) -> int:
    """The data-log position of an entry of ``entry_size`` bytes appended at ``write_pos``.

    DLedger's ``preAppend`` rule (section 1.5): an entry must leave at least ``MIN_BLANK_LEN``
    (8) bytes free in its segment, so that the BLANK marker always fits. If it does not fit, the
    rest of the segment becomes a BLANK record and the entry starts the next segment; the caller
    writes that BLANK at ``write_pos`` when the returned position differs from it.
    """
    remaining = segment_bytes - write_pos % segment_bytes
    if entry_size + MIN_BLANK_LEN > remaining:
        return write_pos + remaining
    return write_pos


def max_body_size(segment_bytes: int, max_body_bytes: int) -> int:
    """The largest body accepted: the configured maximum, or what fits a segment if smaller."""
    return min(max_body_bytes, segment_bytes - MIN_BLANK_LEN - HEADER_SIZE)


def segment_base(pos: int, segment_bytes: int) -> int:
    """Start offset of the segment holding byte ``pos``."""
    return pos - pos % segment_bytes


def segment_name(base: int) -> str:
    """RocketMQ-style file name: the start offset, zero-padded to 20 digits."""
    return f"{base:0{SEGMENT_NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The start offset a segment file name encodes, or ``None`` if it is not a segment name."""
    if len(name) != SEGMENT_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)
