"""The broker's fast paths against the reference codecs: ``encode_records`` against
``encode_record``; ``scan_dispatch_records``, its C version (``_dispatch_scan.c``) and its Python
version (``_scan_dispatch_records_py``) against ``read_dispatch_info``.

The scans must agree with the reference on every input: the same records (as RecordIndexInfo),
or the same ``MessageFormatError`` with the same message. Valid input covers batches, many and
non-ASCII topics, tags and keys (Unicode whitespace in KEYS, characters past the BMP in TAGS)
and the layouts the C code leaves to Python (V2 magic, IPv6 hosts); invalid input is valid
records flipped, cut, overwritten or grown, and random bytes.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import MessageFormatError
from ledgermq.wire import message
from ledgermq.wire.message import (
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    RecordIndexInfo,
    SysFlag,
    _scan_dispatch_records_py,
    _slow_record,
    encode_record,
    encode_records,
    read_dispatch_info,
    scan_dispatch_records,
)

try:
    from ledgermq.wire import _dispatch_scan
except ImportError:  # the extension is optional; CI requires it (tests/test_architecture.py)
    _dispatch_scan = None  # type: ignore[assignment]

ScanFunction = Callable[[bytes | bytearray | memoryview], list[RecordIndexInfo] | None]

# Properties strings built from pieces that stress the parser: repeated names, names that are
# suffixes of others, empty values, values holding \x01, a missing final \x02.
pieces = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "XTAGS", "TAGSX", "\x01", "\x02", "a", "k1 k2", " ", "é"]
)
property_strings = st.lists(pieces, max_size=14).map("".join)
items = st.lists(
    st.tuples(st.binary(max_size=40), st.integers(-(1 << 31), (1 << 31) - 1), property_strings),
    min_size=1,
    max_size=6,
)
SHARED = {
    "born_timestamp": 11,
    "born_host": ("10.1.2.3", 4000),
    "store_timestamp": 22,
    "store_host": ("10.9.8.7", 10911),
}


def _reference(buf: bytes) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    pos = 0
    while pos < len(buf):
        info = read_dispatch_info(buf, pos)
        keys = list(info.keys) + ([info.uniq_key] if info.uniq_key else [])
        out.append((pos, info.total_size, info.topic, info.queue_id, info.queue_offset,
                    info.store_timestamp, info.tags_code, keys))  # fmt: skip
        pos += info.total_size
    return out


def _scan(buf: bytes) -> list[tuple[object, ...]]:
    return [tuple(info) for info in scan_dispatch_records(buf)]


def _c_scan(buf: bytes | bytearray | memoryview) -> list[RecordIndexInfo] | None:
    assert _dispatch_scan is not None
    return _dispatch_scan.scan_dispatch_records(buf, RecordIndexInfo, _slow_record)


def _scans() -> list[ScanFunction]:
    """Every implementation: the public function, the Python reference, and the C one if built."""
    scans: list[ScanFunction] = [scan_dispatch_records, _scan_dispatch_records_py]
    return [*scans, _c_scan] if message.HAVE_DISPATCH_SCAN else scans


def _outcome(
    scan: ScanFunction,
    buf: bytes | bytearray | memoryview,
) -> tuple[str, object]:
    try:
        records = scan(buf)
    except MessageFormatError as exc:
        return "error", str(exc)
    assert records is not None
    assert all(type(record) is RecordIndexInfo for record in records)
    return "ok", [tuple(record) for record in records]


def _same_outcome(buf: bytes) -> None:
    """Every scan of ``buf`` (as bytes, bytearray and memoryview) gives the records, or the
    error and message, of ``read_dispatch_info`` record by record."""
    if not buf:
        return  # test_scan_refuses_an_empty_buffer
    try:
        expected: tuple[str, object] = "ok", _reference(buf)
    except MessageFormatError as exc:
        expected = "error", str(exc)
    for scan in _scans():
        for view in (buf, bytearray(buf), memoryview(buf)):
            assert _outcome(scan, view) == expected, (scan, type(view))


@given(items, st.integers(0, 1 << 40), st.integers(0, 0xFF))
def test_encode_records_is_encode_record_per_message(
    batch: list[tuple[bytes, int, str]], first: int, sys_flag: int
) -> None:
    blob, starts = encode_records(
        topic="Topic-1", queue_id=3, items=batch, first_queue_offset=first, sys_flag=sys_flag,
        reconsume_times=2, **SHARED,  # type: ignore[arg-type]
    )  # fmt: skip
    expected = [
        encode_record(topic="Topic-1", queue_id=3, body=body, flag=flag, properties=props,
                      sys_flag=sys_flag, reconsume_times=2, queue_offset=first + i,
                      **SHARED)  # type: ignore[arg-type]
        for i, (body, flag, props) in enumerate(batch)
    ]  # fmt: skip
    assert blob == b"".join(expected)
    assert starts == [sum(len(r) for r in expected[:i]) for i in range(len(expected))]


@given(items)
def test_scan_matches_read_dispatch_info(batch: list[tuple[bytes, int, str]]) -> None:
    blob, _ = encode_records(
        topic="T",
        queue_id=1,
        items=batch,
        first_queue_offset=5,
        **SHARED,  # type: ignore[arg-type]
    )
    _same_outcome(blob)


def _hand_v2_ipv6() -> bytes:
    """A V2 record with IPv6 hosts and a compressed body: the fallback path."""
    record = bytearray(
        encode_record(
            topic="T", queue_id=1, body=zlib.compress(b"z" * 50), sys_flag=SysFlag.COMPRESSED,
            properties="TAGS\x01t\x02KEYS\x01a b\x02", queue_offset=9, **SHARED,  # type: ignore[arg-type]
        )
    )  # fmt: skip
    # Same fields with the V2 magic (2-byte topic length) and 16-byte hosts.
    head, rest = record[:48], record[48:]
    born, born_port = bytes(12) + rest[:4], rest[4:8]
    store_ts = rest[8:16]
    store, store_port = bytes(12) + rest[16:20], rest[20:24]
    tail = rest[24:]
    body_len = int.from_bytes(tail[12:16], "big")
    body = tail[16 : 16 + body_len]
    topic_len = tail[16 + body_len]
    after = tail[16 + body_len + 1 :]
    new = bytearray(head + born + born_port + store_ts + store + store_port + tail[: 16 + body_len])
    new += topic_len.to_bytes(2, "big") + after
    new[0:4] = len(new).to_bytes(4, "big")
    new[4:8] = (MESSAGE_MAGIC_V2 & 0xFFFFFFFF).to_bytes(4, "big")
    new[36:40] = (SysFlag.COMPRESSED | SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6).to_bytes(
        4, "big"
    )
    assert body
    return bytes(new)


def test_scan_falls_back_for_other_layouts() -> None:
    plain = encode_record(topic="T", queue_id=1, body=b"x", properties="UNIQ_KEY\x01u", **SHARED)  # type: ignore[arg-type]
    other = _hand_v2_ipv6()
    buf = plain + other + plain
    scanned = _scan(buf)
    assert scanned == _reference(buf)
    assert scanned[1][4] == 9
    assert scanned[1][7] == ["a", "b"]
    assert scanned[0][7] == ["u"]


@given(st.integers(0, 400), st.binary(max_size=12))
def test_scan_fails_as_the_reference_does(cut: int, insert: bytes) -> None:
    blob, _ = encode_records(
        topic="T", queue_id=1, first_queue_offset=0, **SHARED,  # type: ignore[arg-type]
        items=[(b"body", 0, "TAGS\x01a\x02KEYS\x01k\x02"), (b"b2" * 20, 1, "UNIQ_KEY\x01U")],
    )  # fmt: skip
    buf = blob + _hand_v2_ipv6()
    cut = min(cut, len(buf))
    _same_outcome(buf[:cut] + insert + buf[cut:])
    _same_outcome(buf[:cut])


def test_scan_refuses_an_empty_buffer() -> None:
    with pytest.raises(MessageFormatError, match="outside the buffer"):
        scan_dispatch_records(b"")


# ---------------------------------------------------------------- C scan against the reference

topics = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(
    lambda topic: len(topic.encode()) <= 127
)
# Names, separators, Python whitespace beyond the space (str.split() splits KEYS on it), and
# characters of 2, 3 and 4 UTF-8 bytes (a tag past the BMP hashes as two UTF-16 units).
rich_pieces = st.sampled_from(
    ["TAGS\x01", "KEYS\x01", "UNIQ_KEY\x01", "TAGS", "KEYS", "\x01", "\x02", "a", "k1 k2", " ",
     "\t", "\x1c", "\x85", "\xa0", "\u2003", "\u3000", "é", "标签", "😀", "𝄞x"]
)  # fmt: skip
rich_properties = st.lists(rich_pieces, max_size=16).map("".join)
# V2 magic, IPv6 born host, IPv6 store host, compressed flag: any True takes the Python path
# except the last, which the C path reads too (the body is not touched).
layouts = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans())
mutations = st.lists(
    st.tuples(
        st.sampled_from(["flip", "set", "cut", "insert", "delete"]),
        st.integers(0, 1 << 16),
        st.binary(min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


def _widen(record: bytes, *, v2: bool, born6: bool, store6: bool) -> bytes:
    """The V1 IPv4 ``record`` rewritten with the V2 magic and/or 16-byte host addresses."""
    body_length = int.from_bytes(record[84:88], "big")
    topic_length = record[88 + body_length]
    out = bytearray(record[:48])
    out += bytes(12) + record[48:52] if born6 else record[48:52]
    out += record[52:64]  # born port, store timestamp
    out += bytes(12) + record[64:68] if store6 else record[64:68]
    out += record[68 : 88 + body_length]  # store port .. body
    out += topic_length.to_bytes(2 if v2 else 1, "big") + record[89 + body_length :]
    out[0:4] = len(out).to_bytes(4, "big")
    if v2:
        out[4:8] = (MESSAGE_MAGIC_V2 & 0xFFFFFFFF).to_bytes(4, "big")
    sys_flag = int.from_bytes(out[36:40], "big")
    sys_flag |= (SysFlag.BORNHOST_V6 if born6 else 0) | (SysFlag.STOREHOST_V6 if store6 else 0)
    out[36:40] = sys_flag.to_bytes(4, "big")
    return bytes(out)


def _record(
    topic: str,
    queue_id: int,
    body: bytes,
    props: str,
    layout: tuple[bool, bool, bool, bool],
    queue_offset: int,
) -> bytes:
    v2, born6, store6, compressed = layout
    record = encode_record(
        topic=topic, queue_id=queue_id, body=body, properties=props, queue_offset=queue_offset,
        sys_flag=SysFlag.COMPRESSED if compressed else 0, **SHARED,  # type: ignore[arg-type]
    )  # fmt: skip
    return _widen(record, v2=v2, born6=born6, store6=store6)


records = st.builds(
    _record,
    topics,
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.binary(max_size=30),
    rich_properties,
    st.one_of(st.just((False, False, False, False)), layouts),
    st.integers(0, 1 << 62),
)
buffers = st.lists(records, min_size=1, max_size=6).map(b"".join)


def _mutate(buf: bytes, ops: list[tuple[str, int, bytes]]) -> bytes:
    data = bytearray(buf)
    for op, at, blob in ops:
        where = at % (len(data) + 1)
        if op == "flip" and data:
            data[where % len(data)] ^= blob[0] or 1
        elif op == "set":
            data[where : where + len(blob)] = blob
        elif op == "cut":
            del data[where:]
        elif op == "insert":
            data[where:where] = blob
        else:
            del data[where : where + len(blob)]
    return bytes(data)


@given(buffers)
def test_scans_match_the_reference_on_valid_records(buf: bytes) -> None:
    _same_outcome(buf)


@given(buffers, mutations)
def test_scans_match_the_reference_on_damaged_records(
    buf: bytes, ops: list[tuple[str, int, bytes]]
) -> None:
    _same_outcome(_mutate(buf, ops))


raw_pieces = st.sampled_from(
    [b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY\x01", b"\x02", b"a b", b"\xc3\xa9", b"\xf0\x9f\x98\x80",
     b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
     b"\xc3", b"\xe6\xa0", b"\xf0\x9f\x98", b"\xff", b"\x80", b"\xf5\x80\x80\x80"]
)  # fmt: skip


@given(
    st.lists(raw_pieces, min_size=1, max_size=4).map(b"".join),
    st.lists(raw_pieces, max_size=10).map(b"".join),
)
def test_scans_match_the_reference_on_raw_topic_and_properties(topic: bytes, props: bytes) -> None:
    """Topic and properties bytes that may not be UTF-8 (overlong forms, surrogates, truncated
    sequences, bytes past U+10FFFF): only Python's strict decoder says which are."""
    topic = topic[:127]
    record = bytearray(
        encode_record(
            topic="t" * len(topic), queue_id=1, body=b"body", properties="p" * len(props),
            **SHARED,  # type: ignore[arg-type]
        )
    )  # fmt: skip
    topic_at = 88 + 4 + 1
    record[topic_at : topic_at + len(topic)] = topic
    record[len(record) - len(props) :] = props
    good = encode_record(topic="T", queue_id=2, body=b"", properties="KEYS\x01k", **SHARED)  # type: ignore[arg-type]
    _same_outcome(bytes(record))
    _same_outcome(good + bytes(record) + good)


