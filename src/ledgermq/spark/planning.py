"""Pure planning for the Spark connector: options, offsets, ranges (no pyspark, no I/O).

Offsets are kept as Spark checkpoints them: ``{"<topic>": {"<brokerName>": {"<queueId>":
<nextOffset>}}}`` with string keys (JSON round-trips int keys to strings) and *end-exclusive*
queue offsets, as in Spark's Kafka source and rocketmq-spark. A queue is named by ``(topic,
brokerName, queueId)``: the broker name is the DLedger group, which keeps its name across a
master failover, so a new master serves the same offsets.

Everything here is a function of its arguments, so it is unit-tested without a JVM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ledgermq.client import Credentials
from ledgermq.errors import ConfigError
from ledgermq.net.tls import TlsClientConfig

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "EARLIEST",
    "LATEST",
    "ClientSecurity",
    "OffsetSpec",
    "Offsets",
    "QueueKey",
    "QueueRange",
    "SinkOptions",
    "SourceOptions",
    "cap_offsets",
    "flatten",
    "nest",
    "pack_ranges",
    "parse_offset_spec",
    "parse_sink_options",
    "parse_source_options",
    "plan_ranges",
    "split_ranges",
]

QueueKey: TypeAlias = tuple[str, str, int]
"""``(topic, brokerName, queueId)``."""
Offsets: TypeAlias = "dict[str, dict[str, dict[str, int]]]"
"""The checkpointed form: topic -> broker name -> str(queue id) -> next offset."""

EARLIEST: Final = -2
LATEST: Final = -1
"""In an offsets JSON, as in Kafka and rocketmq-spark: -2 = the queue's min, -1 = its max."""

# Spark passes these itself (DataFrameReader.load(path), DataStreamWriter.start(path)).
_SPARK_KEYS: Final = frozenset({"path", "checkpointlocation", "queryname"})

_COMMON: Final = {
    "namesrvaddr": "namesrvAddr",
    "nameserver": "nameServer",
    "accesskey": "accessKey",
    "secretkey": "secretKey",
    "tls": "tls",
    "tlstrustcertpath": "tlsTrustCertPath",
    "tlscertpath": "tlsCertPath",
    "tlskeypath": "tlsKeyPath",
}
_SOURCE: Final = {
    **_COMMON,
    "topic": "topic",
    "topicpattern": "topicPattern",
    "pulltimeoutms": "pullTimeoutMs",
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "minpartitions": "minPartitions",
    "maxmessagespertrigger": "maxMessagesPerTrigger",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "failondataloss": "failOnDataLoss",
    "pullbatchsize": "pullBatchSize",
    "consumergroup": "consumerGroup",
    "subexpression": "subExpression",
}
_SINK: Final = {
    **_COMMON,
    "topic": "topic",
    "producergroup": "producerGroup",
    "sendbatchsize": "sendBatchSize",
    "exactlyonce": "exactlyOnce",
    "sinkid": "sinkId",
    "requesttimeoutms": "requestTimeoutMs",
}


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end: ``kind`` is ``earliest``, ``latest``, ``timestamp`` or ``json``."""

    kind: str
    timestamp_ms: int = 0
    offsets: Mapping[QueueKey, int] | None = None
    """For ``json``: the queues given, each an offset or ``EARLIEST`` / ``LATEST``."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How the connector's clients reach a secured cluster: an ACL account (``accessKey``,
    ``secretKey``) and TLS (``tls``, ``tlsTrustCertPath``, ``tlsCertPath``, ``tlsKeyPath``;
    the files must be readable at those paths on every executor)."""

    credentials: Credentials | None = None
    tls: TlsClientConfig | None = None

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for the clients (``Producer``, ``PullConsumer``, ``Admin``)."""
        return {"credentials": self.credentials, "tls": self.tls}


