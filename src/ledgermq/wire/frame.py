"""RocketMQ remoting frames, encoded and decoded without any I/O.

Layout (protocol-remoting-and-grpc.md section 2.1), all integers big-endian::

    int32  length            4 + header length + body length (not counting itself)
    int32  header word       serialize type << 24 | header length
    bytes  header            JSON (type 0) or RocketMQ binary (type 1, section 2.3)
    bytes  body

We decode both header types. We encode JSON unless a command asks for the binary header (see
below); ``extFields`` values are always sent as JSON strings and the map is always present (the
C++ client needs both).

The decoder is fed whatever the socket returned and yields whole commands. It refuses a frame as
soon as its length prefix says it is too big, before buffering it, and after any error it stays
failed: the stream has lost its framing and the connection must be closed. Only
``ProtocolError`` ever leaves it.

Connections we dial (our client, the replicas' links, the proxy) send their requests with the
binary header (``Connection``'s ``request_serialize_type``), which every RocketMQ server reads;
a response goes out in the type of its request, as the Java broker answers; requests on accepted
connections (a broker asking a client) stay JSON, which every client reads. What does not fit
the binary header (the ledger's request codes, 50000 and up, past int16) goes as JSON. Binary
frames are read and written in C (``_frame_codec.c``; 4.3 µs to decode a
single send's JSON request and 1.5 µs to encode its answer in Python, see that file) with
``_parse_binary_header`` and ``_encode_binary_head_py`` as the references.

The JSON header is read and written by ``orjson`` when it is installed (the ``fast`` extra):
the standard library's ``json`` took about 5 µs to parse and 6 µs to write a send's header, a
fifth of the master's Python time per single send; orjson takes 1.4 and 0.3. The standard
library stays the reference: whatever orjson refuses (a byte-order mark, NaN, integers past 64
bits, lone surrogates) goes to it, so both accept and refuse exactly the same frames, and
``LEDGERMQ_PURE_PYTHON=1`` runs on the reference alone (tests/wire/test_frame_json.py holds them
equal).

Limits (issue 25 item 6). The decoder runs on the event loop that also runs the replica's Raft,
so what one frame can make it do must stay small, whoever sent it (the ACL is checked after
decoding). A frame is at most ``max_frame_bytes`` (RocketMQ's 16 MiB), refused from its length
prefix alone; its header at most ``MAX_HEADER_BYTES`` (64 KiB), refused from the header word,
before the rest of the frame is buffered; and at most ``MAX_EXT_FIELDS`` (256) extFields. The
JSON of a 64 KiB header parses in well under a millisecond. RocketMQ's own decoders bound only
the frame (``frameMaxLength``): a 16 MiB header of 700,000 extFields took over a second to
parse and then to check, and the master lost its leadership. What RocketMQ's clients send is far
below both limits: a few hundred bytes and fewer than 30 fields, the largest header being a send
whose message properties (field ``i`` of SEND_MESSAGE_V2) RocketMQ caps at 32767 bytes. A
refusal is a ``FrameRefusedError`` carrying the frame's ``opaque`` when it can be read, which
the connection answers (``MESSAGE_ILLEGAL`` and the message) before closing.

A frame of ``LARGE_FRAME_BYTES`` (1 MiB) or more that does not arrive in one read is received
straight into its body's own ``bytes`` object, allocated from the header word and filled read by
read (``_frame_codec.new_body`` / ``fill_body``), so that no read pays for the whole body: a
growing buffer copied again as it grew, and its last read then copied the 16 MiB body out of it,
20-30 ms of the event loop in one callback on a loaded 2-core machine. The reference (no C)
keeps the reads and joins them when the frame is whole.
"""

from __future__ import annotations

import enum
import json
import re
import struct
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.errors import FrameRefusedError, Http2PrefaceError, ProtocolError
from ledgermq.speedups import PURE_PYTHON
from ledgermq.wire.http2 import PREFACE_FRAME_LENGTH, is_http2_preface_start

try:
    import orjson

    HAVE_ORJSON = True
