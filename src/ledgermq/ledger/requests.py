"""What clients send a ledger replica, and what it answers: APPEND, GET, METADATA, transfer.

Both the server and ``LedgerClient`` use these, so the two ends cannot disagree. Bodies on the
data path are binary; the rare ones are JSON with DLedger's field names.

- APPEND (50001): body ``>I`` count, then per entry ``>I`` length + bytes. Success answers
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

import json
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import (
    LeaderPendingFullError,
    LeaderTransferringError,
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
    parts = [_COUNT.pack(len(bodies))]
    for body in bodies:
        parts.append(_COUNT.pack(len(body)))
        parts.append(body)
    return b"".join(parts)


def decode_bodies(raw: bytes) -> list[bytes]:
    """The bodies of an APPEND; ProtocolError if the framing is wrong."""
    if len(raw) < 4:
        raise ProtocolError("APPEND body shorter than its count")
    (count,) = _COUNT.unpack_from(raw, 0)
    if count == 0:
        raise ProtocolError("APPEND with no entries")
    if count > (len(raw) - 4) // 4:
        raise ProtocolError(f"APPEND announces {count} entries in {len(raw)} bytes")
    view = memoryview(raw)
    bodies = []
    pos = 4
    unpack = _COUNT.unpack_from
    for _ in range(count):
        if pos + 4 > len(raw):
            raise ProtocolError("APPEND body ends inside an entry length")
        (length,) = unpack(raw, pos)
        pos += 4
        if pos + length > len(raw):
            raise ProtocolError("APPEND entry runs past the end of the body")
        bodies.append(bytes(view[pos : pos + length]))
        pos += length
    if pos != len(raw):
        raise ProtocolError(f"{len(raw) - pos} bytes after the last APPEND entry")
    return bodies


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
    return LedgerRequestError(message, code)