@given(st.binary(max_size=300), st.integers(0, 400))
def test_scans_match_the_reference_on_random_bytes(noise: bytes, total: int) -> None:
    _same_outcome(noise)
    # The same after a V1 header that claims the buffer: it gets past the first checks.
    head = total.to_bytes(4, "big") + (MESSAGE_MAGIC_V1 & 0xFFFFFFFF).to_bytes(4, "big")
    _same_outcome(head + noise)


values = st.text(st.characters(codec="utf-8", exclude_characters="\x02"), max_size=12)


@given(values, values, values, topics)
def test_scans_match_the_reference_on_any_text(tags: str, keys: str, uniq: str, topic: str) -> None:
    """Any characters (all planes, all of Unicode's whitespace) in TAGS, KEYS and UNIQ_KEY: the
    hash over UTF-16 units and the split on whitespace are the reference's."""
    props = f"TAGS\x01{tags}\x02KEYS\x01{keys}\x02UNIQ_KEY\x01{uniq}"
    record = encode_record(topic=topic, queue_id=1, body=b"", properties=props, **SHARED)  # type: ignore[arg-type]
    _same_outcome(record)
    for scan in _scans():
        scanned = scan(record)
        assert scanned is not None
        assert scanned[0].tags_code == (message.tag_hash(tags) if tags else 0)
        assert scanned[0].keys == keys.split() + ([uniq] if uniq else [])


