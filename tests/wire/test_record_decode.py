"""``decode_records`` with its C fast path (``_record_decode.c``) against the Python reference
(``_decode_records_py``): the same messages, or the same error and message, for valid records,
records the C code leaves to Python (compressed, V2 magic, IPv6 hosts), and damaged bytes."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import MessageFormatError
from ledgermq.wire import message
from ledgermq.wire.message import MessageExt, SysFlag, decode_records, encode_record

try:
    from ledgermq.wire._record_decode import decode_plain
except ImportError:  # the skip below says why
    decode_plain = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    not message.HAVE_RECORD_DECODE, reason="the C extension _record_decode is not built"
)

# Properties from pieces that stress the parser: separators alone or doubled, names that are
# prefixes of others, empty names and values, a value holding \x01, non-ASCII text.
pieces = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "\x01", "\x02", "\x01\x01", "\x02\x02", "a", "k1 k2", "é", "中"]
)
properties = st.lists(pieces, max_size=12).map("".join)
topics = st.sampled_from(["T", "Topic-1", "%RETRY%g", "é", "主题"])
hosts = st.sampled_from([("10.1.2.3", 4000), ("127.0.0.1", 30911), ("255.0.0.9", 0)])


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """One record: mostly the common layout, sometimes one the C code leaves to Python."""
    body = draw(st.binary(max_size=64))
    sys_flag = draw(st.sampled_from([0, 0, 0, SysFlag.MULTI_TAGS, SysFlag.COMPRESSED]))
    if sys_flag & SysFlag.COMPRESSED:
        body = zlib.compress(body)
    return encode_record(
        topic=draw(topics),
        queue_id=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        body=body,
        flag=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        properties=draw(properties),
        sys_flag=sys_flag,
        born_timestamp=draw(st.integers(-(1 << 63), (1 << 63) - 1)),
        born_host=draw(hosts),
        store_timestamp=draw(st.integers(0, 1 << 45)),
        store_host=draw(hosts),
        reconsume_times=draw(st.integers(0, 16)),
        queue_offset=draw(st.integers(0, 1 << 40)),
        physical_offset=draw(st.integers(0, 1 << 40)),
        prepared_transaction_offset=draw(st.integers(-1, 1 << 20)),
    )


def _outcome(buf: bytes | bytearray | memoryview, use_c: bool) -> tuple[str, object]:
    saved = message._use_c_decode
    message._use_c_decode = use_c
    try:
        messages = decode_records(buf)
    except MessageFormatError as exc:
        return "error", str(exc)
    finally:
        message._use_c_decode = saved
    assert all(type(m) is MessageExt for m in messages)
    return "ok", [tuple(m) for m in messages]


def _same(buf: bytes) -> None:
    expected = _outcome(buf, use_c=False)
    for view in (buf, bytearray(buf), memoryview(buf)):
        assert _outcome(view, use_c=True) == expected, type(view)


@given(st.lists(records(), max_size=6))
def test_valid_records_decode_as_the_reference_decodes_them(parts: list[bytes]) -> None:
    _same(b"".join(parts))


@given(
    st.lists(records(), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4),
    st.integers(0, 1 << 16),
)
def test_damaged_records_decode_or_fail_as_the_reference_does(
    parts: list[bytes], flips: list[tuple[int, int]], cut: int
) -> None:
    buf = bytearray(b"".join(parts))
    for at, value in flips:
        buf[at % len(buf)] = value
    _same(bytes(buf[: len(buf) - cut % (len(buf) + 1)]))


def test_the_c_path_takes_the_common_record() -> None:
    record = encode_record(
        topic="T", queue_id=1, body=b"x" * 1024, properties="UNIQ_KEY\x01abc\x02TAGS\x01t\x02",
        born_timestamp=1, born_host=("127.0.0.1", 1), store_timestamp=2,
        store_host=("127.0.0.1", 2),
    )  # fmt: skip
    decoded, stop = decode_plain(record * 3, 0, MessageExt)
    assert stop == 3 * len(record)
    assert [m.properties for m in decoded] == [{"UNIQ_KEY": "abc", "TAGS": "t"}] * 3
    assert decoded[0].born_host == "127.0.0.1:1"


def test_a_record_off_the_common_path_stops_the_c_scan_where_it_starts() -> None:
    plain = encode_record(topic="T", queue_id=1, body=b"b", born_timestamp=1,
                          born_host=("1.2.3.4", 5), store_timestamp=2,
                          store_host=("1.2.3.4", 6))  # fmt: skip
    compressed = encode_record(topic="T", queue_id=1, body=zlib.compress(b"b"),
                               sys_flag=SysFlag.COMPRESSED, born_timestamp=1,
                               born_host=("1.2.3.4", 5), store_timestamp=2,
                               store_host=("1.2.3.4", 6))  # fmt: skip
    decoded, stop = decode_plain(plain + compressed + plain, 0, MessageExt)
    assert (len(decoded), stop) == (1, len(plain))
    assert [m.body for m in decode_records(plain + compressed + plain)] == [b"b"] * 3
