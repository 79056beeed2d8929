"""The key index's per-key loop (``_key_index.c``); ``key_index.KeyIndex._add_py`` and
``key_index._key_hash_py`` hold the reference."""

from typing import Any

from _typeshed import ReadableBuffer, WriteableBuffer

def key_hash(topic: str, key: str, /) -> int:
    """The stable signed 64-bit hash of ``topic#key`` (BLAKE2b-64, big-endian)."""

def index_run(
    messages: list[Any],
    pos: int,
    kpos: int,
    skip_first: bool,
    slots: WriteableBuffer,
    slot_pages: ReadableBuffer,
    nslots: int,
    count: int,
    room: int,
    last: int,
    min_ts: int,
    max_ts: int,
    data: bytearray,
    /,
) -> tuple[int, int, int, int, int, int, int, int, int]:
    """``(status, pos, kpos, count, last, min_ts, max_ts, added, slot)``: see the C module."""