def test_tag_hash_counts_utf16_units() -> None:
    """Java's String.hashCode: a character past the BMP is two UTF-16 code units."""
    record = encode_record(
        topic="T", queue_id=1, body=b"", properties="TAGS\x01é😀标\x02", **SHARED,  # type: ignore[arg-type]
    )  # fmt: skip
    expected = 0
    for unit in "é\ud83d\ude00标":
        expected = (expected * 31 + ord(unit)) & 0xFFFFFFFF
    expected -= 1 << 32 if expected & 0x80000000 else 0
    for scan in _scans():
        scanned = scan(record)
        assert scanned is not None
        assert scanned[0].tags_code == expected


def test_keys_split_on_unicode_whitespace() -> None:
    record = encode_record(
        topic="T", queue_id=1, body=b"",
        properties="KEYS\x01a\x1cb\u3000c\x85d\xa0e f\x02UNIQ_KEY\x01u", **SHARED,  # type: ignore[arg-type]
    )  # fmt: skip
    for scan in _scans():
        scanned = scan(record)
        assert scanned is not None
        assert scanned[0].keys == ["a", "b", "c", "d", "e", "f", "u"]


def test_odd_buffers_go_to_the_reference() -> None:
    """A memoryview that is not plain contiguous bytes, or a released one: the C scan returns
    None and the public function runs the reference, whatever it makes of it."""
    record = encode_record(topic="T", queue_id=1, body=b"abcd", properties="TAGS\x01a", **SHARED)  # type: ignore[arg-type]
    released = memoryview(record)
    released.release()
    odd_views = (
        memoryview(record * 2)[::2],
        memoryview(record * 4).cast("i"),
        memoryview(record).cast("b"),
        memoryview(record).cast("B", (1, len(record))),
        released,
    )
    for odd in odd_views:
        if _dispatch_scan is not None:
            assert _c_scan(odd) is None
        try:
            expected: object = _scan_dispatch_records_py(odd)
        except Exception as exc:  # noqa: BLE001 - whatever the reference raises
            expected = (type(exc), str(exc))
        try:
            got: object = scan_dispatch_records(odd)
        except Exception as exc:  # noqa: BLE001
            got = (type(exc), str(exc))
        assert got == expected