@dataclass(frozen=True, slots=True)
class SourceOptions:
    namesrv_addr: str
    topics: tuple[str, ...]
    """Topics named in ``topic`` (empty when ``topic_pattern`` is used)."""
    topic_pattern: str | None
    starting: OffsetSpec | None
    """None: the default, ``earliest`` for a batch read and ``latest`` for a stream."""
    ending: OffsetSpec
    min_partitions: int
    max_messages_per_trigger: int | None
    fail_on_data_loss: bool
    pull_batch_size: int
    pull_timeout_ms: int
    consumer_group: str
    sub_expression: str
    security: ClientSecurity = ClientSecurity()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is one this source reads (system topics never match a pattern)."""
        if self.topic_pattern is None:
            return topic in self.topics
        if topic.startswith(("%", "rmq_sys_")) or topic in ("TBW102", "SELF_TEST_TOPIC"):
            return False
        return re.fullmatch(self.topic_pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    namesrv_addr: str
    topic: str | None
    producer_group: str
    send_batch_size: int
    exactly_once: bool
    sink_id: str | None
    request_timeout_ms: int
    security: ClientSecurity = ClientSecurity()


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Queue offsets ``[start, end)`` of one queue: one Spark partition, or part of one
    (``pack_ranges``)."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


# ---------------------------------------------------------------------- options
def _known(options: Mapping[str, str], table: Mapping[str, str], what: str) -> dict[str, str]:
    """Lower-cased option -> value, refusing unknown keys with the list of known ones."""
    out: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if low in _SPARK_KEYS:
            continue
        if low not in table:
            known = ", ".join(sorted(set(table.values())))
            raise ConfigError(f"unknown option {key!r} for a LedgerMQ {what}; known: {known}")
        out[low] = value
    return out


def _int_option(options: Mapping[str, str], key: str, default: int, *, minimum: int = 0) -> int:
    raw = options.get(key.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {key} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"option {key} must be at least {minimum}, got {value}")
    return value


def _bool_option(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key.lower())
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {key} must be true or false, got {raw!r}")


def _namesrv(options: Mapping[str, str]) -> str:
    addr = options.get("namesrvaddr") or options.get("nameserver")
    if not addr:
        raise ConfigError('option namesrvAddr is required ("host:port;host:port")')
    return addr


def _security(options: Mapping[str, str]) -> ClientSecurity:
    access_key, secret_key = options.get("accesskey"), options.get("secretkey")
    if bool(access_key) != bool(secret_key):
        raise ConfigError("options accessKey and secretKey go together: set both or neither")
    credentials = Credentials(access_key, secret_key) if access_key and secret_key else None
    paths = {
        name: options.get(name.lower()) or None
        for name in ("tlsTrustCertPath", "tlsCertPath", "tlsKeyPath")
    }
    tls = None
    if _bool_option(options, "tls", False) or any(paths.values()):
        tls = TlsClientConfig(
            trust_cert_path=paths["tlsTrustCertPath"],
            cert_path=paths["tlsCertPath"],
            key_path=paths["tlsKeyPath"],
        )
    return ClientSecurity(credentials, tls)


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options of ``spark.read`` / ``readStream`` (keys in any case)."""
    opts = _known(options, _SOURCE, "source")
    topic_text = opts.get("topic")
    pattern = opts.get("topicpattern")
    if (topic_text is None) == (pattern is None):
        raise ConfigError("set exactly one of the options topic (a comma list) and topicPattern")
    topics: tuple[str, ...] = ()
    if topic_text is not None:
        topics = tuple(t.strip() for t in topic_text.split(",") if t.strip())
        if not topics:
            raise ConfigError(f"option topic names no topic: {topic_text!r}")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option topicPattern is not a regular expression: {exc}") from None
    starting = None
    if "startingoffsets" in opts:
        starting = parse_offset_spec(opts["startingoffsets"], "startingOffsets")
    ending = parse_offset_spec(opts.get("endingoffsets", "latest"), "endingOffsets")
    if ending.kind == "earliest" or (
        ending.offsets is not None and EARLIEST in ending.offsets.values()
    ):
        raise ConfigError("endingOffsets cannot be earliest (-2): the read would be empty")
    max_per_trigger = opts.get("maxmessagespertrigger", opts.get("maxoffsetspertrigger"))
    return SourceOptions(
        namesrv_addr=_namesrv(opts),
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        min_partitions=_int_option(opts, "minPartitions", 0, minimum=0),
        max_messages_per_trigger=(
            None
            if max_per_trigger is None
            else _int_option({"m": max_per_trigger}, "m", 0, minimum=1)
        ),
        fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
        pull_batch_size=_int_option(opts, "pullBatchSize", 1024, minimum=1),
        pull_timeout_ms=_int_option(opts, "pullTimeoutMs", 30_000, minimum=100),
        consumer_group=opts.get("consumergroup", "spark-ledgermq"),
        sub_expression=opts.get("subexpression", "*"),
        security=_security(opts),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write`` / ``writeStream`` (keys in any case)."""
    opts = _known(options, _SINK, "sink")
    return SinkOptions(
        namesrv_addr=_namesrv(opts),
        topic=opts.get("topic") or None,
        producer_group=opts.get("producergroup", "spark-ledgermq-sink"),
        send_batch_size=_int_option(opts, "sendBatchSize", 256, minimum=1),
        exactly_once=_bool_option(opts, "exactlyOnce", True),
        sink_id=opts.get("sinkid") or None,
        request_timeout_ms=_int_option(opts, "requestTimeoutMs", 10_000, minimum=100),
        security=_security(opts),
    )


def parse_offset_spec(text: str, name: str) -> OffsetSpec:
    """``earliest``, ``latest``, a timestamp (epoch ms, or ISO 8601 with a zone), or JSON.

    JSON: ``{"topic": {"brokerName": {"queueId": offset}}}``, offsets >= 0 or -2 (earliest)
    / -1 (latest).
    """
    value = text.strip()
    low = value.lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    if re.fullmatch(r"\d+", value):
        return OffsetSpec("timestamp", timestamp_ms=int(value))
    if value.startswith("{"):
        return OffsetSpec("json", offsets=_parse_offsets_json(value, name))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is not None and moment.tzinfo is not None:
        return OffsetSpec("timestamp", timestamp_ms=int(moment.timestamp() * 1000))
    raise ConfigError(
        f"option {name} must be earliest, latest, a timestamp (epoch ms or ISO 8601 with a "
        f'zone) or a JSON like {{"topic": {{"broker-a": {{"0": 42}}}}}}; got {text!r}'
    )


def _parse_offsets_json(text: str, name: str) -> dict[QueueKey, int]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option {name} is not valid JSON: {exc}") from None
    shape = f'{name} JSON must look like {{"topic": {{"broker-a": {{"0": 42}}}}}}'
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{shape}; got {text!r}")
    out: dict[QueueKey, int] = {}
    for topic, brokers in data.items():
        if not isinstance(brokers, dict):
            raise ConfigError(f"{shape}; topic {topic!r} maps to {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ConfigError(f"{shape}; broker {broker!r} maps to {queues!r}")
            for qid, offset in queues.items():
                if not re.fullmatch(r"\d+", str(qid)):
                    raise ConfigError(f"{shape}; queue id {qid!r} is not a number")
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ConfigError(
                        f"{shape}; offset {offset!r} of {topic}/{broker}/{qid} must be an "
                        "integer >= 0, or -2 (earliest) or -1 (latest)"
                    )
                out[(topic, broker, int(qid))] = offset
    return out


# ---------------------------------------------------------------------- offsets
def flatten(offsets: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[QueueKey, int]:
    """The checkpointed nested form -> ``{(topic, broker, queue id): offset}``."""
    return {
        (topic, broker, int(qid)): int(offset)
        for topic, brokers in offsets.items()
        for broker, queues in brokers.items()
        for qid, offset in queues.items()
    }


def nest(flat: Mapping[QueueKey, int]) -> Offsets:
    """``flatten``'s inverse, sorted so equal offsets serialise equally."""
    out: Offsets = {}
    for topic, broker, qid in sorted(flat):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = flat[(topic, broker, qid)]
    return out


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[QueueRange]:
    """One range per queue of ``end`` that has messages after its start.

    A queue missing from ``start`` (found after the start was fixed) is read from offset 0:
    a new queue's messages are all new (the reader reports data loss if retention already
    removed some).
    """
    ranges = []
    for key in sorted(end):
        begin = start.get(key, 0)
        stop = end[key]
        if stop > begin:
            ranges.append(QueueRange(key[0], key[1], key[2], begin, stop))
    return ranges


def split_ranges(ranges: list[QueueRange], min_partitions: int) -> list[QueueRange]:
    """Split ranges so there are at least about ``min_partitions`` of them (Kafka's rule).

    Each range gets ``max(1, round(size / total * min_partitions))`` parts of near-equal
    size. The parts cover each range exactly, without overlap.
    """
    total = sum(r.size for r in ranges)
    if min_partitions <= len(ranges) or total == 0:
        return ranges
    out: list[QueueRange] = []
    for r in ranges:
        parts = min(r.size, max(1, round(r.size / total * min_partitions)))
        base, extra = divmod(r.size, parts)
        begin = r.start
        for i in range(parts):
            stop = begin + base + (1 if i < extra else 0)
            out.append(QueueRange(r.topic, r.broker_name, r.queue_id, begin, stop))
            begin = stop
        assert begin == r.end
    return out


def pack_ranges(ranges: list[QueueRange], rows_per_partition: int) -> list[list[QueueRange]]:
    """Ranges grouped into partitions: one of ``rows_per_partition`` messages or more stays
    alone; smaller ones are packed together, in order, until a group reaches that size (the
    big ones come first).

    For micro-batches: a Spark task costs tens of milliseconds however few rows it reads, so
    a micro-batch of a few hundred messages over many queues would pay that once per queue.
    Deterministic, as a replayed batch must be split the same way.
    """
    groups: list[list[QueueRange]] = []
    small: list[QueueRange] = []
    rows = 0
    for r in ranges:
        if r.size >= rows_per_partition:
            groups.append([r])
            continue
        small.append(r)
        rows += r.size
        if rows >= rows_per_partition:
            groups.append(small)
            small, rows = [], 0
    if small:
        groups.append(small)
    return groups


def cap_offsets(
    start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_messages: int
) -> dict[QueueKey, int]:
    """End offsets that admit at most ``max_messages`` after ``start`` (admission control).

    The budget is split over the queues in proportion to their backlog (Kafka's
    ``maxOffsetsPerTrigger``); rounding leftovers go to the largest backlogs first. When the
    budget is smaller than the number of queues with a backlog, the largest backlogs get one
    message each. Never moves a queue backwards, never past ``latest``.
    """
    backlog = {k: max(0, latest[k] - start.get(k, 0)) for k in latest}
    total = sum(backlog.values())
    end = {k: max(latest[k], start.get(k, 0)) for k in latest}
    if total <= max_messages:
        return end
    grant = {k: (b * max_messages) // total for k, b in backlog.items()}
    left = max_messages - sum(grant.values())
    for k in sorted(backlog, key=lambda q: (-backlog[q], q)):
        if left <= 0:
            break
        if grant[k] < backlog[k]:
            grant[k] += 1
            left -= 1
    for k, g in grant.items():
        if backlog[k]:
            end[k] = start.get(k, 0) + g
    return end


def topics_of(keys: Iterable[QueueKey]) -> list[str]:
    return sorted({k[0] for k in keys})
