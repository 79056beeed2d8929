"""Message formats: records, properties, batches, ids, tags; whole, truncated, padded, fuzzed."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import InvalidMessageError, MessageFormatError
from ledgermq.wire import (
    BLANK_MAGIC,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    RECORD_OVERHEAD_BYTES,
    STORE_TIMESTAMP_POSITION,
    BatchItem,
    MessageExt,
    MessageProperty,
    SysFlag,
    UniqueIdGenerator,
    create_offset_message_id,
    decode_batch,
    decode_offset_message_id,
    decode_properties,
    decode_records,
    encode_batch,
    encode_properties,
    encode_record,
    parse_subscription,
    read_dispatch_info,
    stamp_physical_offset,
    stamp_queue_offset,
    stamp_store_timestamp,
    tag_hash,
    tags_match,
    validate_message,
    validate_topic,
)

BORN = ("10.0.0.5", 54321)
STORE = ("127.0.0.1", 10911)


def record(**overrides: Any) -> bytes:
    fields: dict[str, Any] = {
        "topic": "TopicTest",
        "queue_id": 3,
        "body": b"123456789",
        "flag": 7,
        "properties": encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}),
        "born_timestamp": 1_700_000_000_000,
        "born_host": BORN,
        "store_timestamp": 1_700_000_000_123,
        "store_host": STORE,
        "reconsume_times": 2,
        "queue_offset": 42,
        "physical_offset": 4096,
        "prepared_transaction_offset": 9,
    }
    fields.update(overrides)
    return encode_record(**fields)


def hand_built(
    *,
    magic: int = MESSAGE_MAGIC_V1,
    sys_flag: int = 0,
    born_ip: bytes = bytes([10, 0, 0, 5]),
    store_ip: bytes = bytes([127, 0, 0, 1]),
    topic: bytes = b"TopicTest",
    body: bytes = b"123456789",
    properties: bytes = b"TAGS\x01TagA\x02",
) -> bytes:
    """A record assembled field by field from the spec's table, independently of the encoder."""
    topic_length = (
        bytes([len(topic)]) if magic == MESSAGE_MAGIC_V1 else struct.pack(">h", len(topic))
    )
    rest = b"".join(
        [
            struct.pack(">I", zlib.crc32(body)),
            struct.pack(">i", 3),  # queue id
            struct.pack(">i", 7),  # flag
            struct.pack(">q", 42),  # queue offset
            struct.pack(">q", 4096),  # physical offset
            struct.pack(">i", sys_flag),
            struct.pack(">q", 1_700_000_000_000),
            born_ip + struct.pack(">i", 54321),
            struct.pack(">q", 1_700_000_000_123),
            store_ip + struct.pack(">i", 10911),
            struct.pack(">i", 2),  # reconsume times
            struct.pack(">q", 9),  # prepared transaction offset
            struct.pack(">i", len(body)) + body,
            topic_length + topic,
            struct.pack(">h", len(properties)) + properties,
        ]
    )
    return struct.pack(">ii", 8 + len(rest), magic) + rest


# ---------------------------------------------------------------- constants and layout


def test_magic_codes_are_javas_signed_ints() -> None:
    assert MESSAGE_MAGIC_V1 == -626843481
    assert struct.pack(">i", MESSAGE_MAGIC_V1) == bytes.fromhex("DAA320A7")
    assert struct.pack(">i", MESSAGE_MAGIC_V2) == bytes.fromhex("DAA320AB")
    assert struct.pack(">i", BLANK_MAGIC) == bytes.fromhex("CBD43194")
    assert SysFlag.TRANSACTION_ROLLBACK == SysFlag.TRANSACTION_PREPARED | SysFlag.TRANSACTION_COMMIT