class _Bytes(bytes):
    """A bytes subclass: the C scan leaves it to the reference (it could redefine len())."""


def test_no_leaks_on_success_or_failure() -> None:
    """Records built, fallbacks called, errors raised: the references come back to where they
    were and the memory does not grow."""
    ext = pytest.importorskip("ledgermq.wire._dispatch_scan")
    good = b"".join(
        encode_record(topic=topic, queue_id=1, body=b"b" * 50, properties=props, **SHARED)  # type: ignore[arg-type]
        for topic in ("T", "T", "主题")
        for props in (
            "TAGS\x01t\x02KEYS\x01key-a key-b\x02UNIQ_KEY\x01uniq-0001",
            "",
            "KEYS\x01é-key\u3000k2",
        )
    )
    mixed = good + _widen(
        good[: int.from_bytes(good[:4], "big")], v2=True, born6=True, store6=False
    )
    bad = mixed[:-1]
    before = [sys.getrefcount(x) for x in (good, mixed, bad, RecordIndexInfo, _slow_record)]

    def rounds() -> None:
        for _ in range(300):
            assert len(ext.scan_dispatch_records(good, RecordIndexInfo, _slow_record)) == 9
            assert len(ext.scan_dispatch_records(mixed, RecordIndexInfo, _slow_record)) == 10
            with pytest.raises(MessageFormatError):
                ext.scan_dispatch_records(bad, RecordIndexInfo, _slow_record)
            assert ext.scan_dispatch_records(_Bytes(good), RecordIndexInfo, _slow_record) is None

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
    assert end - start < 10_000  # 1,200 calls building 5,700 records: a leak would show
    assert [sys.getrefcount(x) for x in (good, mixed, bad, RecordIndexInfo, _slow_record)] == before
    assert scan_dispatch_records(_Bytes(good)) == _scan_dispatch_records_py(good)


