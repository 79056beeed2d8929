"""The orjson header path equals its reference, the standard library's json (wire/frame.py):
the same commands, the same errors, the same bytes."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.errors import ProtocolError
from ledgermq.wire import frame
from ledgermq.wire.frame import FrameDecoder, RemotingCommand, encode_frame

pytestmark = pytest.mark.skipif(not frame.HAVE_ORJSON, reason="orjson (the fast extra) is missing")

# Text with every kind of code point, lone surrogates included (orjson refuses those).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=12,
)


def _outcome(fn: Any, *args: object) -> tuple[str, object]:
    try:
        return ("ok", _canonical(fn(*args)))
    except Exception as exc:  # noqa: BLE001 - the comparison is of whatever happened
        return ("error", type(exc).__name__)


def _canonical(value: object) -> object:
    """A comparable form: NaN equals NaN, and 1 is not 1.0 or True."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, bool | int):
        return (type(value).__name__, value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    return value


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=40)
    | st.sampled_from(
        [b"\xef\xbb\xbf{}", b'{"code":NaN}', b'{"code":1e400}', b'{"remark":"\\ud800"}']
    )
)
def test_any_header_bytes_decode_as_the_reference_decodes_them(raw: bytes) -> None:
    data = _frame_with_header(raw)
    fast = _decode(data)
    with pytest.MonkeyPatch.context() as mp:
        _reference(mp)
        reference = _decode(data)
    assert fast == reference


def _frame_with_header(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _decode(data: bytes) -> tuple[str, object]:
    try:
        return ("ok", FrameDecoder().feed(data))
    except ProtocolError as exc:
        return ("error", str(exc))


def _reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame, "_use_orjson", False)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {"code": json_values, "opaque": json_values},
        optional={
            "flag": json_values,
            "remark": json_values,
            "language": json_values,
            "version": json_values,
            "extFields": st.dictionaries(any_text, json_values, max_size=4) | json_values,
        },
    ),
    st.binary(max_size=8),
)
def test_a_frame_decodes_to_the_same_command_or_the_same_error(
    header: dict[str, object], body: bytes
) -> None:
    raw = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
    data = _frame_with_header(raw, body)
    fast = _decode(data)
    with pytest.MonkeyPatch.context() as mp:
        _reference(mp)
        reference = _decode(data)
    assert fast == reference


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.one_of(st.none(), any_text),
    st.dictionaries(any_text, any_text, max_size=6),
    st.binary(max_size=16),
)
def test_an_encoded_command_is_byte_for_byte_the_reference(
    code: int, opaque: int, remark: str | None, fields: dict[str, str], body: bytes
) -> None:
    command = RemotingCommand(code, opaque, 1, remark, fields, body)
    fast = _outcome(encode_frame, command)
    with pytest.MonkeyPatch.context() as mp:
        _reference(mp)
        reference = _outcome(encode_frame, command)
    assert fast == reference
    if fast[0] == "ok":
        assert FrameDecoder().feed(encode_frame(command)) == [command]