def test_known_record_bytes_at_documented_offsets() -> None:
    properties = encode_properties({"TAGS": "TagA"})
    encoded = record(properties=properties)
    assert encoded == hand_built()
    assert len(encoded) == RECORD_OVERHEAD_BYTES + 9 + len("TopicTest") + len(properties)
    assert encoded[0:4] == struct.pack(">i", len(encoded))
    assert encoded[4:8] == bytes.fromhex("DAA320A7")
    # zlib CRC-32 of "123456789" is the standard check value CBF43926 (CRC-32C would be E3069283).
    assert encoded[8:12] == bytes.fromhex("CBF43926")
    assert encoded[QUEUE_OFFSET_POSITION : QUEUE_OFFSET_POSITION + 8] == struct.pack(">q", 42)
    assert encoded[PHYSICAL_OFFSET_POSITION : PHYSICAL_OFFSET_POSITION + 8] == struct.pack(
        ">q", 4096
    )
    assert encoded[STORE_TIMESTAMP_POSITION : STORE_TIMESTAMP_POSITION + 8] == struct.pack(
        ">q", 1_700_000_000_123
    )
    assert encoded[48:56] == bytes([10, 0, 0, 5]) + struct.pack(">i", 54321)


def test_decode_known_record() -> None:
    (message,) = decode_records(record())
    assert message == MessageExt(
        topic="TopicTest",
        queue_id=3,
        flag=7,
        queue_offset=42,
        commit_log_offset=4096,
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        born_host="10.0.0.5:54321",
        store_timestamp=1_700_000_000_123,
        store_host="127.0.0.1:10911",
        reconsume_times=2,
        prepared_transaction_offset=9,
        body=b"123456789",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"},
        body_crc=0xCBF43926,
        store_size=len(record()),
    )
    assert message.tags == "TagA"
    assert message.keys == ["k1", "k2"]
    assert message.msg_id == "ABC"
    assert message.offset_msg_id == "7F00000100002A9F0000000000001000"


def test_msg_id_falls_back_to_the_offset_id() -> None:
    (message,) = decode_records(record(properties=""))
    assert message.msg_id == message.offset_msg_id
    assert (message.tags, message.keys, message.properties) == (None, [], {})


def test_stamps_write_in_place() -> None:
    buf = bytearray(record() * 2)
    second = len(buf) // 2
    stamp_queue_offset(buf, 100, second)
    stamp_physical_offset(buf, 200, second)
    stamp_store_timestamp(buf, 300, second)
    first, stamped = decode_records(buf)
    assert (first.queue_offset, first.commit_log_offset, first.store_timestamp) == (
        42,
        4096,
        1_700_000_000_123,
    )
    assert (stamped.queue_offset, stamped.commit_log_offset, stamped.store_timestamp) == (
        100,
        200,
        300,
    )


def test_v2_magic_and_ipv6_hosts_decode() -> None:
    ipv6 = ipaddress.IPv6Address("2001:db8::1").packed
    loopback6 = ipaddress.IPv6Address("::1").packed
    raw = hand_built(
        magic=MESSAGE_MAGIC_V2,
        sys_flag=SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6,
        born_ip=ipv6,
        store_ip=loopback6,
        topic=b"T" * 200,
    )
    (message,) = decode_records(raw + record())[:1]
    assert message.topic == "T" * 200
    assert message.born_host == "[2001:db8::1]:54321"
    assert message.store_host == "[::1]:10911"
    assert (message.body, message.store_timestamp, message.queue_offset) == (
        b"123456789",
        1_700_000_000_123,
        42,
    )
    assert len(message.offset_msg_id) == 56
    assert decode_offset_message_id(message.offset_msg_id) == ("::1", 10911, 4096)
    info = read_dispatch_info(memoryview(raw))
    assert (info.topic, info.store_timestamp, info.total_size) == (
        "T" * 200,
        1_700_000_000_123,
        len(raw),
    )
    # Only the born host is IPv6: the store timestamp moves by 12 bytes.
    mixed = bytearray(hand_built(sys_flag=SysFlag.BORNHOST_V6, born_ip=ipv6))
    stamp_store_timestamp(mixed, 555)
    (message,) = decode_records(mixed)
    assert (message.store_timestamp, message.store_host) == (555, "127.0.0.1:10911")


