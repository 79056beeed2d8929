"""RocketMQ's message formats, encoded and decoded without any I/O.

Three formats live here, all big-endian, shared by the broker and the clients:

- the **CommitLog record** (spec-broker.md section 3.4, protocol-remoting-and-grpc.md section
  2.10). The broker stores it and PULL returns concatenated records unchanged, so the consumer
  decodes exactly what the store holds;
- the **batch body** of a batch send (protocol doc section 2.7, ``MessageDecoder.encodeMessage``);
- the **properties string** ``key\\x01value\\x02...`` carried by both, and the message ids derived
  from records (offset msgId) or made by producers (``UNIQ_KEY``).

Theory of operation:

- *Write narrow, read wide.* We always write the V1 magic (1-byte topic length) and IPv4 hosts
  (4-byte address + int32 port): the C++ 1.2 client's ``MQDecoder`` assumes both whatever the
  flags say. We read what Java brokers may also have written: the V2 magic (2-byte topic length)
  and the IPv6 host flags (16-byte addresses).
- *One struct call per record.* The fixed part of an IPv4 record (88 bytes, up to and including
  the body length) is a single ``struct.Struct``; the encoder and the decoder's common case each
  make one ``pack``/``unpack_from`` call. Everything else is slicing.
- *Malformed input raises ``MessageFormatError`` only*, naming what was wrong and at which byte
  of the buffer. Lengths are checked against the record's own total size before they are used, and
  the fields of a record must end exactly where its total size says: that is what catches a
  garbled buffer early instead of returning nonsense.
- *Each body is copied once* (sliced out of the buffer, or inflated), never re-joined or
  re-sliced. ``read_dispatch_info`` (the ConsumeQueue dispatcher's view) does not touch the body
  at all, so it can read a memoryview of a mapped commit log file.
- Positions in ``MessageFormatError`` messages and ``*_POSITION`` constants are byte offsets; the
  named positions after the born host assume an IPv4 born host, which is what we write.

Not done here, deliberately: topic policy beyond the layout (reserved topics, permissions), delay
levels and the retry/schedule topic rewrites (broker logic), compression on send (client policy),
and LZ4/ZSTD bodies (RocketMQ 5 compression types 1 and 2), which decode as errors.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import itertools
import re
import struct
import zlib
from typing import TYPE_CHECKING, Final, NamedTuple, final

from ledgermq.errors import InvalidMessageError, MessageFormatError
from ledgermq.speedups import PURE_PYTHON
from ledgermq.wire.names import NAME_PATTERN, TOPIC_MAX_LENGTH, check_topic_name

try:
    from ledgermq.wire._dispatch_scan import scan_dispatch_records as _c_scan
except ImportError:  # pragma: no cover - the extension is optional (no C compiler)
    _c_scan = None  # type: ignore[assignment]
try:
    from ledgermq.wire._record_decode import decode_plain as _c_decode_plain
except ImportError:  # pragma: no cover - the extension is optional (no C compiler)
    _c_decode_plain = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "BLANK_MAGIC",
    "BODY_CRC_POSITION",
    "BORN_HOST_POSITION",
    "BORN_TIMESTAMP_POSITION",
    "DEFAULT_MAX_INFLATED_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "FLAG_POSITION",
    "MAGIC_POSITION",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH",
    "MESSAGE_MAGIC_V1",
    "MESSAGE_MAGIC_V2",
    "PHYSICAL_OFFSET_POSITION",
    "QUEUE_ID_POSITION",
    "QUEUE_OFFSET_POSITION",
    "RECORD_OVERHEAD_BYTES",
    "STORE_TIMESTAMP_POSITION",
    "SYS_FLAG_POSITION",
    "TOPIC_PATTERN",
    "TOTAL_SIZE_POSITION",
    "BatchItem",
    "DispatchInfo",
    "MessageExt",
    "MessageProperty",
    "RecordIndexInfo",
    "SysFlag",
    "UniqueIdGenerator",
    "create_offset_message_id",
    "decode_batch",
    "decode_offset_message_id",
    "decode_properties",
    "decode_records",
    "encode_batch",
    "encode_properties",
    "encode_record",
    "encode_records",
    "find_property",
    "parse_subscription",
    "read_dispatch_info",
    "scan_dispatch_records",
    "stamp_physical_offset",
    "stamp_queue_offset",
    "stamp_store_timestamp",
    "tag_hash",
    "tags_match",
    "validate_message",
    "validate_topic",
]

# ---------------------------------------------------------------- constants

MESSAGE_MAGIC_V1: Final = -626843481
"""0xDAA320A7 as Java's signed int: a record whose topic length is one byte."""
MESSAGE_MAGIC_V2: Final = -626843477
"""0xDAA320AB: a record whose topic length is two bytes (Java writes it for topics > 127 bytes)."""
BLANK_MAGIC: Final = -875286124
"""0xCBD43194: the filler at the end of a RocketMQ commitlog file, never a message."""

MAX_TOPIC_LENGTH: Final = TOPIC_MAX_LENGTH
"""Longest topic, in bytes: the C++ 1.2 client reads only 1-byte topic lengths, so we always write
the V1 magic and refuse longer topics rather than write records it would misparse."""
MAX_PROPERTIES_LENGTH: Final = 32767
"""Longest properties string, in UTF-8 bytes: its length is a signed int16 on the wire."""
DEFAULT_MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
"""RocketMQ's ``maxMessageSize`` default (4 MiB), for bodies and for whole batches."""
DEFAULT_MAX_INFLATED_BYTES: Final = 64 * 1024 * 1024
"""Largest body ``decode_records`` inflates: a compressed body is at most 4 MiB on the wire but
could inflate without bound (a zip bomb); a consumer must not be made to allocate that."""
TOPIC_PATTERN: Final = NAME_PATTERN
"""RocketMQ's ``Validators`` topic rule (``^[%|a-zA-Z0-9_-]+$``), used with ``fullmatch``: ``$``
would also accept a trailing newline."""


@final
class SysFlag:
    """``MessageSysFlag`` bits of a record's SYSFLAG field.

    Plain ints rather than an ``IntFlag``: they are tested on every record, and ``IntFlag``
    arithmetic costs a microsecond a time.
    """

    COMPRESSED: Final = 0x1
    MULTI_TAGS: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED: Final = 0x4
    TRANSACTION_COMMIT: Final = 0x8
    TRANSACTION_ROLLBACK: Final = 0xC
    TRANSACTION_MASK: Final = 0xC
    BORNHOST_V6: Final = 0x10
    STOREHOST_V6: Final = 0x20
    NEED_UNWRAP: Final = 0x40
    INNER_BATCH: Final = 0x80
    COMPRESSION_TYPE_MASK: Final = 0x700
    """Bits 8-10 (RocketMQ 5): 0 or 3 zlib, 1 LZ4, 2 ZSTD."""


