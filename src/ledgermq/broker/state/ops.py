"""The replicated metadata operations: one frozen dataclass per op, and their on-disk format.

A metadata change is one ledger entry on the METADATA channel (``storage.commitlog``), written
by a master (``metadata_writer``, the topic manager, the services) and applied by every replica
in log order (``metadata.BrokerMetadata.apply``). The bytes stay in the log and are replayed
after every restart, so they are an on-disk format: this module is its only reader and writer.

Format: one compact JSON object, keys sorted, ASCII only::

    {"offsets":[["orders-consumers","orders",3,123456]],"op":"commit_offsets","v":1}

``op`` names the kind (``NAME`` of each class below), ``v`` the format version, every other key
is a field of that kind, all required, no others allowed. Versions:

- **0**: no ``v`` key; what release 0.1.0 wrote (``tests/fixtures/metadata_ops_v0.json``).
- **1**: the same objects with ``"v":1``; written from this release on. Version 0 and version 1
  of an op decode to the same dataclass. Release 0.1.0 ignores keys it does not use, so it
  applies version 1 ops too (docs/operations/upgrades.md).

A version above ``OP_VERSION`` (a newer release's format) is refused with
``UnknownOpVersionError``, which names it. A change of an op's fields or meaning, or a new op
kind, takes a new version (and the gate of upgrades.md rule 3); ``decode_op`` keeps reading
every older one.

``decode_op`` checks everything ``apply`` relies on (the kind, the field names, each field's
type, non-empty topic and group names, every POP and timer record, every transaction action) and
raises ``MetadataOpError`` for anything else, so applying a decoded op cannot fail on its
content. It checks types, not ranges: a queue id or offset is any integer, as release 0.1.0
stored whatever its doors let through, and refusing now what an older replica applied would
make replicas of two versions differ. The dispatcher quarantines an op that does not decode,
the same way on every replica of a version (``storage.dispatcher``).

Cost: these ops are on the path of every offset commit and POP ack. Encoding is one dict and
one ``json`` call (the encoder is made once); decoding is one ``json.loads`` and one pass over
the fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias

from ledgermq.broker.pop import PopSettings, decode_record, encode_record
from ledgermq.broker.state.group_config import SubscriptionGroupConfig
from ledgermq.broker.timers import decode_timer_record, encode_timer_record
from ledgermq.errors import LedgerMQError
from ledgermq.wire.route import TopicConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.broker.pop import PopRecord
    from ledgermq.broker.timers import TimerRecord

__all__ = [
    "CHECK",
    "COMMIT",
    "DISCARD",
    "OP_VERSION",
    "ROLLBACK",
    "SETTLING_ACTIONS",
    "CommitOffsetsOp",
    "DelayOffsetsOp",
    "DeleteGroupOp",
    "DeleteTopicOp",
    "MetadataOp",
    "MetadataOpError",
    "OffsetCommit",
    "PopKey",
    "PopOp",
    "PutGroupOp",
    "PutTopicOp",
    "TimerOp",
    "TxnItem",
    "TxnOp",
    "UnknownOpVersionError",
    "decode_op",
]

OP_VERSION: Final = 1
"""The format version this release writes (``"v"``); it reads every version up to it."""

PopKey: TypeAlias = tuple[str, str, int]
"""(consumer group, topic, queue id): where a POP record belongs (``PopTable``'s key)."""

COMMIT: Final = "commit"
ROLLBACK: Final = "rollback"
DISCARD: Final = "discard"
"""Checked ``transactionCheckMax`` times with no answer (or gone from the store): dropped, never
delivered, as RocketMQ does."""
CHECK: Final = "check"
"""One more check-back was sent (the count, not a settlement)."""
SETTLING_ACTIONS: Final = frozenset({COMMIT, ROLLBACK, DISCARD})
"""A transaction op's actions that settle a half message (``TransactionTable``)."""

_TXN_ACTIONS: Final = frozenset({CHECK, *SETTLING_ACTIONS})

_dumps: Final = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
"""``json.dumps`` with these options builds an encoder per call; this one is built once."""
_loads: Final = json.JSONDecoder().decode
"""``json.loads`` of bytes first guesses their encoding in Python (0.9 us of a 2.3 us decode
of one offset commit); ops are UTF-8 (ASCII, in fact), decoded here at C speed."""


class MetadataOpError(ValueError):
    """A metadata entry that is not an op this release applies (not JSON, an unknown kind, a
    missing, unknown or mistyped field): the same on every replica of this release, so the
    dispatcher quarantines its entry (``storage.dispatcher``)."""


class UnknownOpVersionError(MetadataOpError):
    """An op of a format version newer than this release reads: written by a newer release
    (upgrades.md rule 3 gates that during a rolling upgrade); quarantined here, naming it."""

    def __init__(self, version: int) -> None:
        super().__init__(
            f"metadata op format version {version} is newer than this release reads "
            f"(0 to {OP_VERSION}): it was written by a newer release; upgrade this replica "
            "(docs/operations/upgrades.md)"
        )
        self.version = version


def _encode(name: str, fields: dict[str, object]) -> bytes:
    fields["op"] = name
    fields["v"] = OP_VERSION
    return _dumps(fields).encode()


# ---------------------------------------------------------------------- the ops
@dataclass(frozen=True, slots=True)
class PutTopicOp:
    """Create or change a topic (``UPDATE_AND_CREATE_TOPIC``, auto-creation)."""

    NAME: ClassVar[str] = "put_topic"
    config: TopicConfig

    def encode(self) -> bytes:
        return _encode(self.NAME, {"topic": self.config.to_object()})


@dataclass(frozen=True, slots=True)
class DeleteTopicOp:
    """Delete a topic, with its consumer offsets and POP queues."""

    NAME: ClassVar[str] = "delete_topic"
    topic: str

    def encode(self) -> bytes:
        return _encode(self.NAME, {"topic": self.topic})


@dataclass(frozen=True, slots=True)
class PutGroupOp:
    """Create or change a subscription group."""

    NAME: ClassVar[str] = "put_group"
    config: SubscriptionGroupConfig

    def encode(self) -> bytes:
        return _encode(self.NAME, {"group": self.config.to_object()})


@dataclass(frozen=True, slots=True)
class DeleteGroupOp:
    """Delete a subscription group, with its consumer offsets and POP queues."""

    NAME: ClassVar[str] = "delete_group"
    group: str

    def encode(self) -> bytes:
        return _encode(self.NAME, {"group": self.group})


OffsetCommit: TypeAlias = tuple[str, str, int, int]
"""(consumer group, topic, queue id, committed offset: the next message to consume)."""


@dataclass(frozen=True, slots=True)
class CommitOffsetsOp:
    """Consumer offsets, in the order they apply (a later one for a queue wins). The commonest
    op: the metadata writer batches every offset staged meanwhile into one."""

    NAME: ClassVar[str] = "commit_offsets"
    offsets: tuple[OffsetCommit, ...]

    def encode(self) -> bytes:
        return _encode(self.NAME, {"offsets": self.offsets})


@dataclass(frozen=True, slots=True)
class DelayOffsetsOp:
    """Progress of the delay-level queues: level -> next queue offset to deliver."""

    NAME: ClassVar[str] = "delay_offsets"
    offsets: Mapping[int, int]

    def encode(self) -> bytes:
        return _encode(self.NAME, {"offsets": {str(k): v for k, v in self.offsets.items()}})


@dataclass(frozen=True, slots=True)
class PopOp:
    """Records applied to one POP queue (``pop_table``), with the queue's settings: they travel
    in every op so that replicas never read them from anywhere else (an op with no records
    only reconfigures the queue)."""

    NAME: ClassVar[str] = "pop"
    key: PopKey
    """(consumer group, topic, queue id)."""
    settings: PopSettings
    records: tuple[PopRecord, ...]

    def encode(self) -> bytes:
        group, topic, queue_id = self.key
        return _encode(
            self.NAME,
            {
                "group": group,
                "topic": topic,
                "queue": queue_id,
                "fifo": self.settings.fifo,
                "maxAttempts": self.settings.max_attempts,
                "records": [encode_record(r) for r in self.records],
            },
        )


@dataclass(frozen=True, slots=True)
class TimerOp:
    """Timer records decided by the master (``Firing``, ``Recalled``, ``Fired``; ``timer_table``
    says which entries schedule a timer)."""

    NAME: ClassVar[str] = "timer"
    records: tuple[TimerRecord, ...]

    def encode(self) -> bytes:
        return _encode(self.NAME, {"records": [encode_timer_record(r) for r in self.records]})


TxnItem: TypeAlias = tuple[int, str]
"""(half queue offset, action: ``transactions.COMMIT`` / ``ROLLBACK`` / ``DISCARD`` / ``CHECK``)."""


@dataclass(frozen=True, slots=True)
class TxnOp:
    """Transaction settlements and check-backs, in order (``transactions``)."""

    NAME: ClassVar[str] = "txn"
    items: tuple[TxnItem, ...]

    def encode(self) -> bytes:
        return _encode(self.NAME, {"items": self.items})


MetadataOp: TypeAlias = (
    PutTopicOp
    | DeleteTopicOp
    | PutGroupOp
    | DeleteGroupOp
    | CommitOffsetsOp
    | DelayOffsetsOp
    | PopOp
    | TimerOp
    | TxnOp
)


# ---------------------------------------------------------------------- decoding
def decode_op(body: bytes) -> MetadataOp:
    """The op of a metadata entry, of any version up to ``OP_VERSION``. Raises
    ``UnknownOpVersionError`` for a newer version, ``MetadataOpError`` for anything else that
    is not an op (the message names what is wrong)."""
    try:
        value = _loads(body.decode())
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep
        raise MetadataOpError(f"a metadata op is a JSON object: {exc}") from None
    if type(value) is not dict:
        raise MetadataOpError(f"a metadata op is a JSON object, not {type(value).__name__}")
    version = value.pop("v", None)  # None: version 0, written before there was a "v"
    if version is not None and (type(version) is not int or not 1 <= version <= OP_VERSION):
        if type(version) is int and version > OP_VERSION:
            raise UnknownOpVersionError(version)
        raise MetadataOpError(
            f"a metadata op's v is an integer from 1 to {OP_VERSION}, got {version!r:.80}"
        )
    name = value.pop("op", None)
    kind = _KINDS.get(name) if type(name) is str else None
    if kind is None:
        raise MetadataOpError(f"unknown metadata op {name!r:.80}")
    fields, decode = kind
    if value.keys() != fields:
        raise MetadataOpError(f"a {name} op has the fields {sorted(fields)}, got {sorted(value)}")
    try:
        return decode(value)
    except MetadataOpError:
        raise
    except (ValueError, TypeError, KeyError, LedgerMQError) as exc:
        raise MetadataOpError(f"a {name} op is malformed: {exc}") from None


def _text(value: object, what: str) -> str:
    if type(value) is not str or not value:
        raise MetadataOpError(f"{what} is a non-empty string, got {value!r:.80}")
    return value


def _integer(value: object, what: str) -> int:
    if type(value) is not int:
        raise MetadataOpError(f"{what} is an integer, got {value!r:.80}")
    return value


def _list(value: object, what: str) -> list[Any]:
    if type(value) is not list:
        raise MetadataOpError(f"{what} is a list, got {value!r:.80}")
    return value


def _put_topic(fields: dict[str, Any]) -> PutTopicOp:
    config = TopicConfig.from_object(fields["topic"], "topic")
    _text(config.topic_name, "topic.topicName")
    return PutTopicOp(config)


def _delete_topic(fields: dict[str, Any]) -> DeleteTopicOp:
    return DeleteTopicOp(_text(fields["topic"], "topic"))


def _put_group(fields: dict[str, Any]) -> PutGroupOp:
    group = fields["group"]
    if type(group) is not dict:
        raise MetadataOpError(f"group is a JSON object, got {group!r:.80}")
    return PutGroupOp(SubscriptionGroupConfig.from_object(group))


def _delete_group(fields: dict[str, Any]) -> DeleteGroupOp:
    return DeleteGroupOp(_text(fields["group"], "group"))


def _commit_offsets(fields: dict[str, Any]) -> CommitOffsetsOp:
    offsets: list[OffsetCommit] = []
    for item in _list(fields["offsets"], "offsets"):
        # on the path of every offset commit: one unpacking and one test per item (a JSON
        # string or object of four also unpacks, into strings, which the int tests refuse)
        try:
            group, topic, queue_id, offset = item
        except (ValueError, TypeError):
            group = None
        if (
            type(group) is not str
            or type(topic) is not str
            or type(queue_id) is not int
            or type(offset) is not int
            or not group
            or not topic
        ):
            raise MetadataOpError(
                f"an offset is [group, topic, queue id, offset] (names non-empty), got {item!r:.80}"
            )
        offsets.append((group, topic, queue_id, offset))
    return CommitOffsetsOp(tuple(offsets))


def _delay_offsets(fields: dict[str, Any]) -> DelayOffsetsOp:
    value = fields["offsets"]
    if type(value) is not dict:
        raise MetadataOpError(f"offsets is an object of level -> offset, got {value!r:.80}")
    offsets: dict[int, int] = {}
    for level, offset in value.items():
        offsets[int(level)] = _integer(offset, f"the offset of delay level {level}")
    return DelayOffsetsOp(offsets)


def _pop(fields: dict[str, Any]) -> PopOp:
    fifo = fields["fifo"]
    if type(fifo) is not bool:
        raise MetadataOpError(f"fifo is true or false, got {fifo!r:.80}")
    records = []
    for record in _list(fields["records"], "records"):
        if type(record) is not dict:
            raise MetadataOpError(f"a POP record is a JSON object, got {record!r:.80}")
        records.append(decode_record(record))
    return PopOp(
        (
            _text(fields["group"], "group"),
            _text(fields["topic"], "topic"),
            _integer(fields["queue"], "queue"),
        ),
        PopSettings(fifo, _integer(fields["maxAttempts"], "maxAttempts")),
        tuple(records),
    )


def _timer(fields: dict[str, Any]) -> TimerOp:
    records = []
    for record in _list(fields["records"], "records"):
        if type(record) is not dict:
            raise MetadataOpError(f"a timer record is a JSON object, got {record!r:.80}")
        records.append(decode_timer_record(record))
    return TimerOp(tuple(records))


def _txn(fields: dict[str, Any]) -> TxnOp:
    items: list[TxnItem] = []
    for item in _list(fields["items"], "items"):
        if (
            type(item) is list
            and len(item) == 2
            and type(item[0]) is int
            and item[1] in _TXN_ACTIONS
        ):
            items.append((item[0], item[1]))
        else:
            raise MetadataOpError(
                f"a transaction item is [half offset, one of {sorted(_TXN_ACTIONS)}], "
                f"got {item!r:.80}"
            )
    return TxnOp(tuple(items))


_KINDS: Final[dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], MetadataOp]]]] = {
    PutTopicOp.NAME: (frozenset({"topic"}), _put_topic),
    DeleteTopicOp.NAME: (frozenset({"topic"}), _delete_topic),
    PutGroupOp.NAME: (frozenset({"group"}), _put_group),
    DeleteGroupOp.NAME: (frozenset({"group"}), _delete_group),
    CommitOffsetsOp.NAME: (frozenset({"offsets"}), _commit_offsets),
    DelayOffsetsOp.NAME: (frozenset({"offsets"}), _delay_offsets),
    PopOp.NAME: (
        frozenset({"group", "topic", "queue", "fifo", "maxAttempts", "records"}),
        _pop,
    ),
    TimerOp.NAME: (frozenset({"records"}), _timer),
    TxnOp.NAME: (frozenset({"items"}), _txn),
}
"""Op name -> (its fields besides ``op`` and ``v``, its decoder), for every version."""