def test_compressed_body_is_inflated() -> None:
    plain = b"hello world " * 500
    packed = zlib.compress(plain)
    (message,) = decode_records(record(body=packed, sys_flag=SysFlag.COMPRESSED), check_crc=True)
    assert message.body == plain
    assert message.body_crc == zlib.crc32(packed)
    zlib_type = SysFlag.COMPRESSED | 3 << 8
    assert decode_records(record(body=packed, sys_flag=zlib_type))[0].body == plain


@pytest.mark.parametrize(
    ("body", "sys_flag", "max_inflated", "reason"),
    [
        (b"not zlib at all", SysFlag.COMPRESSED, 1 << 20, "does not inflate"),
        (zlib.compress(b"x" * 1000)[:-6], SysFlag.COMPRESSED, 1 << 20, "truncated zlib"),
        (zlib.compress(b"x" * 1000), SysFlag.COMPRESSED, 999, "inflates past 999"),
        (zlib.compress(b"x"), SysFlag.COMPRESSED | 1 << 8, 1 << 20, "LZ4"),
    ],
)
def test_bad_compressed_bodies(body: bytes, sys_flag: int, max_inflated: int, reason: str) -> None:
    with pytest.raises(MessageFormatError, match=reason):
        decode_records(record(body=body, sys_flag=sys_flag), max_inflated_bytes=max_inflated)


def test_crc_is_checked_only_on_request() -> None:
    buf = bytearray(record())
    buf[88] ^= 0xFF  # first body byte
    assert decode_records(buf)[0].body[0] == ord("1") ^ 0xFF
    with pytest.raises(MessageFormatError, match="CRC"):
        decode_records(buf, check_crc=True)


def test_encode_refuses_what_the_layout_cannot_hold() -> None:
    with pytest.raises(InvalidMessageError, match="1 to 127"):
        record(topic="")
    with pytest.raises(InvalidMessageError, match="1 to 127"):
        record(topic="t" * 128)
    with pytest.raises(InvalidMessageError, match="32767"):
        record(properties="x" * (MAX_PROPERTIES_LENGTH + 1))
    with pytest.raises(InvalidMessageError, match="IPv4 hosts only"):
        record(store_host=("::1", 10911))
    with pytest.raises(InvalidMessageError, match="not an IP address"):
        record(born_host=("localhost", 1))
    with pytest.raises(InvalidMessageError, match="out of range"):
        record(queue_id=1 << 31)
    with pytest.raises(InvalidMessageError, match="UTF-8"):
        record(properties="a\x01\ud800\x02")
    with pytest.raises(InvalidMessageError, match="UTF-8"):
        record(topic="\udfff")
    (message,) = decode_records(
        record(born_host=("::ffff:10.1.2.3", 5), sys_flag=SysFlag.BORNHOST_V6 | SysFlag.MULTI_TAGS)
    )
    assert (message.born_host, message.sys_flag) == ("10.1.2.3:5", SysFlag.MULTI_TAGS)


# ---------------------------------------------------------------- malformed record buffers


def test_every_truncation_is_refused() -> None:
    one = record()
    two = one + record(topic="Other", body=b"")
    assert len(decode_records(two)) == 2
    assert decode_records(b"") == []
    for cut in range(1, len(two)):
        if cut == len(one):
            assert len(decode_records(two[:cut])) == 1
            continue
        with pytest.raises(MessageFormatError):
            decode_records(two[:cut])


@pytest.mark.parametrize("garbage", [b"\x00", b"\x00" * 91, b"\xff" * 200, b"junk" * 40])
def test_garbage_after_records_is_refused(garbage: bytes) -> None:
    with pytest.raises(MessageFormatError, match=f"byte {len(record())}"):
        decode_records(record() + garbage)