@final
class MessageProperty:
    """Property keys, as RocketMQ's ``MessageConst`` spells them (the wire values)."""

    KEYS: Final = "KEYS"
    """Business keys, separated by spaces."""
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    """``"true"``: answer the send only once the message is stored (``WAIT_STORE_MSG_OK``)."""
    DELAY: Final = "DELAY"
    """Delay level (``DELAY_TIME_LEVEL``)."""
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    TRAN_MSG: Final = "TRAN_MSG"
    """``"true"`` on a transactional half message (``TRANSACTION_PREPARED``)."""
    PRODUCER_GROUP: Final = "PGROUP"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    BUYER_ID: Final = "BUYER_ID"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    MQ2_FLAG: Final = "MQ2_FLAG"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    UNIQ_KEY: Final = "UNIQ_KEY"
    """The producer-made message id (``UNIQ_CLIENT_MESSAGE_ID_KEYIDX``), shown as the msgId."""
    EXTEND_UNIQ_INFO: Final = "EXTEND_UNIQ_INFO"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME: Final = "CONSUME_START_TIME"
    INNER_NUM: Final = "INNER_NUM"
    INNER_BASE: Final = "INNER_BASE"
    TRAN_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_ID: Final = "__transactionId__"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID: Final = "INSTANCE_ID"
    CORRELATION_ID: Final = "CORRELATION_ID"
    REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    TTL: Final = "TTL"
    ARRIVE_TIME: Final = "ARRIVE_TIME"
    PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_TYPE: Final = "MSG_TYPE"
    SHARDING_KEY: Final = "__SHARDINGKEY"
    START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
    TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    """A timer message's delivery time, epoch ms (RocketMQ 5; the gRPC ``delivery_timestamp``)."""
    TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    """A timer message's delay from its arrival, in seconds (wins over the two others)."""
    TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    """A timer message's delay from its arrival, in ms (wins over ``TIMER_DELIVER_MS``)."""
    TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    """When a timer message is (was) due, epoch ms: set by the broker, kept on delivery."""
    TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    """When the broker stored the timer message, epoch ms (set on delivery)."""
    TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    """When the broker delivered the timer message, epoch ms (set on delivery)."""
    TIMER_ID: Final = "LEDGERMQ_TIMER_ID"
    """Ours: on a delivered timer message, the timer it fired (``broker.state.timer_table``)."""


# Record layout (spec-broker.md section 3.4). Positions after the born host assume IPv4 hosts.
TOTAL_SIZE_POSITION: Final = 0
MAGIC_POSITION: Final = 4
BODY_CRC_POSITION: Final = 8
QUEUE_ID_POSITION: Final = 12
FLAG_POSITION: Final = 16
QUEUE_OFFSET_POSITION: Final = 20
PHYSICAL_OFFSET_POSITION: Final = 28
SYS_FLAG_POSITION: Final = 36
BORN_TIMESTAMP_POSITION: Final = 40
BORN_HOST_POSITION: Final = 48
STORE_TIMESTAMP_POSITION: Final = 56
"""With an IPv4 born host; 12 bytes later with an IPv6 one (``stamp_store_timestamp`` knows)."""
RECORD_OVERHEAD_BYTES: Final = 91
"""Size of a V1 IPv4 record minus its body, topic and properties bytes."""

# The fixed part of a V1 record with IPv4 hosts, from TOTALSIZE to BODYLENGTH inclusive. BODYCRC
# is unsigned (``I``) so that it compares equal to ``zlib.crc32``; Java reads the same bits as int.
_HEAD_V4: Final = struct.Struct(">iiIiiqqiq4siq4siiqi")
_HEAD_SIZE: Final = _HEAD_V4.size  # 88
# The same with 16-byte addresses, indexed by (sys_flag >> 4) & 3: born host, store host.
_HEADS: Final = (
    _HEAD_V4,
    struct.Struct(">iiIiiqqiq16siq4siiqi"),
    struct.Struct(">iiIiiqqiq4siq16siiqi"),
    struct.Struct(">iiIiiqqiq16siq16siiqi"),
)
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_BATCH_HEAD: Final = struct.Struct(">iiiii")
_U16_BYTES: Final = tuple(i.to_bytes(2, "big") for i in range(MAX_PROPERTIES_LENGTH + 1))
_U8_BYTES: Final = tuple(bytes((i,)) for i in range(256))
_HOST_FLAGS: Final = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6
_SLOW_FLAGS: Final = _HOST_FLAGS | SysFlag.COMPRESSED
"""Records with these flags take ``decode_records``'s general path."""
_MIN_RECORD_BYTES: Final = RECORD_OVERHEAD_BYTES
_NAME_VALUE: Final = "\x01"
_PROPERTY_END: Final = "\x02"

_tuple_new: Final = tuple.__new__

HAVE_DISPATCH_SCAN: Final = _c_scan is not None
"""Whether the C ``scan_dispatch_records`` (``_dispatch_scan.c``) was built."""
_use_c = HAVE_DISPATCH_SCAN and not PURE_PYTHON
"""Whether ``scan_dispatch_records`` runs in C. A module global, not a constant, so that a test
can turn it off and run on the reference."""
HAVE_RECORD_DECODE: Final = _c_decode_plain is not None
"""Whether the C fast path of ``decode_records`` (``_record_decode.c``) was built."""
_use_c_decode = HAVE_RECORD_DECODE and not PURE_PYTHON
"""Whether ``decode_records`` runs its fast path in C (a global, so a test can turn it off)."""


# ---------------------------------------------------------------- properties


def encode_properties(properties: Mapping[str, str]) -> str:
    """``key\\x01value\\x02`` for each pair, in the mapping's order (``messageProperties2String``).

    Raises:
        InvalidMessageError: a key is empty, or a key or value contains a separator (``\\x01`` or
            ``\\x02``), which would silently split into other properties on the other side.
    """
    parts: list[str] = []
    for key, value in properties.items():
        if not key:
            raise InvalidMessageError("a message property has an empty name")
        if _NAME_VALUE in key or _PROPERTY_END in key:
            raise InvalidMessageError(
                f"the message property name {key!r:.60} contains a separator (\\x01 or \\x02)"
            )
        if _NAME_VALUE in value or _PROPERTY_END in value:
            raise InvalidMessageError(
                f"the value of message property {key!r:.60} contains a separator (\\x01 or \\x02)"
            )
        parts.append(f"{key}\x01{value}\x02")
    return "".join(parts)


