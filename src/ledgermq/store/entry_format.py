"""The byte layout of a ledger entry and of its index record, and their codec.

DATA entry (DLedger's ``DLedgerEntry``, spec-replication-storage.md section 1.3). All integers are
big-endian, as Java's ``ByteBuffer`` writes them, so a DLedger tool can read our files::

    offset  bytes  field      meaning
    ------  -----  ---------  ---------------------------------------------------------------
         0      4  magic      entry type: 1 NORMAL, 2 NOOP, 3 CONFIG_CHANGE; -1 is BLANK padding
         4      4  size       whole entry length, header included: 48 + bodyLen
         8      8  index      Raft log index (0-based)
        16      8  term       term of the leader that created the entry
        24      8  pos        byte offset of this entry in the logical data log
        32      4  channel    free for the application (the broker tells metadata from messages)
        36      4  chainCrc   CRC-32C chained over every entry so far (see below)
        40      4  bodyCrc    CRC-32C of the body
        44      4  bodyLen    length of the body
        48      n  body       opaque bytes

INDEX record (section 1.4), fixed 32 bytes; record ``i`` sits at byte ``i * 32`` of the index log::

    offset  bytes  field
         0      4  magic      copy of the entry's magic
         4      8  pos        data-log offset of the entry
        12      4  size       entry size (48 + bodyLen)
        16      8  index
        24      8  term

BLANK record: a data segment's unused end starts with ``magic = -1`` and ``size = remaining bytes``
(section 1.5); every append keeps 8 bytes free so that this 8-byte marker always fits.

The CRCs. DLedger reserves ``bodyCrc`` and ``chainCrc`` but never computes them (spec section 6),
so a torn or rotten body behind an intact header is served as if it were good. We fill both
without changing the layout:

- ``bodyCrc`` = CRC-32C(body). Verified on every read: a mismatch raises ``CorruptLogError``.
- ``chainCrc`` = CRC-32C(magic..channel fields + bodyCrc), seeded with the previous entry's
  ``chainCrc`` (0 before the first entry). It covers every header field except bodyLen (implied
  by size) and itself, and links each entry to all entries before it, so recovery can tell a
  consistent log from one whose header fields were damaged, and a follower can check that an
  entry it receives continues the log it has.

CRC-32C (Castagnoli) rather than zlib's CRC-32: better error detection on short records and a
hardware instruction behind it (about 0.12 us per KiB here, research/limits.md section 3).
"""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

from crc32c import crc32c

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BLANK_MAGIC",
    "BODY_OFFSET",
    "ENTRY_HEADER",
    "HEADER_SIZE",
    "INDEX_RECORD",
    "INDEX_UNIT_SIZE",
    "MIN_BLANK_LEN",
    "POS_OFFSET",
    "Entry",
    "EntryFormatError",
    "EntryReader",
    "EntryType",
    "body_crc",
    "chain_crc",
    "decode_entry",
    "encode_entry",
]

ENTRY_HEADER: Final = struct.Struct(">iiqqqiIIi")
"""magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLen."""
HEADER_SIZE: Final = ENTRY_HEADER.size
BODY_OFFSET: Final = HEADER_SIZE
POS_OFFSET: Final = 24
CHAIN_INPUT: Final = struct.Struct(">iiqqqiI")
"""The bytes the chain CRC covers: magic, size, index, term, pos, channel, bodyCrc."""
INDEX_RECORD: Final = struct.Struct(">iqiqq")
"""magic, pos, size, index, term."""
INDEX_UNIT_SIZE: Final = INDEX_RECORD.size
BLANK_MAGIC: Final = -1
MIN_BLANK_LEN: Final = 8
BLANK_HEADER: Final = struct.Struct(">ii")

ReadableBuffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"

assert HEADER_SIZE == 48
assert INDEX_UNIT_SIZE == 32


class EntryType(enum.IntEnum):
    """The ``magic`` field: what kind of entry this is (DLedger ``DLedgerEntryType``)."""

    NORMAL = 1
    NOOP = 2
    CONFIG_CHANGE = 3


_VALID_MAGICS: Final = frozenset(int(t) for t in EntryType)