def test_error_messages_say_what_and_where() -> None:
    blank = struct.pack(">ii", 200, BLANK_MAGIC) + bytes(192)
    with pytest.raises(MessageFormatError, match="end-of-file filler"):
        decode_records(blank)
    bad_magic = bytearray(record())
    bad_magic[4:8] = b"\x12\x34\x56\x78"
    with pytest.raises(MessageFormatError, match="magic code 0x12345678"):
        decode_records(bad_magic)
    long_body = bytearray(record())
    long_body[84:88] = struct.pack(">i", 10_000)
    with pytest.raises(MessageFormatError, match="body length 10000 at byte 84"):
        decode_records(long_body)
    bad_utf8 = hand_built(topic=b"\xff\xfe")
    with pytest.raises(MessageFormatError, match="not UTF-8"):
        decode_records(bad_utf8)
    with pytest.raises(MessageFormatError, match="not UTF-8"):
        read_dispatch_info(hand_built(properties=b"A\x01\xff\x02"))
    with pytest.raises(MessageFormatError, match="outside the buffer"):
        read_dispatch_info(record(), -1)
    with pytest.raises(MessageFormatError, match="outside the buffer"):
        read_dispatch_info(record(), len(record()))


def _only_format_errors(buf: bytes) -> None:
    try:
        messages = decode_records(buf, check_crc=True)
    except MessageFormatError:
        pass
    else:
        assert sum(m.store_size for m in messages) == len(buf)
    with contextlib.suppress(MessageFormatError):
        read_dispatch_info(buf)
    with contextlib.suppress(MessageFormatError):
        decode_batch(buf)


@given(st.binary(max_size=400))
def test_random_bytes_raise_only_format_errors(buf: bytes) -> None:
    _only_format_errors(buf)


VALID = (
    record()
    + hand_built(magic=MESSAGE_MAGIC_V2, sys_flag=0x30, born_ip=bytes(16), store_ip=bytes(16))
    + record(body=zlib.compress(b"z" * 300), sys_flag=SysFlag.COMPRESSED)
)


@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_records_raise_only_format_errors(edits: list[tuple[int, int]]) -> None:
    buf = bytearray(VALID)
    for pos, value in edits:
        buf[pos] = value
    _only_format_errors(bytes(buf))


@given(st.integers(0, len(VALID)), st.binary(max_size=20))
def test_spliced_records_raise_only_format_errors(cut: int, insert: bytes) -> None:
    _only_format_errors(VALID[:cut] + insert + VALID[cut:])


# ---------------------------------------------------------------- record round trips

topics = st.text("abcXYZ019%|_-", min_size=1, max_size=127)
property_text = st.text(
    st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]), max_size=12
)
property_maps = st.dictionaries(property_text.filter(bool), property_text, max_size=5)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
ipv4 = st.ip_addresses(v=4).map(str)
hosts = st.tuples(ipv4, st.integers(0, 65535))


@dataclasses.dataclass(frozen=True)
class Fields:
    topic: str
    queue_id: int
    body: bytes
    flag: int
    properties: str
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    queue_offset: int
    physical_offset: int
    prepared_transaction_offset: int


record_fields = st.builds(
    Fields,
    topic=topics,
    queue_id=int32,
    body=st.binary(max_size=300),
    flag=int32,
    properties=property_maps.map(encode_properties),
    sys_flag=int32.map(lambda flag: flag & ~0x31),  # IPv4 hosts, no compression
    born_timestamp=int64,
    born_host=hosts,
    store_timestamp=int64,
    store_host=hosts,
    reconsume_times=int32,
    queue_offset=int64,
    physical_offset=int64,
    prepared_transaction_offset=int64,
)