def decode_properties(text: str) -> dict[str, str]:
    """The mapping a properties string holds (``string2messageProperties``).

    Lenient, as Java's parser is: a missing final ``\\x02`` is fine, and pairs without a name
    (empty, or no ``\\x01``) are skipped. The value runs from the first ``\\x01`` to the
    ``\\x02``. A later pair with the same name wins. Unlike recent Java, an empty value is kept.
    """
    result: dict[str, str] = {}
    for pair in text.split(_PROPERTY_END):
        key, sep, value = pair.partition(_NAME_VALUE)
        if key and sep:
            result[key] = value
    return result


# ---------------------------------------------------------------- validation


def _utf8(text: str, what: str) -> bytes:
    """``text`` in UTF-8; a lone surrogate (which Python strings allow) is the caller's error."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidMessageError(f"the {what} cannot be encoded as UTF-8: {exc}") from None


def validate_topic(topic: str) -> None:
    """Raise ``InvalidTopicNameError`` (an ``InvalidMessageError``) unless ``topic`` is a legal
    topic name: the rule of ``ledgermq.wire.names`` (``Validators.checkTopic``).

    Legal: 1 to ``MAX_TOPIC_LENGTH`` characters out of letters, digits, ``%|_-`` (``%`` for the
    broker's ``%RETRY%`` and ``%DLQ%`` topics).
    """
    check_topic_name(topic)


def validate_message(
    topic: str,
    body: bytes,
    properties: str = "",
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Raise ``InvalidMessageError`` unless a message may be sent and stored as it is.

    Args:
        topic: see ``validate_topic``.
        body: must hold 1 to ``max_message_bytes`` bytes (as sent, i.e. compressed if it is).
        properties: the encoded properties string; at most ``MAX_PROPERTIES_LENGTH`` UTF-8 bytes.
        max_message_bytes: the broker's ``maxMessageSize``, default 4 MiB.
    """
    validate_topic(topic)
    if not body:
        raise InvalidMessageError(f"the message body for topic {topic!r} is empty")
    if len(body) > max_message_bytes:
        raise InvalidMessageError(
            f"the message body of {len(body)} bytes exceeds maxMessageSize {max_message_bytes}"
        )
    # Cheap bound first: a str of n characters encodes to at most 4n UTF-8 bytes.
    if len(properties) * 4 > MAX_PROPERTIES_LENGTH:
        size = len(_utf8(properties, "message properties"))
        if size > MAX_PROPERTIES_LENGTH:
            raise InvalidMessageError(
                f"the message properties take {size} bytes; the limit is {MAX_PROPERTIES_LENGTH}"
            )


# ---------------------------------------------------------------- hosts


@functools.lru_cache(maxsize=1024)
def _ipv4_bytes(host: str) -> bytes:
    """The 4 address bytes of an IPv4 host (or IPv4-mapped IPv6 host), cached: few hosts recur."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise InvalidMessageError(f"{host!r} is not an IP address") from None
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is None:
            raise InvalidMessageError(
                f"cannot store the IPv6 address {host}: records hold IPv4 hosts only, the only "
                "kind the C++ 1.2 client can decode"
            )
        address = mapped
    return address.packed


_host_strings: dict[tuple[bytes, int], str] = {}
"""``(address bytes, port) -> "ip:port"``: a decoded pull body repeats a handful of hosts, and
formatting an address costs more than unpacking the whole fixed header."""


def _host_string(address: bytes, port: int) -> str:
    key = (address, port)
    text = _host_strings.get(key)
    if text is None:
        if len(_host_strings) >= 4096:
            _host_strings.clear()
        if len(address) == 4:
            text = f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
        else:
            text = f"[{ipaddress.IPv6Address(address)}]:{port}"
        _host_strings[key] = text
    return text


def _split_host(host: str) -> tuple[str, int]:
    """``"ip:port"`` or ``"[ipv6]:port"`` back into its parts."""
    ip, _, port = host.rpartition(":")
    return ip.strip("[]"), int(port)


# ---------------------------------------------------------------- message ids


def create_offset_message_id(host_ip: str, port: int, physical_offset: int) -> str:
    """The offset msgId (Java ``MessageDecoder.createMessageId``): where a record is stored.

    Uppercase hex of the store host's address (4 bytes, or 16 for IPv6), its port (int32) and the
    record's physical offset (int64): 32 hex characters for IPv4, 56 for IPv6. Because DLedger
    mode stamps the same physical offset on every replica, the id finds the record on any of them.
    """
    try:
        return _message_id_prefix(host_ip, port) + _I64.pack(physical_offset).hex().upper()
    except (ValueError, OverflowError, struct.error) as exc:
        raise InvalidMessageError(
            f"cannot make a message id from {host_ip}:{port} offset {physical_offset}: {exc}"
        ) from None


@functools.lru_cache(maxsize=256)
def _message_id_prefix(host_ip: str, port: int) -> str:
    """The host part of offset msgIds, cached: a broker makes every id with one store host, and
    parsing the address cost more than the rest of the id."""
    address = ipaddress.ip_address(host_ip.strip("[]")).packed
    return (address + port.to_bytes(4, "big", signed=True)).hex().upper()


def decode_offset_message_id(msg_id: str) -> tuple[str, int, int]:
    """``(host ip, port, physical offset)`` from an offset msgId (``decodeMessageId``).

    Raises:
        MessageFormatError: ``msg_id`` is not 32 or 56 hex characters.
    """
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(
            f"the message id {msg_id[:64]!r} has {len(msg_id)} characters; an offset message id "
            "has 32 (IPv4 store host) or 56 (IPv6)"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageFormatError(f"the message id {msg_id!r} is not hexadecimal") from None
    n = len(raw) - 12
    ip = str(ipaddress.ip_address(raw[:n]))
    (port,) = _I32.unpack_from(raw, n)
    (offset,) = _I64.unpack_from(raw, n + 4)
    return ip, port, offset


class MessageIdForms(NamedTuple):
    """What a message id typed by a user can be (``read_message_id``)."""

    text: str
    """The id, upper-cased as producers and brokers make them."""
    offset: tuple[str, int, int] | None
    """``(host ip, port, physical offset)`` when it can be an offset msgId (its port is one).
    Any id can be a producer's ``UNIQ_KEY`` (the msgId a send prints), found in the key index."""


_UNIQUE_ID_LENGTHS: Final = range(32, 57)
"""Hex digits of a ``UNIQ_KEY``: 32 (IPv4, Java's layout), 34 (v5 clients), 56 (IPv6)."""


def read_message_id(msg_id: str) -> MessageIdForms:
    """Which kinds of message id ``msg_id`` can be. The two share their length (32 hex digits
    with an IPv4 address): a ``UNIQ_KEY`` read as an offset msgId gives a port out of range
    (its pid and salt), so the port tells them apart except for one pid in 65536, where the
    caller tries both.

    Raises:
        MessageFormatError: it can be neither, with a sentence saying what an id looks like.
    """
    text = msg_id.strip().upper()
    if not re.fullmatch(r"[0-9A-F]+", text) or len(text) not in _UNIQUE_ID_LENGTHS:
        raise MessageFormatError(
            f"{msg_id[:64]!r} is not a message id: a message id is 32 to 56 hexadecimal digits, "
            "either the msgId a producer prints (its UNIQ_KEY) or the offsetMsgId of the stored "
            "message"
        )
    offset = None
    if len(text) in (32, 56):
        ip, port, physical = decode_offset_message_id(text)
        if 0 < port < 65536 and physical >= 0:
            offset = (ip, port, physical)
    return MessageIdForms(text, offset)


@final
class UniqueIdGenerator:
    """Producer-side message ids (``UNIQ_KEY``), laid out as RocketMQ's ``MessageClientIDSetter``.

    32 uppercase hex characters (56 with an IPv6 address)::

        address (4 or 16) | pid (2) | salt (4) | ms since the month began (4) | counter (2)

    Everything that varies is injected (this layer reads no clock, no pid, no randomness): the
    client passes its address, ``os.getpid()``, a random 32-bit salt drawn once per process and a
    wall clock in milliseconds.

    Uniqueness: ids of one generator differ as long as it makes fewer than 65536 ids in one
    millisecond (the counter wraps) and its clock does not go back; a step back of under 1000 s is
    clamped to the start of the month, as Java does, which can repeat ids. Generators differ in
    address, pid or salt; two processes share all three with probability about 2**-32 even on one
    host with colliding pids. The time field restarts each month (the UTC month here; Java uses
    the local zone), so an id can repeat one made at the same moment of an earlier month with the
    same counter value, exactly as in Java. Safe to share between threads as far as
    ``itertools.count`` is (CPython: yes); one per process is the intended use.
    """

    def __init__(self, address: str, pid: int, salt: int, now_ms: Callable[[], int]) -> None:
        """
        Args:
            address: this client's IP address (IPv4, or IPv6 for the 56-character form).
            pid: the process id; its low 16 bits are used.
            salt: a random number drawn once per process; its low 32 bits are used (Java uses
                the class loader's hash code).
            now_ms: wall clock, milliseconds since the epoch.
        """
        try:
            raw = ipaddress.ip_address(address.strip("[]")).packed
        except ValueError:
            raise InvalidMessageError(f"{address!r} is not an IP address") from None
        self._prefix = (
            (raw + (pid & 0xFFFF).to_bytes(2, "big") + (salt & 0xFFFFFFFF).to_bytes(4, "big"))
            .hex()
            .upper()
        )
        self._now_ms = now_ms
        self._counter = itertools.count()
        self._month_start_ms = 0
        self._next_month_ms = 0  # forces the first call to compute the month

    def next_id(self) -> str:
        now = self._now_ms()
        if now >= self._next_month_ms:
            self._month_start_ms, self._next_month_ms = _month_bounds_ms(now)
        elapsed = now - self._month_start_ms
        if -1_000_000 < elapsed < 0:  # a small step back of the clock (NTP), as Java clamps it
            elapsed = 0
        counter = next(self._counter) & 0xFFFF
        return f"{self._prefix}{elapsed & 0xFFFFFFFF:08X}{counter:04X}"


def _month_bounds_ms(now_ms: int) -> tuple[int, int]:
    """Start of the UTC month holding ``now_ms`` and start of the next one, in epoch ms."""
    utc = datetime.UTC
    day = datetime.datetime.fromtimestamp(now_ms / 1000, tz=utc)
    start = datetime.datetime(day.year, day.month, 1, tzinfo=utc)
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    end = datetime.datetime(year, month, 1, tzinfo=utc)
    return int(start.timestamp()) * 1000, int(end.timestamp()) * 1000


# ---------------------------------------------------------------- tags


@functools.lru_cache(maxsize=4096)
def tag_hash(tag: str) -> int:
    """Java's ``tag.hashCode()``: the ConsumeQueue's tagsCode, compared against subscriptions.

    ``s[0]*31**(n-1) + ... + s[n-1]`` over UTF-16 code units (a character outside the BMP counts as
    its two surrogates), wrapped to a signed int32. Cached: a topic has a handful of tags.
    """
    h = 0
    for char in tag:
        code = ord(char)
        if code < 0x10000:
            h = (h * 31 + code) & 0xFFFFFFFF
        else:
            code -= 0x10000
            h = (h * 31 + (0xD800 | code >> 10)) & 0xFFFFFFFF
            h = (h * 31 + (0xDC00 | code & 0x3FF)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def parse_subscription(expression: str) -> tuple[frozenset[str] | None, frozenset[int]]:
    """``(tags, tag hash codes)`` of a TAG subscription expression (``FilterAPI``).

    ``"*"`` and ``""`` (after trimming) subscribe to everything: ``(None, frozenset())``. Otherwise
    the expression is split on ``||``, each tag trimmed, empty ones dropped. As in Java, an
    expression with no tag left (``"||"``) matches no message, and ``*`` inside a list is a
    literal tag.
    """
    text = expression.strip()
    if not text or text == "*":
        return None, frozenset()
    tags = frozenset(tag for part in text.split("||") if (tag := part.strip()))
    return tags, frozenset(tag_hash(tag) for tag in tags)


def tags_match(tags: str | None, subscribed: frozenset[str] | None) -> bool:
    """Whether a message with ``tags`` passes a subscription (``None``: all tags).

    The exact check consumers make after the broker's hash-code filter (hash codes can collide).
    A message without tags matches only a subscribe-all.
    """
    return subscribed is None or (tags is not None and tags in subscribed)


# ---------------------------------------------------------------- records: encoding


def encode_record(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int = 0,
    properties: str = "",
    sys_flag: int = 0,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_timestamp: int,
    store_host: tuple[str, int],
    reconsume_times: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """One CommitLog record: V1 magic, IPv4 hosts, BODYCRC = ``zlib.crc32(body)``.

    Java computes BODYCRC with ``java.util.zip.CRC32``, which is zlib's CRC-32, not CRC-32C. The
    host flags of ``sys_flag`` are cleared, since the hosts are written as IPv4 whatever they were.
    Only the layout's own limits are checked here (topic 1 to ``MAX_TOPIC_LENGTH`` bytes,
    properties up to ``MAX_PROPERTIES_LENGTH`` bytes, int fields in range); ``validate_message``
    is the policy check.

    Args:
        born_host, store_host: ``(ip, port)``; IPv4 or IPv4-mapped IPv6 addresses.
        queue_offset, physical_offset: may be stamped later (``stamp_queue_offset``) once known.

    Raises:
        InvalidMessageError: the message does not fit the layout.
    """
    topic_bytes = _utf8(topic, "topic")
    topic_length = len(topic_bytes)
    if not 0 < topic_length <= MAX_TOPIC_LENGTH:
        raise InvalidMessageError(
            f"a topic of {topic_length} bytes cannot be stored; it must have 1 to "
            f"{MAX_TOPIC_LENGTH} bytes"
        )
    properties_bytes = _utf8(properties, "message properties")
    properties_length = len(properties_bytes)
    if properties_length > MAX_PROPERTIES_LENGTH:
        raise InvalidMessageError(
            f"the message properties take {properties_length} bytes; the limit is "
            f"{MAX_PROPERTIES_LENGTH}"
        )
    body_length = len(body)
    try:
        head = _HEAD_V4.pack(
            RECORD_OVERHEAD_BYTES + body_length + topic_length + properties_length,
            MESSAGE_MAGIC_V1,
            zlib.crc32(body),
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag & ~_HOST_FLAGS,
            born_timestamp,
            _ipv4_bytes(born_host[0]),
            born_host[1],
            store_timestamp,
            _ipv4_bytes(store_host[0]),
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            body_length,
        )
    except struct.error as exc:
        raise InvalidMessageError(f"a field of the message is out of range: {exc}") from None
    return b"".join(
        (
            head,
            body,
            _U8_BYTES[topic_length],
            topic_bytes,
            _U16_BYTES[properties_length],
            properties_bytes,
        )
    )


def encode_records(
    *,
    topic: str,
    queue_id: int,
    items: Sequence[tuple[bytes, int, str]],
    first_queue_offset: int,
    sys_flag: int = 0,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_timestamp: int,
    store_host: tuple[str, int],
    reconsume_times: int = 0,
) -> tuple[bytes, list[int]]:
    """Records of ``items`` (body, flag, properties) for consecutive queue offsets, concatenated.

    Returns the records as one buffer and the byte offset of each record in it. Each record is
    exactly what ``encode_record`` makes of its message with ``queue_offset = first_queue_offset
    + i`` and the shared fields; one pass, one join (the send path of a batch).

    Raises:
        InvalidMessageError: a message does not fit the layout.
    """
    topic_bytes = _utf8(topic, "topic")
    topic_length = len(topic_bytes)
    if not 0 < topic_length <= MAX_TOPIC_LENGTH:
        raise InvalidMessageError(
            f"a topic of {topic_length} bytes cannot be stored; it must have 1 to "
            f"{MAX_TOPIC_LENGTH} bytes"
        )
    topic_part = _U8_BYTES[topic_length] + topic_bytes
    fixed = RECORD_OVERHEAD_BYTES + topic_length
    sys_flag &= ~_HOST_FLAGS
    born_ip = _ipv4_bytes(born_host[0])
    born_port = born_host[1]
    store_ip = _ipv4_bytes(store_host[0])
    store_port = store_host[1]
    pack = _HEAD_V4.pack
    parts: list[bytes] = []
    append = parts.append
    starts: list[int] = []
    pos = 0
    queue_offset = first_queue_offset
    try:
        for body, flag, properties in items:
            properties_bytes = (
                properties.encode()
                if properties.isascii()
                else _utf8(properties, "message properties")
            )
            properties_length = len(properties_bytes)
            if properties_length > MAX_PROPERTIES_LENGTH:
                raise InvalidMessageError(
                    f"the message properties take {properties_length} bytes; the limit is "
                    f"{MAX_PROPERTIES_LENGTH}"
                )
            body_length = len(body)
            total = fixed + body_length + properties_length
            append(
                pack(total, MESSAGE_MAGIC_V1, zlib.crc32(body), queue_id, flag, queue_offset, 0,
                     sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip,
                     store_port, reconsume_times, 0, body_length)
            )  # fmt: skip
            append(body)
            append(topic_part)
            append(_U16_BYTES[properties_length])
            append(properties_bytes)
            starts.append(pos)
            pos += total
            queue_offset += 1
    except struct.error as exc:
        raise InvalidMessageError(f"a field of the message is out of range: {exc}") from None
    return b"".join(parts), starts


def stamp_queue_offset(
    record: bytearray | memoryview, queue_offset: int, record_pos: int = 0
) -> None:
    """Write QUEUEOFFSET into an encoded record in place (assigned when the append is ordered)."""
    _I64.pack_into(record, record_pos + QUEUE_OFFSET_POSITION, queue_offset)


def stamp_physical_offset(
    record: bytearray | memoryview, physical_offset: int, record_pos: int = 0
) -> None:
    """Write PHYSICALOFFSET in place (DLedger mode: the entry's position + 48, spec 1.2)."""
    _I64.pack_into(record, record_pos + PHYSICAL_OFFSET_POSITION, physical_offset)


def stamp_store_timestamp(
    record: bytearray | memoryview, store_timestamp: int, record_pos: int = 0
) -> None:
    """Write STORETIMESTAMP in place, after a born host of either kind."""
    (sys_flag,) = _I32.unpack_from(record, record_pos + SYS_FLAG_POSITION)
    shift = 12 if sys_flag & SysFlag.BORNHOST_V6 else 0
    _I64.pack_into(record, record_pos + STORE_TIMESTAMP_POSITION + shift, store_timestamp)


# ---------------------------------------------------------------- records: decoding


class MessageExt(NamedTuple):
    """A stored message as a consumer sees it (Java ``MessageExt``), decoded from a record.

    A NamedTuple because building one is the decoder's main cost and a tuple is the cheapest
    immutable record; ``properties`` is a plain dict (so a ``MessageExt`` is not hashable).
    """

    topic: str
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    """PHYSICALOFFSET: where the record is in the commit log (ours: the entry body's start)."""
    sys_flag: int
    born_timestamp: int
    """Milliseconds since the epoch, as the producer's clock had it."""
    born_host: str
    """``"ip:port"`` of the producer (``"[ipv6]:port"`` for IPv6)."""
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    """Inflated if the record was compressed (SYSFLAG bit 0); ``body_crc`` is of the stored one."""
    properties: dict[str, str]
    body_crc: int
    """BODYCRC as stored, unsigned (compare with ``zlib.crc32``)."""
    store_size: int
    """TOTALSIZE: the record's length in bytes."""

    @property
    def offset_msg_id(self) -> str:
        """Where the message is stored (``create_offset_message_id`` of the store host)."""
        ip, port = _split_host(self.store_host)
        return create_offset_message_id(ip, port, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The id clients show: ``UNIQ_KEY`` when the producer set one, else the offset msgId."""
        return self.properties.get(MessageProperty.UNIQ_KEY) or self.offset_msg_id

    @property
    def keys(self) -> list[str]:
        """The ``KEYS`` property split on spaces (empty when absent)."""
        return self.properties.get(MessageProperty.KEYS, "").split()

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageProperty.TAGS)


class DispatchInfo(NamedTuple):
    """What the ConsumeQueue dispatcher needs from one record, read without copying its body."""

    total_size: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_timestamp: int
    tags_code: int
    """``tag_hash`` of ``TAGS``, 0 without tags (delay messages: the broker substitutes the
    delivery time, as Java does)."""
    keys: list[str]
    uniq_key: str | None
    properties: dict[str, str]


class _Layout(NamedTuple):
    """A record's fields and where its variable parts are (internal to the two decoders)."""

    total: int
    crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_start: int
    body_end: int
    topic: str
    properties: dict[str, str]


def _layout(data: bytes | bytearray | memoryview, pos: int, end: int) -> _Layout:
    """Parse the record at ``pos`` (the buffer ending at ``end``) except for its body.

    Every length is checked against the record's TOTALSIZE and TOTALSIZE against ``end`` before
    anything is sliced, and the fields must end exactly at TOTALSIZE.
    """
    if end - pos < _HEAD_SIZE:
        raise _truncated(data, pos, end)
    (total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
     born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_length,
     ) = _HEAD_V4.unpack_from(data, pos)  # fmt: skip
    if magic != MESSAGE_MAGIC_V1 and magic != MESSAGE_MAGIC_V2:  # noqa: PLR1714 (hot path)
        raise _bad_magic(magic, pos)
    record_end = pos + total
    if total < _MIN_RECORD_BYTES or record_end > end:
        raise _truncated(data, pos, end)
    body_start = pos + _HEAD_SIZE
    if sys_flag & _HOST_FLAGS:  # wider hosts: parse again with the matching layout
        head = _HEADS[(sys_flag >> 4) & 3]
        body_start = pos + head.size
        if body_start > record_end:
            raise MessageFormatError(
                f"the record of {total} bytes at byte {pos} is too short for its IPv6 hosts"
            )
        (_, _, _, _, _, _, _, _, _, born_ip, born_port, store_ts, store_ip, store_port,
         reconsume, prepared, body_length) = head.unpack_from(data, pos)  # fmt: skip
    body_end = body_start + body_length
    if body_length < 0 or body_end + 3 > record_end:
        raise MessageFormatError(
            f"the body length {body_length} at byte {body_start - 4} runs past the record of "
            f"{total} bytes at byte {pos}"
        )
    if magic == MESSAGE_MAGIC_V1:
        topic_start = body_end + 1
        topic_end = topic_start + data[body_end]
    else:
        topic_start = body_end + 2
        topic_end = topic_start + (data[body_end] << 8 | data[body_end + 1])
    if topic_end + 2 > record_end:
        raise MessageFormatError(
            f"the topic length at byte {body_end} runs past the record of {total} bytes at "
            f"byte {pos}"
        )
    properties_length = data[topic_end] << 8 | data[topic_end + 1]
    if topic_end + 2 + properties_length != record_end:
        raise MessageFormatError(
            f"the properties length {properties_length} at byte {topic_end} does not end the "
            f"record of {total} bytes at byte {pos}"
        )
    try:
        topic = str(data[topic_start:topic_end], "utf-8")
        properties = (
            decode_properties(str(data[topic_end + 2 : record_end], "utf-8"))
            if properties_length
            else {}
        )
    except UnicodeDecodeError as exc:
        raise MessageFormatError(
            f"the record at byte {pos} has a topic or properties that are not UTF-8: {exc}"
        ) from None
    return _tuple_new(
        _Layout,
        (total, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_ip,
         born_port, store_ts, store_ip, store_port, reconsume, prepared, body_start, body_end,
         topic, properties),
    )  # fmt: skip


def _truncated(data: bytes | bytearray | memoryview, pos: int, end: int) -> MessageFormatError:
    if end - pos >= 4:
        (total,) = _I32.unpack_from(data, pos)
        if total < _MIN_RECORD_BYTES:
            return MessageFormatError(
                f"the record at byte {pos} claims {total} bytes, less than the "
                f"{_MIN_RECORD_BYTES} of the smallest record"
            )
        return MessageFormatError(
            f"the record of {total} bytes at byte {pos} is truncated: only {end - pos} bytes follow"
        )
    return MessageFormatError(f"{end - pos} stray bytes at byte {pos} are not a record")


def _bad_magic(magic: int, pos: int) -> MessageFormatError:
    if magic == BLANK_MAGIC:
        return MessageFormatError(f"byte {pos} starts the end-of-file filler, not a message")
    return MessageFormatError(
        f"the record at byte {pos} has magic code {magic & 0xFFFFFFFF:#010x}, not a message's "
        f"({MESSAGE_MAGIC_V1 & 0xFFFFFFFF:#010x} or {MESSAGE_MAGIC_V2 & 0xFFFFFFFF:#010x})"
    )


def _inflate(body: bytes, sys_flag: int, pos: int, limit: int) -> bytes:
    kind = (sys_flag & SysFlag.COMPRESSION_TYPE_MASK) >> 8
    if kind not in (0, 3):
        name = {1: "LZ4", 2: "ZSTD"}.get(kind, f"unknown ({kind})")
        raise MessageFormatError(
            f"the record at byte {pos} is compressed with {name}; only zlib is supported"
        )
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise MessageFormatError(
            f"the compressed body of the record at byte {pos} does not inflate: {exc}"
        ) from None
    if len(inflated) > limit:
        raise MessageFormatError(
            f"the compressed body of the record at byte {pos} inflates past {limit} bytes"
        )
    if not inflater.eof:
        raise MessageFormatError(
            f"the compressed body of the record at byte {pos} is a truncated zlib stream"
        )
    return inflated


def decode_records(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = False,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
) -> list[MessageExt]:
    """The messages of concatenated records (a PULL response body), in order.

    Args:
        buf: whole records, nothing else (an empty buffer holds no message).
        check_crc: also compare each stored body with its BODYCRC (costs ~0.7 us per KiB).
        max_inflated_bytes: largest body a compressed record may inflate to.

    Raises:
        MessageFormatError: the buffer is not a sequence of whole, well-formed records.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    if _use_c_decode and not check_crc:
        # C decodes the common records (``_record_decode.c``: 2.3 -> 0.56 us per 1 KiB
        # message); each record it leaves goes to ``_decode_one``, as below.
        end = len(data)
        messages, pos = _c_decode_plain(data, 0, MessageExt)
        while pos < end:
            message = _decode_one(data, pos, end, check_crc, max_inflated_bytes)
            messages.append(message)
            pos += message.store_size
            if pos < end:
                more, pos = _c_decode_plain(data, pos, MessageExt)
                messages += more
        return messages
    return _decode_records_py(data, check_crc, max_inflated_bytes)


def _decode_records_py(data: bytes, check_crc: bool, max_inflated_bytes: int) -> list[MessageExt]:
    """``decode_records`` in Python: the reference of the C fast path."""
    end = len(data)
    pos = 0
    messages: list[MessageExt] = []
    append = messages.append
    unpack_head = _HEAD_V4.unpack_from
    host_strings = _host_strings
    while pos < end:
        # Fast path: a V1 record with IPv4 hosts and a plain body, checked as strictly as
        # ``_layout`` checks it. Any doubt (other layouts, compression, a bad length or CRC,
        # bad UTF-8) falls through to ``_decode_one``, which parses it or says what is wrong.
        if end - pos >= _HEAD_SIZE:
            (total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
             born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_length,
             ) = unpack_head(data, pos)  # fmt: skip
            record_end = pos + total
            body_end = pos + _HEAD_SIZE + body_length
            if (
                magic == MESSAGE_MAGIC_V1
                and not sys_flag & _SLOW_FLAGS
                and body_length >= 0
                and body_end + 3 <= record_end <= end
            ):
                topic_end = body_end + 1 + data[body_end]
                body = data[pos + _HEAD_SIZE : body_end]
                if (
                    topic_end + 2 <= record_end
                    and topic_end + 2 + (data[topic_end] << 8 | data[topic_end + 1]) == record_end
                    and not (check_crc and zlib.crc32(body) != crc)
                ):
                    try:
                        topic = data[body_end + 1 : topic_end].decode()
                        properties = decode_properties(data[topic_end + 2 : record_end].decode())
                    except UnicodeDecodeError:
                        pass
                    else:
                        born = host_strings.get((born_ip, born_port)) or _host_string(
                            born_ip, born_port
                        )
                        store = host_strings.get((store_ip, store_port)) or _host_string(
                            store_ip, store_port
                        )
                        message = _tuple_new(
                            MessageExt,
                            (topic, queue_id, flag, queue_offset, physical_offset, sys_flag,
                             born_ts, born, store_ts, store, reconsume, prepared, body,
                             properties, crc, total),
                        )  # fmt: skip
                        append(message)
                        pos = record_end
                        continue
        message = _decode_one(data, pos, end, check_crc, max_inflated_bytes)
        append(message)
        pos += message.store_size
    return messages


def _decode_one(data: bytes, pos: int, end: int, check_crc: bool, inflate_limit: int) -> MessageExt:
    """The record at ``pos``, any layout; the slow path of ``decode_records``."""
    (total, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_ip,
     born_port, store_ts, store_ip, store_port, reconsume, prepared, body_start, body_end,
     topic, properties) = _layout(data, pos, end)  # fmt: skip
    body = data[body_start:body_end]
    if check_crc and zlib.crc32(body) != crc:
        raise MessageFormatError(
            f"the body of the record at byte {pos} has CRC {zlib.crc32(body):#010x}, "
            f"but the record says {crc:#010x}"
        )
    if sys_flag & SysFlag.COMPRESSED:
        body = _inflate(body, sys_flag, pos, inflate_limit)
    born = _host_string(born_ip, born_port)
    store = _host_string(store_ip, store_port)
    return _tuple_new(
        MessageExt,
        (topic, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born,
         store_ts, store, reconsume, prepared, body, properties, crc, total),
    )  # fmt: skip


def read_dispatch_info(buf: bytes | bytearray | memoryview, offset: int = 0) -> DispatchInfo:
    """The dispatcher's view of the record at ``offset`` of ``buf`` (which may hold more).

    Reads the header, topic and properties only; the body is neither copied nor checked. ``buf``
    may be a memoryview of a mapped commit log file.

    Raises:
        MessageFormatError: no well-formed record starts at ``offset``.
    """
    if not 0 <= offset < len(buf):
        raise MessageFormatError(f"offset {offset} is outside the buffer of {len(buf)} bytes")
    (total, _, queue_id, _, queue_offset, physical_offset, sys_flag, _, _, _, store_ts, _, _, _,
     _, _, _, topic, properties) = _layout(buf, offset, len(buf))  # fmt: skip
    tags = properties.get(MessageProperty.TAGS)
    keys = properties.get(MessageProperty.KEYS)
    info: DispatchInfo = _tuple_new(
        DispatchInfo,
        (total, topic, queue_id, queue_offset, physical_offset, sys_flag, store_ts,
         tag_hash(tags) if tags else 0, keys.split() if keys else [],
         properties.get(MessageProperty.UNIQ_KEY), properties),
    )  # fmt: skip
    return info


class RecordIndexInfo(NamedTuple):
    """What the dispatcher indexes of one record of a buffer (``scan_dispatch_records``)."""

    pos: int
    """Where the record starts in the buffer."""
    total_size: int
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    tags_code: int
    keys: list[str]
    """``KEYS`` split on spaces, then ``UNIQ_KEY`` if set: every key the index takes."""


# TOTALSIZE, MAGIC, QUEUEID, QUEUEOFFSET, SYSFLAG, STORETIMESTAMP, BODYLENGTH of an IPv4 record.
_INDEX_HEAD: Final = struct.Struct(">ii4xi4xq8xi16xq20xi")
_TAGS_MARK: Final = "\x02TAGS\x01"
_KEYS_MARK: Final = "\x02KEYS\x01"
_UNIQ_MARK: Final = "\x02UNIQ_KEY\x01"


def find_property(text: str, key: str) -> str | None:
    """``decode_properties(text).get(key)`` without building the dict (a send looks up two)."""
    return _find_property(text, f"{_PROPERTY_END}{key}{_NAME_VALUE}")


def _find_property(text: str, mark: str) -> str | None:
    """``decode_properties(text).get(key)`` for ``mark = "\\x02<key>\\x01"``, without the dict:
    the last pair with that name wins, the value runs to the next ``\\x02``."""
    at = text.rfind(mark)
    if at >= 0:
        start = at + len(mark)
    elif text.startswith(mark[1:]):
        start = len(mark) - 1
    else:
        return None
    end = text.find(_PROPERTY_END, start)
    return text[start:end] if end >= 0 else text[start:]


def scan_dispatch_records(buf: bytes | bytearray | memoryview) -> list[RecordIndexInfo]:
    """``read_dispatch_info`` of every record of ``buf`` (whole records, nothing else), reduced
    to what the dispatcher indexes; a ledger entry's body holds one record or a batch's records.

    Every replica runs this on every committed entry, so it is C (``_dispatch_scan.c``) where the
    extension is built: the common record is read there and every other one by ``_slow_record``
    here, so results and errors are those of the reference, ``_scan_dispatch_records_py``.

    Raises:
        MessageFormatError: ``buf`` is not a sequence of whole, well-formed records (or empty).
    """
    if _use_c:
        records = _c_scan(buf, RecordIndexInfo, _slow_record)
        if records is not None:
            return records
    return _scan_dispatch_records_py(buf)


def _slow_record(buf: bytes | bytearray | memoryview, pos: int) -> RecordIndexInfo:
    """The record at ``pos`` by ``read_dispatch_info``: any layout, or the error it makes."""
    info = read_dispatch_info(buf, pos)
    keys = list(info.keys)
    if info.uniq_key:
        keys.append(info.uniq_key)
    record: RecordIndexInfo = _tuple_new(
        RecordIndexInfo,
        (pos, info.total_size, info.topic, info.queue_id, info.queue_offset,
         info.store_timestamp, info.tags_code, keys),
    )  # fmt: skip
    return record


def _scan_dispatch_records_py(buf: bytes | bytearray | memoryview) -> list[RecordIndexInfo]:
    """``scan_dispatch_records`` in Python: the reference the C version is tested against, and
    what runs without the extension or with ``LEDGERMQ_PURE_PYTHON=1``.

    The common record (V1, IPv4 hosts, UTF-8 topic and properties) is read with one struct call
    and three substring searches instead of a properties dict; anything else goes through
    ``read_dispatch_info``, so the result and the errors are the same.

    Raises:
        MessageFormatError: ``buf`` is not a sequence of whole, well-formed records (or empty).
    """
    end = len(buf)
    if end == 0:
        raise MessageFormatError("offset 0 is outside the buffer of 0 bytes")
    unpack = _INDEX_HEAD.unpack_from
    out: list[RecordIndexInfo] = []
    append = out.append
    pos = 0
    last_topic_bytes = b""
    last_topic = ""
    while pos < end:
        if end - pos >= _HEAD_SIZE:
            total, magic, queue_id, queue_offset, sys_flag, store_ts, body_length = unpack(buf, pos)
            record_end = pos + total
            body_end = pos + _HEAD_SIZE + body_length
            if (
                magic == MESSAGE_MAGIC_V1
                and not sys_flag & _HOST_FLAGS
                and total >= _MIN_RECORD_BYTES
                and body_length >= 0
                and body_end + 3 <= record_end <= end
            ):
                topic_end = body_end + 1 + buf[body_end]
                if (
                    topic_end + 2 <= record_end
                    and topic_end + 2 + (buf[topic_end] << 8 | buf[topic_end + 1]) == record_end
                ):
                    try:
                        topic_bytes = bytes(buf[body_end + 1 : topic_end])
                        if topic_bytes == last_topic_bytes:
                            topic = last_topic
                        else:
                            topic = str(topic_bytes, "utf-8")
                            last_topic_bytes, last_topic = topic_bytes, topic
                        text = str(buf[topic_end + 2 : record_end], "utf-8")
                    except UnicodeDecodeError:
                        pass
                    else:
                        tags = _find_property(text, _TAGS_MARK) if text else None
                        keys_text = _find_property(text, _KEYS_MARK) if text else None
                        uniq = _find_property(text, _UNIQ_MARK) if text else None
                        keys = keys_text.split() if keys_text else []
                        if uniq:
                            keys.append(uniq)
                        append(
                            _tuple_new(
                                RecordIndexInfo,
                                (
                                    pos,
                                    total,
                                    topic,
                                    queue_id,
                                    queue_offset,
                                    store_ts,
                                    tag_hash(tags) if tags else 0,
                                    keys,
                                ),
                            )
                        )
                        pos = record_end
                        continue
        record = _slow_record(buf, pos)
        append(record)
        pos += record.total_size
    return out


# ---------------------------------------------------------------- batch bodies


class BatchItem(NamedTuple):
    """One message of a batch send body: its own body, flag and properties string."""

    body: bytes
    flag: int
    properties: str


def encode_batch(messages: Sequence[tuple[bytes, int, str]]) -> bytes:
    """A batch send body (``MessageDecoder.encodeMessages``) of ``(body, flag, properties)``.

    Each message: ``int32 totalSize | int32 magic=0 | int32 bodyCRC=0 | int32 flag | int32
    bodyLen | body | int16 propsLen | props``. The broker recomputes the CRC and supplies the
    topic, queue and hosts from the request.

    Raises:
        InvalidMessageError: a flag is out of int32 range or properties exceed
            ``MAX_PROPERTIES_LENGTH`` bytes.
    """
    parts: list[bytes] = []
    for body, flag, properties in messages:
        properties_bytes = _utf8(properties, "message properties")
        properties_length = len(properties_bytes)
        if properties_length > MAX_PROPERTIES_LENGTH:
            raise InvalidMessageError(
                f"the message properties take {properties_length} bytes; the limit is "
                f"{MAX_PROPERTIES_LENGTH}"
            )
        size = 22 + len(body) + properties_length
        try:
            parts.append(_BATCH_HEAD.pack(size, 0, 0, flag, len(body)))
        except struct.error as exc:
            raise InvalidMessageError(
                f"a field of a batched message is out of range: {exc}"
            ) from None
        parts += (body, _U16_BYTES[properties_length], properties_bytes)
    return b"".join(parts)


def decode_batch(buf: bytes | bytearray | memoryview) -> list[BatchItem]:
    """The messages of a batch send body, in order.

    Magic and CRC are not checked: the C++ client writes real values where Java writes zeros,
    and the broker computes the CRC itself. Each message's totalSize must match its fields.

    Raises:
        MessageFormatError: the body is not a sequence of whole, well-formed batch messages.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    end = len(data)
    pos = 0
    items: list[BatchItem] = []
    while pos < end:
        if end - pos < 22:
            raise MessageFormatError(
                f"the batched message at byte {pos} is truncated: only {end - pos} bytes follow"
            )
        size, _, _, flag, body_length = _BATCH_HEAD.unpack_from(data, pos)
        body_start = pos + 20
        body_end = body_start + body_length
        if body_length < 0 or body_end + 2 > end:
            raise MessageFormatError(
                f"the body length {body_length} at byte {pos + 16} runs past the batch body "
                f"of {end} bytes"
            )
        properties_length = data[body_end] << 8 | data[body_end + 1]
        message_end = body_end + 2 + properties_length
        if properties_length > MAX_PROPERTIES_LENGTH or message_end > end:
            raise MessageFormatError(
                f"the properties length {properties_length} at byte {body_end} runs past the "
                f"batch body of {end} bytes"
            )
        if size != message_end - pos:
            raise MessageFormatError(
                f"the batched message at byte {pos} says it has {size} bytes but its fields "
                f"take {message_end - pos}"
            )
        try:
            properties = str(data[body_end + 2 : message_end], "utf-8")
        except UnicodeDecodeError as exc:
            raise MessageFormatError(
                f"the properties of the batched message at byte {pos} are not UTF-8: {exc}"
            ) from None
        items.append(BatchItem(data[body_start:body_end], flag, properties))
        pos = message_end
    return items
