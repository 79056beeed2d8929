"""Raft messages <-> remoting commands: how replicas talk to each other on the wire.

VOTE, HEART_BEAT and LEADERSHIP_TRANSFER carry JSON bodies with DLedger's field names
(``group``, ``localId``, ``remoteId``, ``term``, ``leaderId``, ``ledgerEndIndex`` ...): they are
rare, and JSON keeps them readable in a packet capture. PUSH is the data path, so both directions
are binary (``struct``, big-endian like the rest of the protocol):

    PUSH request body
        >BBqqqqqI  version, kind, rid, term, index, commitIndex, compareTerm, entry count
        4 x (>H length + UTF-8)  group, localId, remoteId, leaderId
        entries    the stored bytes of each entry, 48-byte header + body, back to back

Entries travel exactly as the leader's store holds them, CRCs included: the follower checks each
body CRC here, and its store checks the chain CRC and continuity before writing anything.

    PUSH response body
        >BBqqiqqqqq  version, kind, rid, term, code, index, count, endIndex, xTerm, xIndex
        3 x (>H length + UTF-8)  group, localId, remoteId

Requests travel with the request code in the header's ``code``; responses with the DLedger
response code there (RocketMQ's convention), the response flag set, and the request code in the
``requestCode`` ext field so a response decodes without remembering what was asked. The transport
matches a response to its request by ``opaque``; the core matches it by ``rid``, carried in the
body so that the two numbering schemes never have to agree.

``decode_message`` raises only ``ProtocolError``: whatever a peer sends, the caller logs it and
closes that connection, and nothing reaches the core.

The entry loops are the hot part of replication: encoding them again for every follower was about
5 % of a busy leader's time, and decoding and checking them about 15 % of a busy follower's.
``_encode_entries_py`` and ``_decode_entries_py`` are the references; when the C extension
``ledgermq.store._speedups`` is built, its ``encode_entries`` and ``decode_entries`` do the same
work (tests/ledger/test_codec_speedups.py compares them). The C encoder takes plain ``Entry``
tuples only and hands anything else back to the reference; the C decoder returns what is wrong as
a message, which becomes the ``ProtocolError`` here. ``LEDGERMQ_PURE_PYTHON=1`` at import time,
or a missing extension, selects the references, as in ``ledgermq.store.append_plan``.
"""

from __future__ import annotations

import json
import os
import struct
from typing import TYPE_CHECKING, Final

from crc32c import crc32c

from ledgermq.errors import ProtocolError
from ledgermq.raft import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    Membership,
    MembershipError,
    MembershipRecord,
    Message,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.store import Entry, EntryType
from ledgermq.store.entry_format import ENTRY_HEADER, HEADER_SIZE
from ledgermq.wire import FLAG_RESPONSE, LedgerRequestCode, RemotingCommand, SerializeType

try:
    from ledgermq.store._speedups import decode_entries as _c_decode_entries
    from ledgermq.store._speedups import encode_entries as _c_encode_entries
except ImportError:  # built without a C compiler (or an old build): the references serve
    HAVE_SPEEDUPS = False
else:
    HAVE_SPEEDUPS = True

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.raft.messages import LogEntry

__all__ = [
    "HAVE_SPEEDUPS",
    "PEER_REQUEST_CODES",
    "decode_message",
    "encode_entries",
    "encode_message",
]

PEER_REQUEST_CODES: Final = frozenset(
    {
        LedgerRequestCode.VOTE,
        LedgerRequestCode.HEART_BEAT,
        LedgerRequestCode.PUSH,
        LedgerRequestCode.LEADERSHIP_TRANSFER,
    }
)
"""Request codes one replica sends another (the rest come from clients)."""

_VERSION: Final = 1
_VERSION_WITH_MEMBERSHIP: Final = 2
"""A push that carries the leader's committed membership (a TRUNCATE that begins a follower's
log again at the leader's oldest entry): a fifth string, its JSON. Only those pushes use it, so
a replica of the version before membership changes still reads every other push."""
_PUSH_REQUEST: Final = struct.Struct(">BBqqqqqI")
_PUSH_RESPONSE: Final = struct.Struct(">BBqqiqqqqq")
_STR_LEN: Final = struct.Struct(">H")
_KINDS: Final = tuple(PushKind)
_KIND_NUMBER: Final = {kind: n for n, kind in enumerate(_KINDS)}
_RESPONSE_CODES: Final = {int(c): c for c in ResponseCode}
_VOTE_RESULTS: Final = {r.value: r for r in VoteResult}
_ENTRY_TYPES: Final = {int(t): t for t in EntryType}
_ENTRY_TYPE_BY_MAGIC: Final = tuple(_ENTRY_TYPES.get(m) for m in range(max(_ENTRY_TYPES) + 1))
"""``_ENTRY_TYPES`` as the C decoder takes it: the member at its magic, None at unknown ones."""
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_ANSWERS: Final = {code: {"requestCode": str(int(code))} for code in PEER_REQUEST_CODES}