@given(st.lists(record_fields, max_size=4))
def test_record_round_trip(all_fields: list[Fields]) -> None:
    encoded = [encode_record(**dataclasses.asdict(fields)) for fields in all_fields]
    buf = b"".join(encoded)
    messages = decode_records(buf, check_crc=True)
    assert decode_records(memoryview(buf)) == messages
    assert len(messages) == len(all_fields)
    pos = 0
    for f, raw, message in zip(all_fields, encoded, messages, strict=True):
        assert message == MessageExt(
            topic=f.topic,
            queue_id=f.queue_id,
            flag=f.flag,
            queue_offset=f.queue_offset,
            commit_log_offset=f.physical_offset,
            sys_flag=f.sys_flag,
            born_timestamp=f.born_timestamp,
            born_host=f"{f.born_host[0]}:{f.born_host[1]}",
            store_timestamp=f.store_timestamp,
            store_host=f"{f.store_host[0]}:{f.store_host[1]}",
            reconsume_times=f.reconsume_times,
            prepared_transaction_offset=f.prepared_transaction_offset,
            body=f.body,
            properties=decode_properties(f.properties),
            body_crc=zlib.crc32(f.body),
            store_size=len(raw),
        )
        info = read_dispatch_info(buf, pos)
        assert (info.topic, info.queue_offset, info.total_size) == (
            message.topic,
            message.queue_offset,
            len(raw),
        )
        pos += len(raw)


def test_dispatch_info() -> None:
    first = record(properties="")
    buf = first + record()
    info = read_dispatch_info(memoryview(buf), len(first))
    assert info.tags_code == tag_hash("TagA") == 2598919
    assert (info.keys, info.uniq_key) == (["k1", "k2"], "ABC")
    assert (info.queue_id, info.queue_offset, info.commit_log_offset, info.sys_flag) == (
        3,
        42,
        4096,
        0,
    )
    assert info.properties[MessageProperty.TAGS] == "TagA"
    bare = read_dispatch_info(buf)
    assert (bare.tags_code, bare.keys, bare.uniq_key, bare.properties) == (0, [], None, {})


# ---------------------------------------------------------------- properties


@given(property_maps)
def test_properties_round_trip(properties: dict[str, str]) -> None:
    assert decode_properties(encode_properties(properties)) == properties


def test_properties_parsing_is_lenient() -> None:
    assert encode_properties({"a": "1", "b": ""}) == "a\x011\x02b\x01\x02"
    assert decode_properties("a\x011\x02b\x012") == {"a": "1", "b": "2"}  # no final \x02
    assert decode_properties("\x02\x02a\x011\x02\x02novalue\x02\x01orphan\x02") == {"a": "1"}
    assert decode_properties("a\x01x\x01y\x02a\x01z\x02") == {"a": "z"}
    assert decode_properties("") == {}


@pytest.mark.parametrize(
    "properties", [{"a\x01": "1"}, {"a\x02": "1"}, {"a": "1\x02"}, {"a": "\x01"}, {"": "1"}]
)
def test_properties_with_separators_are_refused(properties: dict[str, str]) -> None:
    with pytest.raises(InvalidMessageError):
        encode_properties(properties)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("topic", "reason"),
    [("", "empty"), ("t" * 128, "128 characters"), ("a b", "characters"), ("ok\n", "characters")],
)
def test_bad_topics(topic: str, reason: str) -> None:
    with pytest.raises(InvalidMessageError, match=reason):
        validate_topic(topic)


def test_validate_message() -> None:
    validate_topic("%RETRY%group_1-a|b")
    validate_message("T", b"x", "a\x01b\x02", max_message_bytes=1)
    with pytest.raises(InvalidMessageError, match="empty"):
        validate_message("T", b"")
    with pytest.raises(InvalidMessageError, match="5 bytes exceeds maxMessageSize 4"):
        validate_message("T", b"12345", max_message_bytes=4)
    with pytest.raises(InvalidMessageError, match="32768 bytes"):
        validate_message("T", b"x", "\u00e9" * 16384)
    with pytest.raises(InvalidMessageError, match="characters"):
        validate_message("T!", b"x")
    with pytest.raises(InvalidMessageError, match="UTF-8"):
        validate_message("T", b"x", "\ud800" * 10000)


