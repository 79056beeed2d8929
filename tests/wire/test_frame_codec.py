"""Binary-header frames with the C codec (``_frame_codec.c``) against the Python references
(``_parse_binary_header`` in ``FrameDecoder``'s loop, ``_encode_binary_head_py``): the same
bytes, the same commands, or the same error with the same message, for valid frames, frames the
C code leaves to Python (JSON headers, values out of range) and damaged or cut bytes."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import ProtocolError
from ledgermq.wire import LedgerRequestCode, MQResponseCode, frame
from ledgermq.wire.frame import (
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

pytestmark = pytest.mark.skipif(
    not frame.HAVE_FRAME_CODEC, reason="the C extension _frame_codec is not built"
)

ROCKETMQ = SerializeType.ROCKETMQ


@contextmanager
def python_only() -> Iterator[None]:
    """Run the block on the references alone."""
    saved = frame._use_c_frames
    frame._use_c_frames = False
    try:
        yield
    finally:
        frame._use_c_frames = saved


# Text that stresses UTF-8: multi-byte, the largest code point, and (drawn rarely) a lone
# surrogate, which has no UTF-8 and so cannot go in a binary header.
texts = st.lists(
    st.sampled_from(["a", "é", "主", "😀", "\U0010ffff", "\x00", " ", "TAGS", "\x01", "\x02"]),
    max_size=8,
).map("".join)
awkward_texts = st.one_of(texts, texts, texts, st.just("x\ud800"))
int16s = st.integers(-(1 << 15), (1 << 15) - 1)
int32s = st.integers(-(1 << 31), (1 << 31) - 1)
languages = st.sampled_from([*(code.name for code in LanguageCode), "OTHER", "COBOL"])
field_values = st.one_of(awkward_texts, st.integers(-5, 5))


@st.composite
def commands(draw: st.DrawFn, *, fitting: bool = False) -> RemotingCommand:
    """A command for the binary header; ``fitting``: every field fits it (str fields, int16
    code and version, valid UTF-8)."""
    text = texts if fitting else awkward_texts
    values = texts if fitting else field_values
    # codes are often IntEnum members (MQResponseCode.SUCCESS): an int subclass fits as well
    # (the ledger's request codes, 50000 and up, do not fit int16: those go as JSON)
    enum_codes = st.sampled_from([*MQResponseCode, *LedgerRequestCode])
    fitting_enum_codes = st.sampled_from([c for c in MQResponseCode if c < 1 << 15])
    code = draw(
        st.one_of(int16s, fitting_enum_codes)
        if fitting
        else st.one_of(int16s, enum_codes, st.integers(-(1 << 20), 1 << 20), st.booleans())
    )
    version = draw(int16s if fitting else st.one_of(int16s, st.just(1 << 15)))
    # ints among the values: what a caller may pass, written as their text
    fields: dict[str, str] = draw(st.dictionaries(text, values, max_size=6))  # type: ignore[arg-type]
    return RemotingCommand(
        code=code,
        opaque=draw(int32s),
        flag=draw(int32s),
        remark=draw(st.none() | text),
        ext_fields=fields,
        body=draw(st.binary(max_size=40)),
        language=draw(languages),
        version=version,
        serialize_type=ROCKETMQ,
    )


def _encoded(command: RemotingCommand) -> bytes | str:
    """The frame, or the error's type and message (a lone surrogate has no UTF-8 in either
    header)."""
    try:
        return encode_frame(command)
    except UnicodeEncodeError as exc:
        return f"{type(exc).__name__}: {exc}"


@given(commands())
def test_encoding_matches_the_reference(command: RemotingCommand) -> None:
    in_c = _encoded(command)
    with python_only():
        reference = _encoded(command)
    assert in_c == reference


@given(commands(fitting=True))
def test_a_fitting_command_goes_binary_and_comes_back(command: RemotingCommand) -> None:
    encoded = encode_frame(command)
    assert encoded[4] == ROCKETMQ  # the header word's top byte: the serialize type
    (decoded,) = FrameDecoder().feed(encoded)
    language = command.language if command.language in LanguageCode.__members__ else "OTHER"
    assert decoded == dataclasses.replace(command, remark=command.remark or None, language=language)


def test_what_does_not_fit_the_binary_header_goes_as_json() -> None:
    for command in (
        RemotingCommand(1 << 15, 1, serialize_type=ROCKETMQ),  # code past int16
        RemotingCommand(10, 1, version=-(1 << 15) - 1, serialize_type=ROCKETMQ),
        RemotingCommand(10, 1, ext_fields={"k" * 40000: "v"}, serialize_type=ROCKETMQ),
    ):
        encoded = encode_frame(command)
        assert encoded[4] == SerializeType.JSON
        (decoded,) = FrameDecoder().feed(encoded)
        assert (decoded.code, decoded.version) == (command.code, command.version)


def test_values_that_are_not_strings_are_written_as_their_text() -> None:
    command = RemotingCommand(10, 7, ext_fields={"n": 5, "s": "x"}, serialize_type=ROCKETMQ)  # type: ignore[dict-item]
    (decoded,) = FrameDecoder().feed(encode_frame(command))
    assert decoded.ext_fields == {"n": "5", "s": "x"}


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """Frames back to back (binary and JSON), then maybe damaged: bytes flipped, inserted,
    deleted, or the stream cut."""
    frames = draw(st.lists(commands(fitting=True), min_size=1, max_size=4))
    parts = []
    for command in frames:
        kind = draw(st.sampled_from([ROCKETMQ, SerializeType.JSON]))
        parts.append(encode_frame(dataclasses.replace(command, serialize_type=kind)))
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 3))):
        if not data:
            break
        where = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["flip", "insert", "delete", "cut", "set"]))
        if action == "flip":
            data[where] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del data[where]
        elif action == "cut":
            del data[where:]
        else:
            data[where] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(data)


def _decode(
    chunks: list[bytes], max_frame_bytes: int, **limits: int
) -> tuple[list[RemotingCommand], str, int]:
    """Commands, the error's message ('' for none) and what stayed buffered."""
    decoder = FrameDecoder(max_frame_bytes, **limits)
    out: list[RemotingCommand] = []
    try:
        for chunk in chunks:
            out += decoder.feed(chunk)
    except ProtocolError as exc:
        return out, str(exc), decoder.buffered
    return out, "", decoder.buffered