_use_speedups = HAVE_SPEEDUPS and os.environ.get("LEDGERMQ_PURE_PYTHON") != "1"
"""Whether the C entry codec runs. A module global, not a constant, so that a test can turn it
off and run the whole codec on the references."""


# ---------------------------------------------------------------------------------- encoding
def encode_message(message: Message, opaque: int = 0) -> RemotingCommand:
    """The command carrying ``message``; a response takes its request's ``opaque``."""
    if isinstance(message, PushEntryRequest):
        return RemotingCommand(LedgerRequestCode.PUSH, opaque, body=_encode_push_request(message))
    if isinstance(message, PushEntryResponse):
        return RemotingCommand(
            int(message.code),
            opaque,
            FLAG_RESPONSE,
            ext_fields=_ANSWERS[LedgerRequestCode.PUSH],
            body=_encode_push_response(message),
            serialize_type=SerializeType.ROCKETMQ,  # replicas read it for less (wire/frame.py)
        )
    if isinstance(message, VoteRequest):
        fields: dict[str, object] = {
            "leaderId": message.leader_id,
            "ledgerEndIndex": message.ledger_end_index,
            "ledgerEndTerm": message.ledger_end_term,
        }
        return _json_request(LedgerRequestCode.VOTE, message, fields)
    if isinstance(message, VoteResponse):
        fields = {"voteResult": message.result.value}
        return _json_response(LedgerRequestCode.VOTE, message.code, message, fields, opaque)
    if isinstance(message, HeartBeatRequest):
        return _json_request(LedgerRequestCode.HEART_BEAT, message, {"leaderId": message.leader_id})
    if isinstance(message, HeartBeatResponse):
        return _json_response(LedgerRequestCode.HEART_BEAT, message.code, message, {}, opaque)
    if isinstance(message, LeadershipTransferRequest):
        fields = {
            "transferId": message.transfer_id,
            "transfereeId": message.transferee_id,
            "takeLeadershipLedgerIndex": message.take_leadership_ledger_index,
        }
        return _json_request(LedgerRequestCode.LEADERSHIP_TRANSFER, message, fields)
    return _json_response(LedgerRequestCode.LEADERSHIP_TRANSFER, message.code, message, {}, opaque)


def encode_entries(entries: Sequence[LogEntry]) -> bytes:
    """The stored bytes of ``entries`` (store ``Entry`` tuples), back to back.

    Raises:
        TypeError: an entry is not a store ``Entry``.
    """
    if _use_speedups:
        encoded = _c_encode_entries(entries)
        if encoded is not None:
            return encoded
    return _encode_entries_py(entries)


def _encode_entries_py(entries: Sequence[LogEntry]) -> bytes:
    """``encode_entries``, the reference: one ``Struct.pack`` per header, one join."""
    pack = ENTRY_HEADER.pack
    parts: list[bytes] = []
    append = parts.append
    for e in entries:
        if not isinstance(e, Entry):
            raise TypeError(f"only stored entries can be pushed, got {type(e).__name__}")
        body = e.body
        append(pack(int(e.entry_type), e.size, e.index, e.term, e.pos, e.channel,
                    e.chain_crc, e.body_crc, len(body)))  # fmt: skip
        append(body)
    return b"".join(parts)


def _strings(*values: str) -> bytes:
    out = []
    for value in values:
        raw = value.encode()
        out.append(_STR_LEN.pack(len(raw)))
        out.append(raw)
    return b"".join(out)


def _encode_push_request(m: PushEntryRequest) -> bytes:
    head = _PUSH_REQUEST.pack(
        _VERSION if m.membership is None else _VERSION_WITH_MEMBERSHIP,
        _KIND_NUMBER[m.kind],
        m.rid,
        m.term,
        m.index,
        m.commit_index,
        m.compare_term,
        len(m.entries),
    )
    ids = _strings(m.group, m.local_id, m.remote_id, m.leader_id)
    if m.membership is not None:
        record = m.membership
        ids += _strings(
            json.dumps(
                {
                    "index": record.index,
                    "term": record.term,
                    "membership": json.loads(record.membership.encode()),
                },
                sort_keys=True,
            )
        )
    if not m.entries:
        return head + ids
    return b"".join((head, ids, encode_entries(m.entries)))