# ---------------------------------------------------------------- message ids


def test_offset_message_id_known_vector_and_round_trip() -> None:
    msg_id = create_offset_message_id("127.0.0.1", 10911, 48)
    assert msg_id == "7F00000100002A9F0000000000000030"
    assert decode_offset_message_id(msg_id) == ("127.0.0.1", 10911, 48)
    assert decode_offset_message_id(msg_id.lower()) == ("127.0.0.1", 10911, 48)
    ipv6 = create_offset_message_id("fe80::1", 8080, (1 << 63) - 1)
    assert len(ipv6) == 56
    assert decode_offset_message_id(ipv6) == ("fe80::1", 8080, (1 << 63) - 1)


@given(ipv4, st.integers(0, 65535), st.integers(0, (1 << 63) - 1))
def test_offset_message_id_round_trip(ip: str, port: int, offset: int) -> None:
    assert decode_offset_message_id(create_offset_message_id(ip, port, offset)) == (
        ip,
        port,
        offset,
    )


@pytest.mark.parametrize("msg_id", ["", "7F00", "Z" * 32, "7F00000100002A9F00000000000000300"])
def test_bad_offset_message_ids(msg_id: str) -> None:
    with pytest.raises(MessageFormatError):
        decode_offset_message_id(msg_id)


def test_bad_offset_message_id_inputs() -> None:
    with pytest.raises(InvalidMessageError):
        create_offset_message_id("nohost", 1, 0)
    with pytest.raises(InvalidMessageError):
        create_offset_message_id("1.2.3.4", 1, 1 << 63)


def _ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    moment = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def test_unique_ids_are_deterministic_with_an_injected_clock() -> None:
    now = [_ms(2024, 3, 1, 0, 0, 1) + 500]
    ids = UniqueIdGenerator("10.0.0.5", 0x51234, 0x1DEADBEEF, lambda: now[0])
    assert ids.next_id() == "0A0000051234DEADBEEF000005DC0000"
    assert ids.next_id() == "0A0000051234DEADBEEF000005DC0001"
    now[0] -= 2000  # a small step back (NTP) is clamped to the month's start
    assert ids.next_id().endswith("000000000002")
    now[0] = _ms(2024, 3, 31, 23, 59, 59)  # 31 days fit 32 bits unsigned, as in Java
    assert ids.next_id()[20:28] == f"{(30 * 86400 + 86399) * 1000:08X}"
    now[0] = _ms(2024, 4, 1) + 7  # a new month restarts the time field
    assert ids.next_id()[20:] == "000000070004"
    assert len(UniqueIdGenerator("::1", 1, 1, lambda: 0).next_id()) == 56
    with pytest.raises(InvalidMessageError):
        UniqueIdGenerator("host", 1, 1, lambda: 0)


def test_unique_id_counter_wraps_and_ids_differ_per_millisecond() -> None:
    now = [_ms(2025, 1, 15)]
    ids = UniqueIdGenerator("10.0.0.5", 1, 2, lambda: now[0])
    made = {ids.next_id() for _ in range(65536)}
    assert len(made) == 65536
    assert ids.next_id() in made  # the 65537th in the same millisecond repeats: documented
    now[0] += 1
    assert ids.next_id() not in made


# ---------------------------------------------------------------- tags and subscriptions


@pytest.mark.parametrize(
    ("tag", "java_hash_code"),
    [
        ("TagA", 2598919),
        ("", 0),
        ("*", 42),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello world", 1794106052),
        ("polygenelubricants", -(1 << 31)),
        ("\U0001f600", 1772899),  # U+1F600 is the surrogate pair D83D DE00
        ("\u00e9t\u00e9", 233 * 961 + 116 * 31 + 233),
    ],
)
def test_tag_hash_matches_java(tag: str, java_hash_code: int) -> None:
    assert tag_hash(tag) == java_hash_code