def test_c_scan_checks_its_arguments() -> None:
    ext = pytest.importorskip("ledgermq.wire._dispatch_scan")
    c_scan = ext.scan_dispatch_records
    record = encode_record(topic="T", queue_id=1, body=b"", properties="", **SHARED)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="3 arguments"):
        c_scan(record, RecordIndexInfo)
    with pytest.raises(TypeError, match="tuple subclass"):
        c_scan(record, list, _slow_record)
    assert c_scan(12, RecordIndexInfo, _slow_record) is None
    v2 = _widen(record, v2=True, born6=False, store6=False)  # the slow path's answer is checked
    with pytest.raises(TypeError, match="not a RecordIndexInfo"):
        c_scan(v2, RecordIndexInfo, lambda buf, pos: (pos,))
    bad = RecordIndexInfo(0, 0, "T", 1, 0, 0, 0, [])
    with pytest.raises(ValueError, match="of 0 bytes"):
        c_scan(v2, RecordIndexInfo, lambda buf, pos: bad)


@pytest.mark.parametrize(
    ("pure", "expected"), [("1", "False"), ("0", str(message.HAVE_DISPATCH_SCAN))]
)
def test_the_environment_picks_the_scan(pure: str, expected: str) -> None:
    code = "from ledgermq.wire import message; print(message._use_c)"
    env = {**os.environ, "LEDGERMQ_PURE_PYTHON": pure}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
    pure_here = os.environ.get("LEDGERMQ_PURE_PYTHON") == "1"
    assert message._use_c == (message.HAVE_DISPATCH_SCAN and not pure_here)
