"""The broker's fast paths against the reference codecs: ``encode_records`` against
``encode_record``, ``scan_dispatch_records`` against ``read_dispatch_info``."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import MessageFormatError
from ledgermq.wire.message import (
    MESSAGE_MAGIC_V2,
    SysFlag,
    encode_record,
    encode_records,
    read_dispatch_info,
    scan_dispatch_records,
)

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


def _same_outcome(buf: bytes) -> None:
    if not buf:
        return  # test_scan_refuses_an_empty_buffer
    try:
        expected = _reference(buf)
    except MessageFormatError:
        with pytest.raises(MessageFormatError):
            _scan(buf)
        return
    assert _scan(buf) == expected
    assert _scan(memoryview(buf)) == expected  # type: ignore[arg-type]


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