def _encode_push_response(m: PushEntryResponse) -> bytes:
    head = _PUSH_RESPONSE.pack(
        _VERSION,
        _KIND_NUMBER[m.kind],
        m.rid,
        m.term,
        int(m.code),
        m.index,
        m.count,
        m.end_index,
        m.x_term,
        m.x_index,
    )
    return head + _strings(m.group, m.local_id, m.remote_id)


def _common(m: Message) -> dict[str, object]:
    return {
        "group": m.group,
        "localId": m.local_id,
        "remoteId": m.remote_id,
        "rid": m.rid,
        "term": m.term,
    }


def _json_request(code: int, m: Message, fields: dict[str, object]) -> RemotingCommand:
    body = json.dumps(_common(m) | fields, separators=(",", ":")).encode()
    return RemotingCommand(code, 0, body=body)


def _json_response(
    request_code: LedgerRequestCode,
    code: ResponseCode,
    m: Message,
    fields: dict[str, object],
    opaque: int,
) -> RemotingCommand:
    body = json.dumps(_common(m) | {"code": int(code)} | fields, separators=(",", ":")).encode()
    return RemotingCommand(
        int(code), opaque, FLAG_RESPONSE, ext_fields=_ANSWERS[request_code], body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )  # fmt: skip


# ---------------------------------------------------------------------------------- decoding
def decode_message(command: RemotingCommand) -> Message:
    """The Raft message in ``command``.

    Raises:
        ProtocolError: anything malformed: unknown code, bad JSON, missing or mistyped field,
            short or overlong binary body, entry with a bad header or body CRC.
    """
    code: int = command.code
    if command.is_response:
        raw = command.ext_fields.get("requestCode", "")
        if not raw.isdigit() or len(raw) > 6:
            raise ProtocolError(f"response without a valid requestCode ext field: {raw!r:.20}")
        code = int(raw)
    try:
        if code == LedgerRequestCode.PUSH:
            if command.is_response:
                return _decode_push_response(command.body)
            return _decode_push_request(command.body)
        if code in (
            LedgerRequestCode.VOTE,
            LedgerRequestCode.HEART_BEAT,
            LedgerRequestCode.LEADERSHIP_TRANSFER,
        ):
            return _decode_json(code, command.is_response, command.body)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed body for request code {code}: {exc}") from None
    raise ProtocolError(f"request code {code} is not a replica-to-replica request")


def _read_strings(body: bytes, pos: int, count: int) -> tuple[list[str], int]:
    values = []
    for _ in range(count):
        (length,) = _STR_LEN.unpack_from(body, pos)
        pos += 2
        if pos + length > len(body):
            raise ProtocolError("string runs past the end of the body")
        values.append(body[pos : pos + length].decode())
        pos += length
    return values, pos


def _kind(number: int) -> PushKind:
    if number >= len(_KINDS):
        raise ProtocolError(f"unknown push kind {number}")
    return _KINDS[number]


def _check_version(version: int) -> None:
    if version != _VERSION:
        raise ProtocolError(f"push body version {version}, this replica speaks {_VERSION}")


def _decode_push_request(body: bytes) -> PushEntryRequest:
    version, kind_no, rid, term, index, commit, compare_term, count = _PUSH_REQUEST.unpack_from(
        body, 0
    )
    membership = None
    if version == _VERSION_WITH_MEMBERSHIP:
        (group, local_id, remote_id, leader_id, text), pos = _read_strings(
            body, _PUSH_REQUEST.size, 5
        )
        membership = _decode_membership(text)
    else:
        _check_version(version)
        (group, local_id, remote_id, leader_id), pos = _read_strings(body, _PUSH_REQUEST.size, 4)
    kind = _kind(kind_no)
    entries = _decode_entries(body, pos, count)
    return PushEntryRequest(
        group, local_id, remote_id, rid, term, leader_id, kind, index, commit, compare_term,
        entries, membership,
    )  # fmt: skip


def _decode_membership(text: str) -> MembershipRecord:
    try:
        data = json.loads(text)
        membership = Membership.decode(json.dumps(data["membership"]).encode())
        return MembershipRecord(int(data["index"]), membership, int(data["term"]))
    except (ValueError, KeyError, TypeError, MembershipError) as exc:
        raise ProtocolError(f"a push's membership does not decode: {exc}") from None


def _decode_entries(body: bytes, pos: int, count: int) -> list[Entry]:
    """``count`` entries filling the rest of ``body`` exactly, each body CRC verified.

    Raises:
        ProtocolError: too many entries announced, a malformed header, a body CRC mismatch,
            bytes left after the last entry.
    """
    if not _use_speedups:
        return _decode_entries_py(body, pos, count)
    decoded = _c_decode_entries(body, pos, count, Entry, _ENTRY_TYPE_BY_MAGIC)
    if isinstance(decoded, str):
        raise ProtocolError(decoded)
    return decoded