@given(st.text(max_size=30))
def test_tag_hash_is_the_utf16_polynomial(tag: str) -> None:
    units = tag.encode("utf-16-be", "surrogatepass")
    h = sum(
        int.from_bytes(units[i : i + 2], "big") * 31 ** ((len(units) - i) // 2 - 1)
        for i in range(0, len(units), 2)
    )
    h &= 0xFFFFFFFF
    assert tag_hash(tag) == (h - (1 << 32) if h >= 1 << 31 else h)


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        ("*", None),
        ("", None),
        ("  * ", None),
        ("TagA", {"TagA"}),
        ("TagA || TagB", {"TagA", "TagB"}),
        (" TagA ||  || TagB||", {"TagA", "TagB"}),
        ("||", set()),
        ("TagA || *", {"TagA", "*"}),
    ],
)
def test_parse_subscription(expression: str, tags: set[str] | None) -> None:
    parsed, codes = parse_subscription(expression)
    if tags is None:
        assert (parsed, codes) == (None, frozenset())
    else:
        assert parsed == frozenset(tags)
        assert codes == frozenset(tag_hash(tag) for tag in tags)


def test_tags_match() -> None:
    subscribed, _ = parse_subscription("TagA || TagB")
    assert tags_match("TagA", subscribed)
    assert not tags_match("TagC", subscribed)
    assert not tags_match(None, subscribed)
    assert tags_match(None, None)
    assert tags_match("anything", None)
    assert not tags_match("TagA", frozenset())


# ---------------------------------------------------------------- batch bodies


def test_known_batch_layout() -> None:
    encoded = encode_batch([(b"hi", 5, "a\x01b\x02")])
    assert encoded == struct.pack(">iiiii", 28, 0, 0, 5, 2) + b"hi" + b"\x00\x04a\x01b\x02"
    assert decode_batch(encoded) == [BatchItem(b"hi", 5, "a\x01b\x02")]
    assert encode_batch([]) == b""
    assert decode_batch(b"") == []


def test_batch_magic_and_crc_are_not_checked() -> None:
    cpp_style = struct.pack(">iiIii", 24, MESSAGE_MAGIC_V1, zlib.crc32(b"hi"), 0, 2) + b"hi\x00\x00"
    assert decode_batch(memoryview(cpp_style)) == [BatchItem(b"hi", 0, "")]


@given(
    st.lists(
        st.tuples(st.binary(max_size=50), int32, property_maps.map(encode_properties)), max_size=5
    )
)
def test_batch_round_trip(messages: list[tuple[bytes, int, str]]) -> None:
    assert decode_batch(encode_batch(messages)) == [BatchItem(*m) for m in messages]


def test_bad_batches() -> None:
    good = encode_batch([(b"body", 1, "k\x01v\x02"), (b"", 2, "")])
    first = len(encode_batch([(b"body", 1, "k\x01v\x02")]))
    assert len(decode_batch(good[:first])) == 1
    for cut in range(1, len(good)):
        if cut == first:
            continue
        with pytest.raises(MessageFormatError):
            decode_batch(good[:cut])
    wrong_size = bytearray(good)
    wrong_size[0:4] = struct.pack(">i", 99)
    with pytest.raises(MessageFormatError, match="says it has 99 bytes"):
        decode_batch(wrong_size)
    with pytest.raises(MessageFormatError, match="not UTF-8"):
        decode_batch(struct.pack(">iiiii", 23, 0, 0, 0, 0) + b"\x00\x01\xff")
    with pytest.raises(InvalidMessageError, match="32767"):
        encode_batch([(b"x", 0, "p" * 40000)])
    with pytest.raises(InvalidMessageError, match="out of range"):
        encode_batch([(b"x", 1 << 40, "")])
    with pytest.raises(InvalidMessageError, match="UTF-8"):
        encode_batch([(b"x", 1, "\ud800" * 10000)])