@given(streams(), st.integers(1, 5), st.sampled_from([64, 1 << 20]))
def test_decoding_matches_the_reference(data: bytes, pieces: int, limit: int) -> None:
    size = max(1, len(data) // pieces)
    chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    in_c = _decode(chunks, limit)
    with python_only():
        reference = _decode(chunks, limit)
    assert in_c == reference


@given(streams(), st.integers(1, 5), st.integers(0, 80), st.integers(0, 4))
def test_the_header_limits_match_the_reference(
    data: bytes, pieces: int, max_header_bytes: int, max_ext_fields: int
) -> None:
    """Issue 25 item 6: the C loop leaves a header over either limit to the Python loop, which
    refuses it with the same message at the same byte."""
    size = max(1, len(data) // pieces)
    chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    limits = {"max_header_bytes": max_header_bytes, "max_ext_fields": max_ext_fields}
    in_c = _decode(chunks, 1 << 20, **limits)
    with python_only():
        reference = _decode(chunks, 1 << 20, **limits)
    assert in_c == reference


@given(streams(), st.integers(1, 9), st.integers(8, 120))
def test_large_frames_received_into_their_body_match_the_reference(
    data: bytes, pieces: int, large_frame_bytes: int
) -> None:
    """Frames from ``large_frame_bytes`` on go straight into their body (new_body/fill_body in
    C, the reads joined in the reference): the same commands, errors and buffered bytes."""
    size = max(1, len(data) // pieces)
    chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    in_c = _decode(chunks, 1 << 20, large_frame_bytes=large_frame_bytes)
    with python_only():
        reference = _decode(chunks, 1 << 20, large_frame_bytes=large_frame_bytes)
    assert in_c == reference


def test_a_16_mib_body_is_received_into_its_own_bytes_without_a_last_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25 item 6: the read that completed a 16 MiB frame copied the body out of the
    buffer (20-30 ms of the event loop on a loaded 2-core machine). The body handed out is the
    object allocated from the header word, filled read by read."""
    allocated: list[bytes] = []
    real_new_body = importlib.import_module("ledgermq.wire._frame_codec").new_body

    def new_body(size: int) -> bytes:
        allocated.append(real_new_body(size))
        return allocated[-1]

    monkeypatch.setattr(frame, "_c_new_body", new_body)
    body = bytes(range(256)) * (64 * 1024 - 16)  # 16 MiB less 4 KiB, under the frame limit
    data = encode_frame(RemotingCommand(10, 5, ext_fields={"a": "b"}, body=body)) + b"\0\0\0"
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(0, len(data), 256 * 1024):
        out += decoder.feed(data[i : i + 256 * 1024])
        if not out:
            assert decoder.buffered == i + 256 * 1024
    (command,) = out
    (allocated_body,) = allocated
    assert command.body is allocated_body
    assert command.body == body
    assert decoder.buffered == 3  # what followed the frame in the last read


def _decode_in_passes(
    chunks: list[bytes], max_commands: int
) -> tuple[list[list[RemotingCommand]], str, int]:
    """``_decode`` with at most ``max_commands`` per call, going on with ``feed(b"")``: the
    commands of each call, the error's message and what stayed buffered."""
    decoder = FrameDecoder(1 << 20, large_frame_bytes=64)
    passes: list[list[RemotingCommand]] = []
    try:
        for chunk in chunks:
            passes.append(decoder.feed(chunk, max_commands))
            while len(passes[-1]) == max_commands:
                passes.append(decoder.feed(b"", max_commands))
    except ProtocolError as exc:
        return passes, str(exc), decoder.buffered
    return passes, "", decoder.buffered


@given(streams(), st.integers(1, 5), st.integers(1, 3))
def test_decoding_a_few_commands_per_call_matches_the_reference(
    data: bytes, pieces: int, max_commands: int
) -> None:
    """Issue 25 item 6: a read full of small requests is decoded a few commands per pass of the
    loop; the C loop stops at the same command as the reference."""
    size = max(1, len(data) // pieces)
    chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    in_c = _decode_in_passes(chunks, max_commands)
    with python_only():
        reference = _decode_in_passes(chunks, max_commands)
    assert in_c == reference
    assert all(len(one) <= max_commands for one in in_c[0])
    if not in_c[1]:
        assert [c for one in in_c[0] for c in one] == _decode(chunks, 1 << 20)[0]


@given(st.binary(max_size=64))
def test_noise_after_a_binary_prefix_matches_the_reference(noise: bytes) -> None:
    header_word = (ROCKETMQ << 24) | len(noise)
    data = (4 + len(noise)).to_bytes(4, "big") + header_word.to_bytes(4, "big") + noise
    in_c = _decode([data], 1 << 20)
    with python_only():
        reference = _decode([data], 1 << 20)
    assert in_c == reference


def test_a_response_takes_its_requests_header_type() -> None:
    (request,) = FrameDecoder().feed(encode_frame(RemotingCommand(10, 3, serialize_type=ROCKETMQ)))
    response = request.response(0, ext_fields={"a": "b"})
    assert response.serialize_type == ROCKETMQ
    assert encode_frame(response)[4] == ROCKETMQ