except ImportError:  # pragma: no cover - the fast extra is not installed
    HAVE_ORJSON = False

try:
    from ledgermq.wire import _frame_codec
    from ledgermq.wire._frame_codec import decode_frames as _c_decode_frames
    from ledgermq.wire._frame_codec import encode_head as _c_encode_head
    from ledgermq.wire._frame_codec import fill_body as _c_fill_body
    from ledgermq.wire._frame_codec import new_body as _c_new_body
except ImportError:  # pragma: no cover - the extension is optional (no C compiler)
    _c_decode_frames = None  # type: ignore[assignment]
    _c_encode_head = None  # type: ignore[assignment]
    _c_new_body = _c_fill_body = None  # type: ignore[assignment]
else:
    if getattr(_frame_codec, "ABI", 1) != 4:  # pragma: no cover - a stale build
        # built before the header limits, its decode_frames takes other arguments: unused
        _c_decode_frames = None  # type: ignore[assignment]
        _c_encode_head = None  # type: ignore[assignment]
        _c_new_body = _c_fill_body = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "MAX_EXT_FIELDS",
    "MAX_HEADER_BYTES",
    "SEPARATE_BODY_BYTES",
    "FrameDecoder",
    "LanguageCode",
    "RemotingCommand",
    "SerializeType",
    "encode_frame",
    "encode_frame_parts",
    "with_opaque",
]

DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""RocketMQ's ``com.rocketmq.remoting.frameMaxLength`` default (16 MiB)."""
MAX_HEADER_BYTES: Final = 64 * 1024
"""The largest header a frame may have (see the module docstring): twice RocketMQ's cap on a
message's properties, which travel in the header."""
MAX_EXT_FIELDS: Final = 256
"""The most extFields a header may hold; RocketMQ's requests carry fewer than 30."""
LARGE_FRAME_BYTES: Final = 1024 * 1024
"""From this frame length on, a frame that is not whole in one read is received straight into its
body (see the module docstring)."""
FLAG_RESPONSE: Final = 1
"""``RPC_TYPE`` bit: 0 request, 1 response."""
FLAG_ONEWAY: Final = 2
"""``RPC_ONEWAY`` bit: no response expected."""
SEPARATE_BODY_BYTES: Final = 64 * 1024
"""From this body size on, ``encode_frame_parts`` leaves the body out of the header's piece."""

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_PREFIX = struct.Struct(">ii")
_LENGTH = struct.Struct(">i")
_BINARY_FIXED = struct.Struct(">hbhii")
_SHORT = struct.Struct(">h")
_MAX_HEADER_LENGTH: Final = 0xFFFFFF
"""The header word keeps 24 bits for the header's length."""
_JSON_OPAQUE: Final = re.compile(rb'"opaque"\s*:\s*(-?[0-9]{1,10})\b')
"""Where a refused JSON header says its ``opaque``, read so that the refusal reaches its caller."""

_use_orjson = HAVE_ORJSON and not PURE_PYTHON
"""Whether orjson reads and writes headers. A module global, not a constant, so that a test can
turn it off and run on the reference."""
HAVE_FRAME_CODEC: Final = _c_decode_frames is not None
"""Whether the C codec of binary-header frames (``_frame_codec.c``) was built."""
_use_c_frames = HAVE_FRAME_CODEC and not PURE_PYTHON
"""Whether binary-header frames are decoded and encoded in C (a global, so a test can turn it
off and run on the references)."""


def _dump_header_json(header: Mapping[str, object]) -> bytes:
    """The header we write (str keys; int, str and None values; ``extFields`` of str) as
    compact UTF-8 JSON, keys in their order: byte for byte what the reference writes."""
    if _use_orjson:
        try:
            return orjson.dumps(header)
        except (TypeError, ValueError):
            pass  # lone surrogates, integers past 64 bits: the reference says what they are
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()


