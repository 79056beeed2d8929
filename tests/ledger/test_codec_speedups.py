"""The C PUSH entry codec (``_speedups.encode_entries`` / ``decode_entries``) against the Python
references in ``ledger/codec.py``.

Encoding must give the same bytes, and hand everything it does not take (not an ``Entry``, a
subclass, a buffer body, an int subclass, a value outside its field) back to the reference, so
that the reference raises its own error or takes the odd input its own way. Decoding must give
the same entries, field for field and type for type, and refuse the same buffers: whatever the
bytes (valid, mutated, truncated, extended, garbage, any position and count), either both return
equal lists or both raise ``ProtocolError`` (the messages may differ), and the C code never reads
outside the buffer. tests/ledger/test_codec.py runs the whole codec with the C code on and off.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from typing import TYPE_CHECKING, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.errors import ProtocolError
from ledgermq.ledger import codec
from ledgermq.store import MemoryLedgerStore
from ledgermq.store.entry_format import HEADER_SIZE, Entry, EntryType

if TYPE_CHECKING:
    from collections.abc import Callable

try:
    from ledgermq.store import _speedups
except ImportError:
    if os.environ.get("LEDGERMQ_REQUIRE_SPEEDUPS") == "1":
        raise
    pytest.skip(
        "the C extension ledgermq.store._speedups is not built (installed without a C "
        "compiler?); the codec runs on the Python references and there is nothing to compare",
        allow_module_level=True,
    )

_untyped_encode = cast("Callable[..., object]", _speedups.encode_entries)
_untyped_decode = cast("Callable[..., object]", _speedups.decode_entries)
"""The C functions, for calls with arguments of the wrong kind."""

i32 = st.integers(-(1 << 31), (1 << 31) - 1)
u32 = st.integers(0, (1 << 32) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
small = st.integers(0, 5) | st.integers(0, 1 << 40) | st.integers(0, (1 << 63) - 1)


@st.composite
def entry_lists(draw: st.DrawFn, valid: bool | None = None) -> list[Entry]:
    """Entries with any field values their header fields hold. ``valid`` ones (drawn half the
    time when not given) are what a leader's store holds: size and body CRC matching the body,
    no negative index, term or position, so that they decode again."""
    entries = []
    for _ in range(draw(st.integers(0, 8))):
        body = draw(st.binary(max_size=300))
        good = draw(st.booleans()) if valid is None else valid
        entries.append(
            Entry(
                index=draw(small if good else i64),
                term=draw(small if good else i64),
                pos=draw(small if good else i64),
                size=HEADER_SIZE + len(body) if good else draw(i32),
                channel=draw(i32 | st.just(0)),
                body=body,
                entry_type=draw(st.sampled_from(EntryType)),
                body_crc=_speedups.crc32c(body) if good else draw(u32),
                chain_crc=draw(u32),
            )
        )
    return entries


def _decode_py(buf: bytes, pos: int, count: int) -> list[Entry] | type[ProtocolError]:
    try:
        return codec._decode_entries_py(buf, pos, count)
    except ProtocolError:
        return ProtocolError


def _decode_c(buf: bytes, pos: int, count: int) -> list[Entry] | type[ProtocolError]:
    decoded = _speedups.decode_entries(buf, pos, count, Entry, codec._ENTRY_TYPE_BY_MAGIC)
    if isinstance(decoded, str):
        assert decoded  # a message to raise, not an empty string
        return ProtocolError
    return decoded


def _assert_same_decoding(buf: bytes, pos: int, count: int) -> list[Entry] | None:
    """Both decoders agree on ``buf``; the entries, or None when both refuse it."""
    expected, actual = _decode_py(buf, pos, count), _decode_c(buf, pos, count)
    assert actual == expected
    if actual is ProtocolError or expected is ProtocolError:
        return None
    assert isinstance(actual, list)
    assert isinstance(expected, list)
    for got, want in zip(actual, expected, strict=True):
        assert type(got) is Entry
        assert [type(v) for v in got] == [type(v) for v in want]
        assert got.entry_type is want.entry_type
    return actual


# ---------------------------------------------------------------------------------- encoding
@settings(max_examples=400)
@given(entry_lists(), st.booleans())
def test_encoding_gives_the_reference_bytes(entries: list[Entry], as_tuple: bool) -> None:
    batch = tuple(entries) if as_tuple else entries
    assert _speedups.encode_entries(batch) == codec._encode_entries_py(batch)
    assert codec.encode_entries(batch) == codec._encode_entries_py(batch)


def test_stored_entries_encode_as_the_store_holds_them() -> None:
    store = MemoryLedgerStore()
    entries = list(store.append_batch(3, [bytes([i]) * (i * 37) for i in range(40)]))
    encoded = _speedups.encode_entries(entries)
    assert encoded == codec._encode_entries_py(entries)
    assert _speedups.encode_entries([]) == b""


def _odd(entry: Entry, how: str) -> object:
    """``entry`` changed into something the C encoder hands back to the reference."""
    changes: dict[str, dict[str, object]] = {
        "bytearray": {"body": bytearray(entry.body)},
        "memoryview": {"body": memoryview(entry.body)},
        "bool_channel": {"channel": True},
        "big_index": {"index": 1 << 63},
        "big_size": {"size": 1 << 31},
        "negative_crc": {"body_crc": -1},
        "big_chain": {"chain_crc": 1 << 32},
        "float_term": {"term": 1.0},
        "str_body": {"body": "text"},
    }
    if how == "subclass":

        class SubEntry(Entry):
            __slots__ = ()

        return SubEntry(*entry)
    if how == "plain_tuple":
        return tuple(entry)
    if how == "not_an_entry":
        return object()
    return entry._replace(**changes[how])  # type: ignore[arg-type]  # odd values on purpose


ODD = (
    "bytearray",
    "memoryview",
    "bool_channel",
    "big_index",
    "big_size",
    "negative_crc",
    "big_chain",
    "float_term",
    "str_body",
    "subclass",
    "plain_tuple",
    "not_an_entry",
)


def _encode_outcome(encode: Callable[[list[object]], bytes], batch: list[object]) -> object:
    try:
        return encode(batch)
    except Exception as exc:  # noqa: BLE001 - the outcome, whatever it is, is compared
        return type(exc), str(exc)


@pytest.mark.parametrize("how", ODD)
def test_odd_entries_go_to_the_reference(how: str) -> None:
    entries: list[object] = list(MemoryLedgerStore().append_batch(1, [b"a", b"bc", b"def"]))
    entries[1] = _odd(cast("Entry", entries[1]), how)
    assert _untyped_encode(entries) is None
    reference = cast("Callable[[list[object]], bytes]", codec._encode_entries_py)
    public = cast("Callable[[list[object]], bytes]", codec.encode_entries)
    outcome = _encode_outcome(public, entries)
    assert outcome == _encode_outcome(reference, entries)
    if how == "not_an_entry":
        assert outcome == (TypeError, "only stored entries can be pushed, got object")


def test_a_plain_int_entry_type_encodes_as_its_member() -> None:
    entries = list(MemoryLedgerStore().append_batch(1, [b"a", b"bc"]))
    plain = [entries[0]._replace(entry_type=2), entries[1]]  # type: ignore[arg-type]  # an int
    encoded = _speedups.encode_entries(plain)
    assert encoded is not None
    assert encoded == codec._encode_entries_py(plain)
    assert encoded[:4] == b"\0\0\0\2"


def test_the_encoder_takes_lists_and_tuples_only() -> None:
    entries = list(MemoryLedgerStore().append_batch(1, [b"a", b"bc"]))
    assert _untyped_encode(iter(entries)) is None  # a generator must reach the reference whole
    assert codec.encode_entries(iter(entries)) == codec._encode_entries_py(entries)  # type: ignore[arg-type]
    assert _untyped_encode(17) is None
    with pytest.raises(TypeError):
        codec.encode_entries(17)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- decoding
@settings(max_examples=400)
@given(entry_lists(), st.binary(max_size=20))
def test_decoding_gives_the_reference_entries(entries: list[Entry], prefix: bytes) -> None:
    buf = prefix + codec._encode_entries_py(entries)
    decoded = _assert_same_decoding(buf, len(prefix), len(entries))
    if all(e.body_crc == _speedups.crc32c(e.body) and e.size == HEADER_SIZE + len(e.body)
           and min(e.index, e.term, e.pos) >= 0 for e in entries):  # fmt: skip
        assert decoded == entries


@settings(max_examples=1000)
@given(entry_lists(valid=True), st.data())
def test_mutated_buffers_are_refused_alike(entries: list[Entry], data: st.DataObject) -> None:
    buf = bytearray(codec._encode_entries_py(entries))
    for _ in range(data.draw(st.integers(0, 4))):
        if buf:
            at = data.draw(st.integers(0, len(buf) - 1))
            buf[at] = data.draw(st.integers(0, 255) | st.sampled_from([0x7F, 0x80, 0xFF]))
    cut = data.draw(st.integers(0, 60) | st.integers(0, len(buf)))
    buf = buf[: max(0, len(buf) - cut)] if data.draw(st.booleans()) else buf
    buf += data.draw(st.binary(max_size=60)) if data.draw(st.booleans()) else b""
    count = len(entries) + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
    _assert_same_decoding(bytes(buf), 0, max(0, count))


@settings(max_examples=1000)
@given(
    st.binary(max_size=600),
    st.integers(0, 700) | st.just(0),
    st.integers(0, 20) | st.integers(0, (1 << 32) - 1),
)
def test_garbage_is_refused_alike(buf: bytes, pos: int, count: int) -> None:
    _assert_same_decoding(buf, pos, count)


def test_every_truncation_of_a_push_is_refused() -> None:
    entries = list(MemoryLedgerStore().append_batch(2, [b"x" * n for n in (0, 1, 47, 48, 300)]))
    buf = codec._encode_entries_py(entries)
    for end in range(len(buf)):
        assert _assert_same_decoding(buf[:end], 0, len(entries)) is None
    for extra in (b"\0", bytes(48), buf[:48]):
        assert _assert_same_decoding(buf + extra, 0, len(entries)) is None
    assert _assert_same_decoding(buf, 0, len(entries)) == entries


def test_headers_with_extreme_values_do_not_read_past_the_buffer() -> None:
    good = Entry(0, 0, 0, HEADER_SIZE + 4, 0, b"body", EntryType.NORMAL, 0, 0)
    good = good._replace(body_crc=_speedups.crc32c(good.body))
    for magic, size, body_len in [
        (1, 0x7FFFFFFF, 0x7FFFFFFF - HEADER_SIZE),
        (1, -0x80000000 + HEADER_SIZE, -0x80000000),
        (1, -0x80000000, 0x7FFFFFFF),
        (1, HEADER_SIZE - 1, -1),
        (1, HEADER_SIZE + 5, 5),
        (-1, HEADER_SIZE + 4, 4),
        (0, HEADER_SIZE + 4, 4),
        (4, HEADER_SIZE + 4, 4),
        (0x7FFFFFFF, HEADER_SIZE + 4, 4),
    ]:
        header = bytearray(codec._encode_entries_py([good]))
        header[0:8] = magic.to_bytes(4, "big", signed=True) + size.to_bytes(4, "big", signed=True)
        header[44:48] = body_len.to_bytes(4, "big", signed=True)
        assert _assert_same_decoding(bytes(header), 0, 1) is None
    for field in (8, 16, 24):  # a negative index, term or position
        header = bytearray(codec._encode_entries_py([good]))
        header[field] = 0x80
        assert _assert_same_decoding(bytes(header), 0, 1) is None


def test_an_absurd_count_is_refused_before_any_work() -> None:
    decoded = _speedups.decode_entries(b"\0" * 100, 4, 3, Entry, codec._ENTRY_TYPE_BY_MAGIC)
    assert decoded == "3 entries announced but only 96 bytes follow"
    decoded = _speedups.decode_entries(b"", 5, 0, Entry, codec._ENTRY_TYPE_BY_MAGIC)
    assert isinstance(decoded, str)
    assert "announced" in decoded


def test_decoded_entries_own_their_bodies_and_leave_the_collector_alone() -> None:
    entries = list(MemoryLedgerStore().append_batch(2, [b"abc", b"", b"x" * 1000]))
    buf = bytearray(codec._encode_entries_py(entries))
    decoded = _speedups.decode_entries(buf, 0, 3, Entry, codec._ENTRY_TYPE_BY_MAGIC)
    assert decoded == entries
    assert isinstance(decoded, list)
    buf[-1] ^= 0xFF  # the bodies are copies, not views of the buffer
    assert decoded[2].body == b"x" * 1000
    assert all(type(e.body) is bytes for e in decoded)
    assert not any(gc.is_tracked(e) for e in decoded)  # as the store's planners leave them


def test_buffers_of_any_kind_decode() -> None:
    entries = list(MemoryLedgerStore().append_batch(2, [b"abc", b"de"]))
    buf = codec._encode_entries_py(entries)
    types = codec._ENTRY_TYPE_BY_MAGIC
    for view in (bytearray(buf), memoryview(buf), memoryview(b"??" + buf)[2:]):
        assert _speedups.decode_entries(view, 0, 2, Entry, types) == entries


def test_no_leaks_on_success_or_failure() -> None:
    entries = list(MemoryLedgerStore().append_batch(2, [b"y" * 100] * 20))
    buf = codec._encode_entries_py(entries)
    bad = buf[:-1] + bytes([buf[-1] ^ 1])  # the last body's CRC fails: 19 entries were built
    types = codec._ENTRY_TYPE_BY_MAGIC
    before = [sys.getrefcount(e) for e in entries]

    def rounds() -> None:
        for _ in range(300):
            assert _speedups.encode_entries(entries) == buf
            assert isinstance(_speedups.decode_entries(buf, 0, 20, Entry, types), list)
            assert isinstance(_speedups.decode_entries(bad, 0, 20, Entry, types), str)
            assert _untyped_encode([*entries, 3]) is None

    rounds()  # warm up caches and free lists
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        rounds()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 10_000  # 2,400 calls building 11,700 entries: a leak would show
    assert [sys.getrefcount(e) for e in entries] == before


def test_bad_arguments() -> None:
    types = codec._ENTRY_TYPE_BY_MAGIC
    with pytest.raises(TypeError, match="5 arguments"):
        _untyped_decode(b"", 0, 0, Entry)
    with pytest.raises(TypeError, match="tuple subclass"):
        _untyped_decode(b"", 0, 0, int, types)
    with pytest.raises(TypeError, match="tuple"):
        _untyped_decode(b"", 0, 0, Entry, list(types))
    with pytest.raises(OverflowError):
        _untyped_decode(b"", -1, 0, Entry, types)
    with pytest.raises(OverflowError):
        _untyped_decode(b"", 0, -1, Entry, types)
    with pytest.raises(TypeError):
        _untyped_decode("text", 0, 0, Entry, types)


# ---------------------------------------------------------------------------------- wiring
def test_the_codec_raises_the_c_message_as_a_protocol_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(codec, "_use_speedups", True)
    entries = list(MemoryLedgerStore().append_batch(2, [b"abc"]))
    buf = codec.encode_entries(entries)
    assert codec._decode_entries(buf, 0, 1) == entries
    with pytest.raises(ProtocolError, match="bytes after the last entry"):
        codec._decode_entries(buf + b"!", 0, 1)


@pytest.mark.parametrize(("pure", "expected"), [("1", "False"), ("0", "True")])
def test_the_environment_picks_the_codec(pure: str, expected: str) -> None:
    code = "from ledgermq.ledger import codec; print(codec._use_speedups)"
    env = {**os.environ, "LEDGERMQ_PURE_PYTHON": pure}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
