"""The remoting frame codec: whole, byte by byte, with trailing bytes, malformed, fuzzed."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import FrameRefusedError, ProtocolError
from ledgermq.wire import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    MAX_EXT_FIELDS,
    MAX_HEADER_BYTES,
    SEPARATE_BODY_BYTES,
    FrameDecoder,
    LedgerRequestCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
    encode_frame_parts,
)


def frame(header: object, body: bytes = b"", kind: int = 0) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack(">iI", 4 + len(raw) + len(body), kind << 24 | len(raw)) + raw + body


REQUEST = RemotingCommand(
    code=LedgerRequestCode.APPEND,
    opaque=7,
    ext_fields={"group": "g", "remoteId": "n1"},
    body=b"\x00\x01payload",
)


def test_round_trip_whole() -> None:
    (decoded,) = FrameDecoder().feed(encode_frame(REQUEST))
    assert decoded == REQUEST
    assert not decoded.is_response


def test_frame_parts_leave_a_large_body_as_it_is() -> None:
    """A large body (a PULL response's) is its own piece, the very object given, so a transport
    can send it without copying it; the pieces in a row are ``encode_frame``'s bytes."""
    small = REQUEST.response(0, body=b"x" * (SEPARATE_BODY_BYTES - 1))
    assert encode_frame_parts(small) == (encode_frame(small),)
    body = bytes(range(256)) * (SEPARATE_BODY_BYTES // 256)
    large = REQUEST.response(0, remark="r", body=body)
    head, piece = encode_frame_parts(large)
    assert piece is body
    assert head + piece == encode_frame(large)
    (decoded,) = FrameDecoder().feed(head + piece)
    assert decoded == large
    assert encode_frame_parts(REQUEST) == (encode_frame(REQUEST),)


def test_byte_by_byte_and_trailing_bytes() -> None:
    data = encode_frame(REQUEST) + encode_frame(REQUEST.response(200, remark="ok"))
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for i in range(len(data)):
        got += decoder.feed(data[i : i + 1])
    assert [c.code for c in got] == [LedgerRequestCode.APPEND, 200]
    assert got[1].is_response
    assert (got[1].opaque, got[1].remark) == (7, "ok")
    tail = encode_frame(REQUEST)[:11]
    assert decoder.feed(tail) == []
    assert decoder.buffered == 11


def test_response_flag_and_opaque() -> None:
    response = REQUEST.response(404, remark="not leader")
    assert response.flag == FLAG_RESPONSE
    assert response.opaque == REQUEST.opaque


def test_a_response_speaks_for_its_sender() -> None:
    """Language and version describe who sent the frame, not who asked."""
    java_request = RemotingCommand(code=1, opaque=9, language="JAVA", version=433)
    response = java_request.response(200)
    assert (response.language, response.version) == ("PYTHON", 0)


def test_oneway_flag() -> None:
    oneway = RemotingCommand(code=1, opaque=2, flag=FLAG_ONEWAY)
    (decoded,) = FrameDecoder().feed(encode_frame(oneway))
    assert decoded.is_oneway


def test_ext_fields_are_always_strings_on_the_wire() -> None:
    """The C++ client reads only string values and needs the map even when empty."""
    raw = encode_frame(RemotingCommand(code=1, opaque=1))
    header = json.loads(raw[8 : 8 + struct.unpack(">I", raw[4:8])[0]])
    assert header["extFields"] == {}
    assert "remark" not in header


def test_numbers_and_booleans_in_ext_fields_are_accepted() -> None:
    """Observed from the C++ client: queueId and friends arrive as JSON numbers."""
    data = frame({"code": 10, "opaque": 3, "extFields": {"queueId": 2, "batch": True, "x": None}})
    (decoded,) = FrameDecoder().feed(data)
    assert decoded.ext_fields == {"queueId": "2", "batch": "true"}


def test_binary_header_is_decoded() -> None:
    pairs = b""
    for key, value in (("topic", "T"), ("queueId", "3")):
        pairs += struct.pack(">h", len(key)) + key.encode()
        pairs += struct.pack(">i", len(value)) + value.encode()
    remark = b"hi"
    header = (
        struct.pack(">hbhii", 310, 0, 453, 99, 0)
        + struct.pack(">i", len(remark))
        + remark
        + struct.pack(">i", len(pairs))
        + pairs
    )
    (decoded,) = FrameDecoder().feed(frame(header, b"body", kind=1))
    assert (decoded.code, decoded.opaque, decoded.language, decoded.version) == (
        310,
        99,
        "JAVA",
        453,
    )
    assert decoded.remark == "hi"
    assert decoded.ext_fields == {"topic": "T", "queueId": "3"}
    assert decoded.body == b"body"


def test_oversized_frame_refused_from_its_length_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decoder.feed(struct.pack(">i", 1 << 30))
    assert decoder.buffered == 0
    with pytest.raises(ProtocolError, match="unusable"):
        decoder.feed(encode_frame(REQUEST))


def test_a_header_over_the_limit_is_refused_from_its_header_word() -> None:
    """Issue 25 item 6: a 16 MiB header of 700,000 extFields was buffered and parsed on the
    event loop. It is refused as soon as the header word says how long it is, with the opaque
    the bytes that came so far show, and nothing of it stays buffered."""
    fields = {f"f{i:06d}": "x" * 10 for i in range(10_000)}
    header = json.dumps({"code": 10, "opaque": 77, "extFields": fields}).encode()
    data = frame(header)
    assert len(header) > MAX_HEADER_BYTES
    decoder = FrameDecoder()
    with pytest.raises(FrameRefusedError) as refused:
        decoder.feed(data[:4096])  # the start of the frame, far from whole
    assert str(refused.value) == (
        f"a header of {len(header)} bytes exceeds the limit of 65536 bytes"
        " (RocketMQ's clients send a few hundred)"
    )
    assert (refused.value.opaque, refused.value.serialize_type) == (77, SerializeType.JSON)
    assert decoder.buffered == 0
    binary = struct.pack(">iI", 4 + 70_000, 1 << 24 | 70_000) + struct.pack(
        ">hbhii", 10, 0, 0, 5, 0
    )
    with pytest.raises(FrameRefusedError, match="exceeds the limit of 65536") as refused:
        FrameDecoder().feed(binary)
    assert (refused.value.opaque, refused.value.serialize_type) == (5, SerializeType.ROCKETMQ)


def test_a_header_at_the_limit_is_read() -> None:
    fill = MAX_HEADER_BYTES - len(json.dumps({"code": 1, "opaque": 1, "remark": ""}))
    header = json.dumps({"code": 1, "opaque": 1, "remark": "r" * fill}).encode()
    assert len(header) == MAX_HEADER_BYTES
    (command,) = FrameDecoder().feed(frame(header))
    assert command.remark == "r" * fill


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_more_ext_fields_than_the_limit_are_refused(kind: SerializeType) -> None:
    fields = {f"k{i}": "v" for i in range(MAX_EXT_FIELDS)}
    allowed = RemotingCommand(10, 3, ext_fields=fields, serialize_type=kind)
    (command,) = FrameDecoder().feed(encode_frame(allowed))
    assert len(command.ext_fields) == MAX_EXT_FIELDS
    over = RemotingCommand(10, 3, ext_fields={**fields, "one": "more"}, serialize_type=kind)
    with pytest.raises(FrameRefusedError, match="more than 256 extFields") as refused:
        FrameDecoder().feed(encode_frame(over))
    assert refused.value.opaque == 3


def test_a_header_nested_1000_deep_is_refused_with_its_opaque() -> None:
    """Issue 25 item 22: the refusal carries the opaque, so that the answer reaches its caller."""
    nested = "[" * 1000 + "]" * 1000
    header = f'{{"code":10,"opaque":41,"extFields":{{"a":{nested}}}}}'.encode()
    with pytest.raises(FrameRefusedError) as refused:
        FrameDecoder().feed(frame(header))
    assert refused.value.opaque == 41


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (struct.pack(">i", 2), "below the minimum"),
        (struct.pack(">iI", 10, 200) + b"x" * 6, "does not fit"),
        (frame(b"{not json"), "does not parse"),
        (frame(b"\xff\xfe"), "does not parse"),
        (frame([1, 2]), "not an object"),
        (frame({"opaque": 1}), "'code' must be an integer"),
        (frame({"code": True, "opaque": 1}), "'code' must be an integer"),
        (frame({"code": "10", "opaque": 1}), "'code' must be an integer"),
        (frame({"code": 1 << 40, "opaque": 1}), "int32"),
        (frame({"code": 1, "opaque": 1, "extFields": []}), "'extFields' must be an object"),
        (frame({"code": 1, "opaque": 1, "extFields": {"a": {}}}), "string or a number"),
        (frame({"code": 1, "opaque": 1, "remark": 5}), "'remark'"),
        (frame({"code": 1, "opaque": 1}, kind=7), "unknown serialize type"),
        (frame(struct.pack(">hbhii", 1, 0, 0, 1, 0) + struct.pack(">i", 99), kind=1), "runs past"),
        (frame(b"\x00", kind=1), "binary header is malformed"),
    ],
)
def test_malformed_frames_raise_protocol_error(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        FrameDecoder().feed(data)


commands = st.builds(
    RemotingCommand,
    code=st.integers(-(1 << 31), (1 << 31) - 1),
    opaque=st.integers(-(1 << 31), (1 << 31) - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(max_size=30),
    ext_fields=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=5),
    body=st.binary(max_size=200),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON"]),
    version=st.integers(0, 500),
)


@given(st.lists(commands, max_size=5), st.lists(st.integers(1, 64), min_size=1, max_size=50))
def test_any_commands_round_trip_in_any_chunking(
    sent: list[RemotingCommand], cuts: list[int]
) -> None:
    data = b"".join(encode_frame(c) for c in sent)
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    pos = 0
    for size in cuts * (len(data) // sum(cuts) + 1):
        got += decoder.feed(data[pos : pos + size])
        pos += size
        if pos >= len(data):
            break
    assert got == sent
    assert decoder.buffered == 0


@given(st.binary(max_size=300), st.integers(1, 40))
def test_garbage_only_ever_raises_protocol_error(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=4096)
    try:
        for i in range(0, len(data), chunk):
            decoder.feed(data[i : i + chunk])
    except ProtocolError:
        pass


@given(st.binary(max_size=120))
def test_a_valid_prefix_with_a_garbage_header_only_raises_protocol_error(header: bytes) -> None:
    for kind in (0, 1):
        with contextlib.suppress(ProtocolError):
            FrameDecoder().feed(frame(header, b"b", kind=kind))