class Entry(NamedTuple):
    """One log entry as stored: its place in the log and its body.

    A ``NamedTuple`` rather than a dataclass because appends create one per body on the hot path
    and a tuple is the cheapest immutable record CPython builds.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index(): the spec's name wins
    """Raft log index, 0-based."""
    term: int
    """Term of the leader that created the entry."""
    pos: int
    """Byte offset of the entry (its header) in the logical data log."""
    size: int
    """Whole entry length in bytes: 48-byte header plus body."""
    channel: int
    """Application channel; 0 unless the caller set it."""
    body: bytes
    entry_type: EntryType = EntryType.NORMAL
    body_crc: int = 0
    chain_crc: int = 0

    @property
    def magic(self) -> int:
        """The on-disk ``magic`` field, which DLedger uses as the entry type."""
        return int(self.entry_type)

    @property
    def body_pos(self) -> int:
        """Byte offset of the body in the data log (RocketMQ's physical offset, spec-broker 1)."""
        return self.pos + HEADER_SIZE


class EntryFormatError(ValueError):
    """Bytes that are not a well-formed entry. The store turns it into ``CorruptLogError``."""

    def __init__(self, reason: str, offset: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


def body_crc(body: bytes | memoryview) -> int:
    """CRC-32C of an entry body."""
    return int(crc32c(body))


def chain_crc(
    prev_chain: int,
    entry_type: int,
    size: int,
    index: int,
    term: int,
    pos: int,
    channel: int,
    body_checksum: int,
) -> int:
    """The chain CRC of an entry, given the chain CRC of the entry before it."""
    return int(
        crc32c(
            CHAIN_INPUT.pack(entry_type, size, index, term, pos, channel, body_checksum), prev_chain
        )
    )


def encode_entry(entry: Entry) -> bytes:
    """The stored bytes of ``entry``, header and body, with the CRC fields it carries."""
    header = ENTRY_HEADER.pack(
        entry.magic,
        entry.size,
        entry.index,
        entry.term,
        entry.pos,
        entry.channel,
        entry.chain_crc,
        entry.body_crc,
        len(entry.body),
    )
    return header + entry.body


def decode_entry(buf: ReadableBuffer, offset: int = 0) -> Entry:
    """Decode and verify the entry starting at ``offset`` of ``buf``.

    Checks what can be checked from the entry alone: a known magic, ``size == 48 + bodyLen``, the
    whole entry present in ``buf`` and the body CRC. Raises ``EntryFormatError`` otherwise; it
    never returns an entry whose body does not match its checksum. The chain CRC needs the
    previous entry and is checked by the callers that read sequentially.
    """
    available = len(buf) - offset
    if available < HEADER_SIZE:
        raise EntryFormatError(
            f"only {available} bytes, an entry header needs {HEADER_SIZE}", offset
        )
    magic, size, index, term, pos, channel, chain, crc, body_len = ENTRY_HEADER.unpack_from(
        buf, offset
    )
    _check_header(magic, size, index, term, body_len, offset)
    if size > available:
        raise EntryFormatError(f"entry of {size} bytes but only {available} bytes follow", offset)
    body = bytes(buf[offset + HEADER_SIZE : offset + size])
    actual = int(crc32c(body))
    if actual != crc:
        raise EntryFormatError(
            f"body CRC mismatch for entry {index}: stored {crc:#010x}, computed {actual:#010x}",
            offset,
        )
    return Entry(index, term, pos, size, channel, body, EntryType(magic), crc, chain)


def _check_header(magic: int, size: int, index: int, term: int, body_len: int, offset: int) -> None:
    if magic not in _VALID_MAGICS:
        raise EntryFormatError(f"unknown magic {magic}", offset)
    if body_len < 0 or size != HEADER_SIZE + body_len:
        raise EntryFormatError(f"size {size} does not match body length {body_len} + 48", offset)
    if index < 0 or term < 0:
        raise EntryFormatError(f"negative index {index} or term {term}", offset)


class EntryReader:
    """Incremental (sans-I/O) decoder of a stream of entries, h11 style.

    ``feed(data)`` adds bytes; ``next_entry()`` returns the next complete entry, or ``None`` when
    more bytes are needed. Malformed input raises ``EntryFormatError`` and the reader stays
    failed. ``max_entry_bytes`` bounds what a header may announce, so a garbage length cannot
    make the reader buffer without limit.
    """

    def __init__(self, max_entry_bytes: int) -> None:
        self._buffer = bytearray()
        self._consumed = 0
        self._max_entry_bytes = max_entry_bytes
        self._failed: EntryFormatError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        self._buffer += data

    def next_entry(self) -> Entry | None:
        """The next complete entry, or ``None`` if the buffered bytes end mid-entry."""
        if self._failed is not None:
            raise self._failed
        available = len(self._buffer) - self._consumed
        if available < HEADER_SIZE:
            return None
        try:
            magic, size, index, term, _, _, _, _, body_len = ENTRY_HEADER.unpack_from(
                self._buffer, self._consumed
            )
            _check_header(magic, size, index, term, body_len, self._consumed)
            if size > self._max_entry_bytes:
                raise EntryFormatError(  # noqa: TRY301 - recorded as the reader's failure below
                    f"entry of {size} bytes exceeds the limit of {self._max_entry_bytes}",
                    self._consumed,
                )
            if size > available:
                return None
            entry = decode_entry(self._buffer, self._consumed)
        except EntryFormatError as exc:
            self._failed = exc
            raise
        self._consumed += size
        if self._consumed > 65536 and self._consumed * 2 > len(self._buffer):
            del self._buffer[: self._consumed]
            self._consumed = 0
        return entry

    @property
    def pending_bytes(self) -> int:
        """Bytes received but not yet returned as an entry."""
        return len(self._buffer) - self._consumed
