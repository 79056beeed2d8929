"""What clients send a ledger replica, and what it answers: APPEND, GET, METADATA, transfer.

Both the server and ``LedgerClient`` use these, so the two ends cannot disagree. Bodies on the
data path are binary; the rare ones are JSON with DLedger's field names.

- APPEND (50001): body ``>I`` count, ``count`` x ``>I`` lengths, then the entries back to
  back (lengths first: the leader slices without a per-entry parse). Success answers
  ``index`` (first), ``lastIndex`` and ``term`` in ext fields.
- GET (50002): ``index`` ext field; the answer's body is the stored entry (48-byte header + body).
- METADATA (50000): the answer's body is JSON: ``group``, ``selfId``, ``leaderId``, ``term``,
  ``role``, ``peers`` (id -> "host:port"), ``beginIndex``, ``endIndex``, ``committedIndex``.
- LEADERSHIP_TRANSFER (51005) from an admin: JSON ``{"group", "transfereeId", "term"?}``; a
  replica's own transfer request also carries ``takeLeadershipLedgerIndex``, which tells them
  apart (DLedger uses one code for both).

Every failure answers a DLedger response code with a one-line ``remark``; NOT_LEADER and
LEADER_TRANSFERRING also carry ``leaderId`` and ``leaderAddr`` when the replica knows them.
"""

from __future__ import annotations

import array
import itertools
import json
import struct
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import (
    LeaderPendingFullError,
    LeaderTransferringError,
    LedgerDiskFullError,
    LedgerRequestError,
    NotLeaderError,
    OutcomeUnknownError,
    ProtocolError,
    RaftError,
)
from ledgermq.raft import ResponseCode
from ledgermq.store.entry_format import EntryFormatError, decode_entry

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ledgermq.store import Entry

__all__ = [
    "LedgerEntry",
    "Metadata",
    "decode_bodies",
    "decode_entry_body",
    "encode_bodies",
    "error_for",
]

_COUNT: Final = struct.Struct(">I")
_OUTCOME_UNKNOWN: Final = frozenset(
    {
        ResponseCode.TIMEOUT,
        ResponseCode.TERM_CHANGED,
        ResponseCode.WAIT_QUORUM_ACK_TIMEOUT,
        ResponseCode.NETWORK_ERROR,
        ResponseCode.LEADER_NOT_READY,
    }
)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One committed entry as a client sees it."""

    index: int
    term: int
    body: bytes
    pos: int
    """Byte position of the entry in the replica's data log (same on every replica)."""


@dataclass(frozen=True, slots=True)
class Metadata:
    """One replica's view of its group."""

    group: str
    self_id: str
    leader: str | None
    term: int
    role: str
    peers: Mapping[str, str]
    begin_index: int
    end_index: int
    committed_index: int

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "group": self.group,
                "selfId": self.self_id,
                "leaderId": self.leader,
                "term": self.term,
                "role": self.role,
                "peers": dict(self.peers),
                "beginIndex": self.begin_index,
                "endIndex": self.end_index,
                "committedIndex": self.committed_index,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Metadata:
        try:
            d = json.loads(raw)
            return cls(
                str(d["group"]),
                str(d["selfId"]),
                None if d["leaderId"] is None else str(d["leaderId"]),
                int(d["term"]),
                str(d["role"]),
                {str(k): str(v) for k, v in d["peers"].items()},
                int(d["beginIndex"]),
                int(d["endIndex"]),
                int(d["committedIndex"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProtocolError(f"malformed METADATA answer: {exc}") from None


def encode_bodies(bodies: Sequence[bytes]) -> bytes:
    """APPEND body: ``>I`` count, ``count`` x ``>I`` lengths, then the bodies back to back."""
    lengths = array.array("I", map(len, bodies))
    if sys.byteorder == "little":
        lengths.byteswap()
    return b"".join((_COUNT.pack(len(bodies)), lengths.tobytes(), *bodies))


def decode_bodies(raw: bytes) -> list[bytes]:
    """The bodies of an APPEND; ProtocolError if the framing is wrong."""
    if len(raw) < 4:
        raise ProtocolError("APPEND body shorter than its count")
    (count,) = _COUNT.unpack_from(raw, 0)
    if count == 0:
        raise ProtocolError("APPEND with no entries")
    start = 4 + 4 * count
    if start > len(raw):
        raise ProtocolError(f"APPEND announces {count} entries in {len(raw)} bytes")
    lengths = array.array("I", raw[4:start])
    if sys.byteorder == "little":
        lengths.byteswap()
    ends = list(itertools.accumulate(lengths, initial=start))
    if ends[-1] != len(raw):
        raise ProtocolError(
            f"APPEND entry lengths add up to {ends[-1] - start} bytes, the body has "
            f"{len(raw) - start}"
        )
    return [raw[a:b] for a, b in itertools.pairwise(ends)]


def decode_entry_body(raw: bytes) -> LedgerEntry:
    try:
        entry: Entry = decode_entry(raw)
    except EntryFormatError as exc:
        raise ProtocolError(f"malformed GET answer: {exc}") from None
    return LedgerEntry(entry.index, entry.term, entry.body, entry.pos)


def error_for(code: int, remark: str | None, ext: Mapping[str, str]) -> RaftError:
    """The exception a client raises for a failed answer (one mapping, DESIGN.md "typed errors")."""
    message = remark or f"request failed with code {code}"
    leader = ext.get("leaderId") or None
    if code == ResponseCode.NOT_LEADER:
        return NotLeaderError(message, leader)
    if code == ResponseCode.LEADER_TRANSFERRING:
        return LeaderTransferringError(message)
    if code == ResponseCode.LEADER_PENDING_FULL:
        return LeaderPendingFullError(message)
    if code in _OUTCOME_UNKNOWN:
        return OutcomeUnknownError(message, code)
    if code == ResponseCode.DISK_FULL:
        return LedgerDiskFullError(message, code)
    return LedgerRequestError(message, code)