class SerializeType(enum.IntEnum):
    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    """``LanguageCode`` in RocketMQ's order (the binary header carries the ordinal)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


_LANGUAGE_NAMES: Final = (*(code.name for code in LanguageCode), "OTHER")
"""The binary header's language ordinals -> names, and last the name of an unknown one."""
_LANGUAGE_ORDINALS: Final = {code.name: int(code) for code in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One request or response (``RemotingCommand``).

    Treat it as immutable (``dataclasses.replace`` makes a changed copy). It is not declared
    ``frozen``: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    and cost 0.94 µs here against 0.21 µs for this one, and every request and every response
    builds one (two or more per single send on the master, one per push on a follower).
    """

    code: int
    opaque: int
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "PYTHON"
    version: int = 0
    serialize_type: int = 0
    """How the header is (or will be) encoded: ``SerializeType.JSON`` or ``ROCKETMQ`` (binary).
    A response takes its request's."""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self,
        code: int,
        *,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The response to this request: same ``opaque``, the response bit set.

        Language and version are ours, not copied from the requester: they describe the sender.
        """
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=ext_fields or {},
            body=body,
            serialize_type=self.serialize_type,
        )


def with_opaque(
    command: RemotingCommand, opaque: int, flag: int, serialize_type: int | None = None
) -> RemotingCommand:
    """``command`` with another ``opaque`` and ``flag`` (``dataclasses.replace`` took 3 us), and
    with ``serialize_type`` when one is given."""
    return RemotingCommand(
        command.code, opaque, flag, command.remark, command.ext_fields, command.body,
        command.language, command.version,
        command.serialize_type if serialize_type is None else serialize_type,
    )  # fmt: skip


def encode_frame(command: RemotingCommand) -> bytes:
    """The whole frame, ready to write to a socket."""
    return b"".join((_encode_head(command), command.body))


def encode_frame_parts(command: RemotingCommand) -> tuple[bytes, ...]:
    """``encode_frame`` as the pieces to write one after the other.

    One piece, or, for a body of ``SEPARATE_BODY_BYTES`` or more, the length prefix and header
    followed by the body itself. Why: a PULL response body is about a megabyte; joining it to
    its header copied it into a fresh block of memory, which the allocator takes from the kernel
    as zeroed pages, a page fault per 4 KiB. A transport's ``writelines`` sends both pieces in
    one system call (uvloop: ``writev``) without that copy.
    """
    head = _encode_head(command)
    body = command.body
    if len(body) >= SEPARATE_BODY_BYTES:
        return head, body
    return (head + body,)


def _encode_head(command: RemotingCommand) -> bytes:
    """The length prefix and the header: everything of the frame but its body.

    Binary when the command asks for it and fits it (a code or version past int16, a key past
    32767 bytes do not); JSON otherwise, which every reader takes."""
    if command.serialize_type == SerializeType.ROCKETMQ:
        language = _LANGUAGE_ORDINALS.get(command.language, LanguageCode.OTHER)
        head: bytes | None = None
        if _use_c_frames:
            head = _c_encode_head(
                command.code, language, command.version, command.opaque, command.flag,
                command.remark, command.ext_fields, len(command.body),
            )  # fmt: skip
        if head is None:
            head = _encode_binary_head_py(command, language)
        if head is not None:
            return head
    return _encode_json_head(command)


def _encode_binary_head_py(command: RemotingCommand, language: int) -> bytes | None:
    """The reference of ``_frame_codec.encode_head``: the length prefix, the header word and
    the binary header (section 2.3), or None when the command does not fit that header."""
    try:
        remark = b"" if command.remark is None else command.remark.encode()
        parts = [
            _BINARY_FIXED.pack(
                command.code, language, command.version, command.opaque, command.flag
            ),
            _LENGTH.pack(len(remark)),
            remark,
            b"",
        ]
        ext_size = 0
        for key, value in command.ext_fields.items():
            key_bytes, value_bytes = str(key).encode(), str(value).encode()
            parts += (
                _SHORT.pack(len(key_bytes)),
                key_bytes,
                _LENGTH.pack(len(value_bytes)),
                value_bytes,
            )
            ext_size += 6 + len(key_bytes) + len(value_bytes)
        parts[3] = _LENGTH.pack(ext_size)
        header = b"".join(parts)
        if len(header) > _MAX_HEADER_LENGTH:
            return None
        prefix = _PREFIX.pack(
            4 + len(header) + len(command.body), SerializeType.ROCKETMQ << 24 | len(header)
        )
    except (struct.error, UnicodeEncodeError):
        return None
    return prefix + header


def _encode_json_head(command: RemotingCommand) -> bytes:
    """The length prefix and the JSON header."""
    header: dict[str, object] = {
        "code": command.code,
        "language": command.language,
        "version": command.version,
        "opaque": command.opaque,
        "flag": command.flag,
        "extFields": {str(k): str(v) for k, v in command.ext_fields.items()},
        "serializeTypeCurrentRPC": "JSON",
    }
    if command.remark is not None:
        header["remark"] = command.remark
    encoded = _dump_header_json(header)
    return _PREFIX.pack(4 + len(encoded) + len(command.body), len(encoded)) + encoded


class FrameDecoder:
    """Incremental decoder: ``feed(bytes) -> [RemotingCommand, ...]``."""

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        max_header_bytes: int = MAX_HEADER_BYTES,
        max_ext_fields: int = MAX_EXT_FIELDS,
        large_frame_bytes: int = LARGE_FRAME_BYTES,
    ) -> None:
        if max_frame_bytes < 8:
            raise ValueError("max_frame_bytes must be at least 8")
        if not 0 <= max_header_bytes <= _MAX_HEADER_LENGTH or max_ext_fields < 0:
            raise ValueError("max_header_bytes and max_ext_fields must be at least 0")
        if max_frame_bytes >= PREFACE_FRAME_LENGTH:
            # b"PRI " as a length must stay refused, or a gRPC client's preface would be
            # buffered as the start of a 1.3 GB frame instead of recognised (wire/http2.py)
            raise ValueError(f"max_frame_bytes must be below {PREFACE_FRAME_LENGTH}")
        self.max_frame_bytes = max_frame_bytes
        self.max_header_bytes = max_header_bytes
        self.max_ext_fields = max_ext_fields
        self.large_frame_bytes = large_frame_bytes
        self._buffer = bytearray()
        self._large: _LargeFrame | None = None
        """The large frame being received straight into its body, if one is."""
        self._failed: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not form a whole frame yet."""
        large = self._large
        return len(self._buffer) + (0 if large is None else large.received)

    def feed(self, data: bytes, max_commands: int = sys.maxsize) -> list[RemotingCommand]:
        """Every whole command in what has arrived so far, in order; at most ``max_commands``
        of them, the rest staying buffered for the next call (``feed(b"")`` goes on), so that
        a caller can spread a read full of small requests over several passes of its loop.

        The frames are read at offsets and the consumed bytes dropped once per call (not after
        each frame: a read holding 16 requests moved the rest of the buffer 16 times), and when
        nothing was buffered the bytes are read where they are instead of being copied in first.
        """
        if self._failed is not None:
            raise ProtocolError(f"the stream is unusable after an earlier error: {self._failed}")
        commands: list[RemotingCommand] = []
        large = self._large
        if large is not None:
            with memoryview(data) as view:
                used = large.take(view)
                rest = bytes(view[used:]) if used < len(view) else b""
            if not large.whole:
                return commands
            self._large = None
            try:
                commands.append(large.command(self.max_ext_fields))
            except ProtocolError as exc:
                self._failed = exc
                raise
            if not rest:
                return commands
            data = rest
        buf = self._buffer
        source: bytes | bytearray
        if buf:
            buf += data
            source = buf
        else:
            source = data
        try:
            with memoryview(source) as view:
                consumed = self._frames(view, commands, max_commands)
        except ProtocolError as exc:
            self._failed = exc
            buf.clear()
            raise
        if source is buf:
            del buf[:consumed]
        elif consumed < len(data):
            buf += data[consumed:]
        return commands

    def _frames(self, view: memoryview, commands: list[RemotingCommand], max_commands: int) -> int:
        """Decode the whole frames at the start of ``view`` into ``commands``; the bytes used.

        Raises FrameRefusedError for the first frame that breaks a rule, as soon as the bytes
        that break it have arrived (a header over ``max_header_bytes`` from the header word).
        """
        end = len(view)
        pos = 0
        unpack = _PREFIX.unpack_from
        limit = self.max_frame_bytes
        max_header = self.max_header_bytes
        max_fields = self.max_ext_fields
        c_frames = _c_decode_frames if _use_c_frames else None
        while end - pos >= 4 and len(commands) < max_commands:
            if c_frames is not None:
                # the binary frames from here; the Python loop takes the one it stopped at
                pos = c_frames(
                    view, pos, limit, max_header, max_fields, max_commands, commands,
                    RemotingCommand, _LANGUAGE_NAMES,
                )  # fmt: skip
                if end - pos < 4 or len(commands) >= max_commands:
                    break
            (length,) = _LENGTH.unpack_from(view, pos)
            if length < 4:
                raise FrameRefusedError(f"frame length {length} is below the minimum of 4")
            if length > limit:
                # only here, on a frame refused anyway, is the HTTP/2 preface looked for: the
                # hot path pays nothing for it (wire/http2.py)
                if length == PREFACE_FRAME_LENGTH and is_http2_preface_start(view[pos : pos + 24]):
                    raise Http2PrefaceError(
                        "the peer sent an HTTP/2 client preface (a gRPC client, such as a"
                        " RocketMQ 5 SDK) to a RocketMQ remoting port"
                    )
                raise _refused(
                    view, pos, f"frame of {length} bytes exceeds the limit of {limit} bytes"
                )
            if end - pos < 8:
                break
            _, word = unpack(view, pos)
            kind, header_length = (word >> 24) & 0xFF, word & 0xFFFFFF
            if header_length > length - 4:
                raise _refused(
                    view,
                    pos,
                    f"header length {header_length} does not fit in a frame of {length} bytes",
                )
            if header_length > max_header:
                raise _refused(
                    view,
                    pos,
                    f"a header of {header_length} bytes exceeds the limit of {max_header} bytes"
                    " (RocketMQ's clients send a few hundred)",
                )
            if kind not in (SerializeType.JSON, SerializeType.ROCKETMQ):
                raise _refused(
                    view, pos, f"unknown serialize type {kind} (0 JSON and 1 ROCKETMQ exist)"
                )
            frame_end = pos + 4 + length
            if end < frame_end:
                if length >= self.large_frame_bytes:
                    # received from here on straight into its body (see the module docstring)
                    self._large = _LargeFrame(length, header_length, kind)
                    self._large.take(view[pos:end])
                    pos = end
                break
            header_end = pos + 8 + header_length
            header = bytes(view[pos + 8 : header_end])
            body = bytes(view[header_end:frame_end])
            try:
                if kind == SerializeType.JSON:
                    commands.append(_parse_json_header(header, body, max_fields))
                else:
                    commands.append(_parse_binary_header(header, body, max_fields))
            except ProtocolError as exc:
                raise _refused(view, pos, str(exc)) from None
            pos = frame_end
        return pos


class _LargeFrame:
    """A frame of at least ``LARGE_FRAME_BYTES`` being received: its length prefix, header word
    and header in ``head``; its body in a ``bytes`` object of its final size filled read by read
    (C), or in the reads themselves, joined when whole (the reference).

    Invariant: ``body`` is referenced by nobody else until ``command`` hands it out whole (it
    is written in place, which only a ``bytes`` object no one has seen may be)."""

    __slots__ = ("body", "body_size", "chunks", "filled", "head", "head_size", "kind")

    def __init__(self, length: int, header_length: int, kind: int) -> None:
        self.head = bytearray()
        self.head_size = 8 + header_length
        self.body_size = length - 4 - header_length
        self.kind = kind
        self.body: bytes | None = _c_new_body(self.body_size) if _use_c_frames else None
        self.chunks: list[bytes] = []
        self.filled = 0
        """Bytes of the body received."""

    @property
    def received(self) -> int:
        return len(self.head) + self.filled

    @property
    def whole(self) -> bool:
        return len(self.head) == self.head_size and self.filled == self.body_size

    def take(self, data: memoryview) -> int:
        """Copy the start of ``data`` that belongs to this frame; how many bytes that was."""
        used = 0
        missing = self.head_size - len(self.head)
        if missing > 0:
            part = data[:missing]
            self.head += part
            used = len(part)
        part = data[used : used + self.body_size - self.filled]
        if part:
            if self.body is not None:
                _c_fill_body(self.body, self.filled, part)
            else:
                self.chunks.append(bytes(part))
            self.filled += len(part)
            used += len(part)
        return used

    def command(self, max_fields: int) -> RemotingCommand:
        """The whole frame's command (FrameRefusedError if its header breaks a rule)."""
        head = bytes(self.head)
        body = self.body if self.body is not None else b"".join(self.chunks)
        self.body, self.chunks = None, []
        try:
            if self.kind == SerializeType.JSON:
                return _parse_json_header(head[8:], body, max_fields)
            return _parse_binary_header(head[8:], body, max_fields)
        except ProtocolError as exc:
            with memoryview(head) as view:
                raise _refused(view, 0, str(exc)) from None


def _refused(view: memoryview, pos: int, message: str) -> FrameRefusedError:
    """The refusal of the frame at ``pos``, with its ``opaque`` if the bytes that arrived say it
    (the binary header has it at a fixed place; a JSON header's is looked for in at most
    ``MAX_HEADER_BYTES``), so that the caller waiting for it sees why."""
    opaque = 0
    kind = view[pos + 4] if len(view) >= pos + 8 else 0
    header = view[pos + 8 : pos + 8 + MAX_HEADER_BYTES]
    if kind == SerializeType.ROCKETMQ:
        if len(header) >= 9:
            opaque = int.from_bytes(header[5:9], "big", signed=True)
    elif kind == SerializeType.JSON:
        found = _JSON_OPAQUE.search(header)
        if found is not None and _INT32_MIN <= int(found[1]) <= _INT32_MAX:
            opaque = int(found[1])
    serialize_type = kind if kind in (SerializeType.JSON, SerializeType.ROCKETMQ) else 0
    return FrameRefusedError(message, opaque=opaque, serialize_type=serialize_type)


def _parse_json_header(raw: bytes, body: bytes, max_fields: int) -> RemotingCommand:
    if _use_orjson:
        try:
            parsed = orjson.loads(raw)
        except ValueError:
            parsed = None
        if type(parsed) is dict:
            command = _plain_command(parsed, body, max_fields)
            if command is not None:
                return command
    return _parse_json_header_reference(raw, body, max_fields)


def _plain_command(
    header: dict[str, object], body: bytes, max_fields: int = MAX_EXT_FIELDS
) -> RemotingCommand | None:
    """The command of an orjson-parsed header whose fields all have their usual types (ints in
    range, strings, ``extFields`` of strings or ints, at most ``max_fields`` of them); None sends
    anything else to the reference, which then refuses it or reads it exactly as it always has
    (orjson reads integers past 64 bits as floats, for one)."""
    code = header.get("code")
    opaque = header.get("opaque")
    flag = header.get("flag", 0)
    version = header.get("version", 0)
    remark = header.get("remark")
    language = header.get("language", "OTHER")
    raw_fields = header.get("extFields")
    if not (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and (remark is None or type(remark) is str)
        and type(language) is str
    ):
        return None
    fields: dict[str, str]
    if raw_fields is None:
        fields = {}
    elif type(raw_fields) is dict:
        if len(raw_fields) > max_fields:
            return None
        fields = raw_fields
        if not all(type(v) is str for v in raw_fields.values()):
            if not all(type(v) is str or type(v) is int for v in raw_fields.values()):
                return None
            fields = {k: v if type(v) is str else str(v) for k, v in raw_fields.items()}
    else:
        return None
    return RemotingCommand(code, opaque, flag, remark, fields, body, language, version)


def _parse_json_header_reference(
    raw: bytes, body: bytes, max_fields: int = MAX_EXT_FIELDS
) -> RemotingCommand:
    """``_parse_json_header`` on the standard library's json: the reference."""
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"the JSON header does not parse: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError(f"the JSON header is a {type(header).__name__}, not an object")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise ProtocolError("header field 'remark' must be a string or null")
    language = header.get("language", "OTHER")
    if not isinstance(language, str):
        raise ProtocolError("header field 'language' must be a string")
    return RemotingCommand(
        code=_int32(header, "code", required=True),
        opaque=_int32(header, "opaque", required=True),
        flag=_int32(header, "flag"),
        remark=remark,
        ext_fields=_ext_fields(header.get("extFields"), max_fields),
        body=body,
        language=language,
        version=_int32(header, "version"),
    )


def _int32(header: dict[str, object], name: str, *, required: bool = False) -> int:
    value = header.get(name)
    if value is None and not required:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"header field {name!r} must be an integer, got {value!r:.40}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ProtocolError(f"header field {name!r} = {value} is outside the int32 range")
    return value


def _ext_fields(raw: object, max_fields: int = MAX_EXT_FIELDS) -> dict[str, str]:
    """``extFields``: values coerced to strings (the C++ client sends some as numbers)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ProtocolError("header field 'extFields' must be an object")
    if len(raw) > max_fields:
        raise ProtocolError(_too_many_fields(max_fields))
    fields: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, str):
            fields[key] = value
        elif isinstance(value, bool):
            fields[key] = "true" if value else "false"
        elif isinstance(value, int | float):
            fields[key] = str(value)
        elif value is None:
            continue
        else:
            raise ProtocolError(f"extFields[{key!r}] must be a string or a number")
    return fields


def _too_many_fields(max_fields: int) -> str:
    return f"the header holds more than {max_fields} extFields (RocketMQ's requests send under 30)"


def _parse_binary_header(
    raw: bytes, body: bytes, max_fields: int = MAX_EXT_FIELDS
) -> RemotingCommand:
    """The ROCKETMQ binary header (section 2.3)."""
    try:
        code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(raw, 0)
        pos = _BINARY_FIXED.size
        remark_length = _read_length(raw, pos, ">i")
        pos += 4
        remark = raw[pos : pos + remark_length].decode() if remark_length else None
        pos += remark_length
        ext_length = _read_length(raw, pos, ">i")
        pos += 4
        end = pos + ext_length
        if end != len(raw):
            raise ProtocolError("the binary header's extFields length does not match its size")
        fields: dict[str, str] = {}
        count = 0
        while pos < end:
            count += 1
            if count > max_fields:
                raise ProtocolError(_too_many_fields(max_fields))
            key_length = _read_length(raw, pos, ">h", limit=end)
            pos += 2
            key = raw[pos : pos + key_length].decode()
            pos += key_length
            value_length = _read_length(raw, pos, ">i", limit=end)
            pos += 4
            fields[key] = raw[pos : pos + value_length].decode()
            pos += value_length
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the binary header is malformed: {exc}") from None
    try:
        language_name = LanguageCode(language).name
    except ValueError:
        language_name = "OTHER"
    binary = int(SerializeType.ROCKETMQ)
    return RemotingCommand(code, opaque, flag, remark, fields, body, language_name, version, binary)


def _read_length(raw: bytes, pos: int, fmt: str, *, limit: int | None = None) -> int:
    (length,) = struct.unpack_from(fmt, raw, pos)
    end = len(raw) if limit is None else limit
    if length < 0 or pos + struct.calcsize(fmt) + length > end:
        raise ProtocolError(f"a length of {length} at byte {pos} runs past the header")
    return int(length)