def _decode_entries_py(body: bytes, pos: int, count: int) -> list[Entry]:
    """``_decode_entries``, the reference."""
    if count > (len(body) - pos) // HEADER_SIZE:
        raise ProtocolError(f"{count} entries announced but only {len(body) - pos} bytes follow")
    view = memoryview(body)
    unpack = ENTRY_HEADER.unpack_from
    types = _ENTRY_TYPES
    entries: list[Entry] = []
    append = entries.append
    for _ in range(count):
        if pos + HEADER_SIZE > len(body):
            raise ProtocolError(f"truncated entry header at byte {pos} of a push")
        magic, size, index, term, epos, channel, chain, crc, body_len = unpack(body, pos)
        end = pos + size
        entry_type = types.get(magic)
        if (
            entry_type is None
            or body_len < 0
            or size != HEADER_SIZE + body_len
            or end > len(body)
            or index < 0
            or term < 0
            or epos < 0
        ):
            raise ProtocolError(f"malformed entry header at byte {pos} of a push")
        data = bytes(view[pos + HEADER_SIZE : end])
        if crc32c(data) != crc:
            raise ProtocolError(f"body CRC mismatch for entry {index} in a push")
        append(Entry(index, term, epos, size, channel, data, entry_type, crc, chain))
        pos = end
    if pos != len(body):
        raise ProtocolError(f"{len(body) - pos} bytes after the last entry of a push")
    return entries


def _decode_push_response(body: bytes) -> PushEntryResponse:
    fields = _PUSH_RESPONSE.unpack_from(body, 0)
    version, kind_no, rid, term, code, index, count, end_index, x_term, x_index = fields
    _check_version(version)
    kind = _kind(kind_no)
    (group, local_id, remote_id), pos = _read_strings(body, _PUSH_RESPONSE.size, 3)
    if pos != len(body):
        raise ProtocolError("trailing bytes after a push response")
    return PushEntryResponse(
        group, local_id, remote_id, rid, term, _response_code(code), kind, index, count,
        end_index, x_term, x_index,
    )  # fmt: skip


def _response_code(value: object) -> ResponseCode:
    if not isinstance(value, int) or isinstance(value, bool) or value not in _RESPONSE_CODES:
        raise ProtocolError(f"unknown response code {value!r}")
    return _RESPONSE_CODES[value]


class _Fields:
    """Typed access to a decoded JSON object; every miss is a ProtocolError."""

    def __init__(self, raw: bytes) -> None:
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ProtocolError("body is not a JSON object")
        self._data: dict[str, object] = data

    def integer(self, name: str) -> int:
        value = self._data.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProtocolError(f"field {name!r} must be an integer, got {value!r:.40}")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ProtocolError(f"field {name!r} is out of the 64-bit range")
        return value

    def text(self, name: str) -> str:
        value = self._data.get(name)
        if not isinstance(value, str):
            raise ProtocolError(f"field {name!r} must be a string, got {value!r:.40}")
        return value

    def raw(self, name: str) -> object:
        return self._data.get(name)


def _decode_json(code: int, is_response: bool, body: bytes) -> Message:
    f = _Fields(body)
    head = (f.text("group"), f.text("localId"), f.text("remoteId"), f.integer("rid"))
    if code == LedgerRequestCode.VOTE:
        if is_response:
            result = _VOTE_RESULTS.get(f.text("voteResult"))
            if result is None:
                raise ProtocolError(f"unknown vote result {f.raw('voteResult')!r:.40}")
            return VoteResponse(*head, f.integer("term"), result, _response_code(f.raw("code")))
        return VoteRequest(
            *head, f.integer("term"), f.text("leaderId"), f.integer("ledgerEndIndex"),
            f.integer("ledgerEndTerm"),
        )  # fmt: skip
    if code == LedgerRequestCode.HEART_BEAT:
        if is_response:
            return HeartBeatResponse(*head, _response_code(f.raw("code")), f.integer("term"))
        return HeartBeatRequest(*head, f.integer("term"), f.text("leaderId"))
    if is_response:
        return LeadershipTransferResponse(*head, f.integer("term"), _response_code(f.raw("code")))
    return LeadershipTransferRequest(
        *head, f.integer("term"), f.text("transferId"), f.text("transfereeId"),
        f.integer("takeLeadershipLedgerIndex"),
    )  # fmt: skip
