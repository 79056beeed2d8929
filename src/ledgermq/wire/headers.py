"""Typed remoting request headers (RocketMQ's ``*RequestHeader`` classes), parsed once.

A request's extFields are read here, once, into a frozen dataclass; the broker's door computes
what the request needs from the ACL from that object (``security.acl.header_needs``) and hands
the same object to the handler, so the check and the work cannot read different fields
(issue 25 item 2: a send was checked on one field and stored by another). Our clients build the
same headers with ``to_ext_fields``, so the field names are written in one place.

``parse_header(code, fields)`` is the registry: the header class of each code it knows
(``HEADER_TYPES``), or None for a code whose header is parsed elsewhere (sends:
``ledgermq.wire.ext_fields``; bodies: heartbeats and locks) or not yet typed. A missing or
malformed field is a ``BadRequestError`` naming it, as the handlers answered before.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from dataclasses import fields as fields_of
from typing import TYPE_CHECKING, ClassVar, Final, Protocol, Self, TypeVar, cast

from ledgermq.errors import BadRequestError
from ledgermq.wire.codes import MQRequestCode, MQResponseCode
from ledgermq.wire.ext_fields import ext_bool, ext_int, ext_str
from ledgermq.wire.names import group_name_problem, topic_name_problem
from ledgermq.wire.route import PERM_READ, PERM_WRITE

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "HEADER_TYPES",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "CheckTransactionStateRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMinOffsetRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "GetQuarantinedEntriesRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "Header",
    "HeaderWriter",
    "NotifyConsumerIdsChangedRequestHeader",
    "PopMessageRequestHeader",
    "PullMessageRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryMessageRequestHeader",
    "RecallMessageRequestHeader",
    "ReplicaAddRequestHeader",
    "ReplicaBackupRequestHeader",
    "ReplicaRemoveRequestHeader",
    "SearchOffsetRequestHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "TransferLeadershipRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
    "check_name",
    "parse_header",
]


class Header(Protocol):
    """A typed request header: its request code, read from and written to extFields."""

    CODE: ClassVar[int]

    def to_ext_fields(self) -> dict[str, str]: ...


class HeaderWriter(Protocol):
    """A header's extFields from its attributes (``_Fields.writer``)."""

    def __call__(self, *values: object) -> dict[str, str]: ...


def _optional_int(fields: Mapping[str, str], name: str) -> int | None:
    """An integer field that may be absent (absent or empty: None), else checked as
    ``ext_int`` checks it."""
    value = fields.get(name)
    return None if value is None or value == "" else ext_int(fields, name)


def _camel(name: str) -> str:
    """``consumer_group`` -> ``consumerGroup``: RocketMQ's name of a header field."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _required_text(name: str, *, nonempty: bool = False, rule: str = "") -> str:
    """A required text field named ``name`` in extFields (not the camelCase of the attribute);
    ``nonempty``: an empty value is as absent; ``rule``: ``topic`` or ``group``, the naming
    rule its value is checked with, or ``any``, none (else the attribute's name tells,
    ``_name_rule``)."""
    return cast("str", field(metadata={"ext": name, "nonempty": nonempty, "rule": rule}))


_NAME_PROBLEMS: Final = {"topic": topic_name_problem, "group": group_name_problem}
"""The naming rules (``wire.names``) a field may be checked with, by name."""
_TOPIC_ATTRS: Final = frozenset({"topic"})
_GROUP_ATTRS: Final = frozenset({"consumer_group", "group", "group_name"})
"""Attributes checked as topic / group names without saying so: every header's topic and
consumer group is a name the broker may store, index, or build a directory or a
``%RETRY%<group>`` topic from. Producer groups are not (RocketMQ's broker does not check them
either): they are never stored."""


def _name_rule(attr: str, declared: str) -> str:
    """The naming rule of attribute ``attr`` (``declared`` wins): topic, group or none
    (declared ``any``: a name only looked up, never stored, such as a NameServer's route
    lookup, which answers a malformed topic as one that does not exist)."""
    if declared:
        return "" if declared == "any" else declared
    if attr in _TOPIC_ATTRS:
        return "topic"
    return "group" if attr in _GROUP_ATTRS else ""


def check_name(rule: str, value: str) -> None:
    """``BadRequestError`` with INVALID_PARAMETER (the code the broker's services answer a bad
    name with, ``broker.names``) and the broken rule as its message, unless ``value`` keeps
    the naming ``rule`` (``topic`` or ``group``)."""
    problem = _NAME_PROBLEMS[rule](value)
    if problem is not None:
        raise BadRequestError(problem, MQResponseCode.INVALID_PARAMETER)


def _optional_text(*, empty_is_none: bool = False, absent_as_empty: bool = False) -> str | None:
    """An optional text field (None when absent); ``empty_is_none``: read as absent when
    empty; ``absent_as_empty``: written empty when absent."""
    metadata = {"empty_is_none": empty_is_none, "absent_as_empty": absent_as_empty}
    return field(default=None, metadata=metadata)


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    """How one attribute of a header is read from and written to extFields. The rule follows
    the attribute's type: ``str`` required (or its default when absent), ``str | None`` as
    sent, ``int`` required (or its default when absent or empty) and in int64, ``int | None``
    absent or empty as None, ``bool`` Java's ``true`` / ``false`` or the C++ client's 1 / 0.
    A text field with a naming ``rule`` (a topic, a group) is checked with it once the header's
    fields are read (``check``), so no handler sees a name that breaks the rules; absent (None)
    or left at its default, it is not a name the request gives."""

    attr: str
    key: str
    kind: str
    default: object
    empty_is_none: bool
    absent_as_empty: bool
    nonempty: bool
    rule: str = ""
    """``topic``, ``group`` or empty: the naming rule the value keeps (``wire.names``)."""

    def check(self, value: object) -> None:
        """Check ``value`` (as read) with the field's naming rule, if it has one."""
        if self.rule and value is not None and value != self.default:
            check_name(self.rule, cast("str", value))

    def read(self, fields: Mapping[str, str]) -> object:
        key, kind, default = self.key, self.kind, self.default
        if kind == "str":
            if self.nonempty:
                value = fields.get(key)
                if not value:
                    raise BadRequestError(f"the request header lacks the field {key!r}")
                return value
            return ext_str(fields, key) if default is MISSING else fields.get(key, default)
        if kind == "str | None":
            text = fields.get(key)
            return (text or None) if self.empty_is_none else text
        if kind == "int":
            return ext_int(fields, key) if default is MISSING else ext_int(fields, key, default)  # type: ignore[arg-type]
        if kind == "int | None":
            return _optional_int(fields, key)
        return ext_bool(fields, key, default=bool(default) if default is not MISSING else False)

    def write(self, fields: dict[str, str], value: object) -> None:
        if value is None:
            if self.absent_as_empty:
                fields[self.key] = ""
        elif isinstance(value, bool):
            fields[self.key] = "true" if value else "false"
        else:
            fields[self.key] = str(value)


_KINDS: Final = frozenset({"str", "str | None", "int", "int | None", "bool"})


class _Fields:
    """``from_ext_fields`` and ``to_ext_fields`` of a header dataclass, from its fields
    (``_FieldSpec``): each header declares its fields once and no reader or writer repeats
    them."""

    __slots__ = ()
    _SPECS: ClassVar[dict[type, tuple[_FieldSpec, ...]]] = {}
    _NAMED: ClassVar[dict[type, tuple[int, ...]]] = {}
    """The positions of the fields with a naming rule, by class."""
    _WRITERS: ClassVar[dict[tuple[type, tuple[tuple[str, object], ...]], HeaderWriter]] = {}

    @classmethod
    def _specs(cls) -> tuple[_FieldSpec, ...]:
        specs = _Fields._SPECS.get(cls)
        if specs is None:
            made = []
            for item in fields_of(cls):  # type: ignore[arg-type]
                kind = str(item.type)
                if kind not in _KINDS:
                    raise TypeError(f"{cls.__name__}.{item.name}: no extFields rule for {kind}")
                meta = item.metadata
                rule = _name_rule(item.name, meta.get("rule", "")) if "str" in kind else ""
                made.append(
                    _FieldSpec(
                        item.name,
                        meta.get("ext") or _camel(item.name),
                        kind,
                        item.default,
                        bool(meta.get("empty_is_none")),
                        bool(meta.get("absent_as_empty")),
                        bool(meta.get("nonempty")),
                        rule,
                    )
                )
            specs = _Fields._SPECS[cls] = tuple(made)
            _Fields._NAMED[cls] = tuple(i for i, spec in enumerate(made) if spec.rule)
        return specs

    @classmethod
    def name_rules(cls) -> dict[str, str]:
        """Attribute -> the naming rule (``topic``, ``group``) its value is read with."""
        return {spec.attr: spec.rule for spec in cls._specs() if spec.rule}

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """The header ``fields`` hold; ``BadRequestError`` names a field that is missing or
        not what its type needs."""
        specs = cls._specs()
        values = [spec.read(fields) for spec in specs]
        for index in _Fields._NAMED[cls]:  # then the names (a pull has two, a send one)
            specs[index].check(values[index])
        return cls(*values)

    @classmethod
    def writer(cls, **fixed: object) -> HeaderWriter:
        """A function that returns the extFields of a header, as ``to_ext_fields`` would,
        without making the header: for a hot path (the producer's send header) that builds a
        header per request. Its arguments are the header's attributes, positional, in the
        dataclass's order, less the ``fixed`` ones, whose text is written into the function.
        Generated once per class and ``fixed`` from the fields' declarations
        (``_writer_source``), so the field names are still written in one place;
        tests/wire/test_headers.py checks it agrees with ``to_ext_fields_slowly``."""
        key = (cls, tuple(sorted(fixed.items())))
        writer = _Fields._WRITERS.get(key)
        if writer is None:
            unknown = fixed.keys() - {spec.attr for spec in cls._specs()}
            if unknown:
                raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
            namespace: dict[str, object] = {}
            exec(_writer_source(cls._specs(), fixed), namespace)  # noqa: S102 - our own source
            writer = _Fields._WRITERS[key] = cast("HeaderWriter", namespace["write"])
        return writer

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields of this header (an absent optional field is left out)."""
        return self.writer()(*[getattr(self, spec.attr) for spec in self._specs()])

    def to_ext_fields_slowly(self) -> dict[str, str]:
        """``to_ext_fields`` field by field (``_FieldSpec.write``): the reference the
        generated ``writer`` is tested against."""
        written: dict[str, str] = {}
        for spec in self._specs():
            spec.write(written, getattr(self, spec.attr))
        return written


def _writer_source(specs: tuple[_FieldSpec, ...], fixed: Mapping[str, object]) -> str:
    """The source of ``_Fields.writer``: a dict literal of the fields always written (a fixed
    one as its text), then one test per optional field (None is left out, or written
    empty)."""
    always: list[str] = []
    optional: list[str] = []
    arguments: list[str] = []
    for index, spec in enumerate(specs):
        if spec.attr in fixed:
            written: dict[str, str] = {}
            spec.write(written, fixed[spec.attr])
            always.extend(f"{key!r}: {text!r}" for key, text in written.items())
            continue
        value = f"v{index}"
        arguments.append(value)
        text = value if spec.kind.startswith("str") else f"str({value})"
        if spec.kind == "bool":
            text = f'("true" if {value} else "false")'
        if spec.kind.endswith("| None"):
            absent = f"    else:\n        d[{spec.key!r}] = ''\n" if spec.absent_as_empty else ""
            optional.append(
                f"    if {value} is not None:\n        d[{spec.key!r}] = {text}\n{absent}"
            )
        else:
            always.append(f"{spec.key!r}: {text}")
    return (
        f"def write({', '.join(arguments)}):\n    d = {{{', '.join(always)}}}\n"
        + "".join(optional)
        + "    return d\n"
    )


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(_Fields):
    """PULL_MESSAGE (11). Defaults are the broker's for a field a client leaves out."""

    CODE: ClassVar[int] = MQRequestCode.PULL_MESSAGE

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = -1
    suspend_timeout_millis: int = 15_000
    subscription: str | None = None
    sub_version: int | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    """None: the broker's own bound."""


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(_Fields):
    """QUERY_CONSUMER_OFFSET (14): a group's committed offset of one queue."""

    CODE: ClassVar[int] = MQRequestCode.QUERY_CONSUMER_OFFSET

    consumer_group: str
    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(_Fields):
    """UPDATE_CONSUMER_OFFSET (15): commit a group's offset of one queue."""

    CODE: ClassVar[int] = MQRequestCode.UPDATE_CONSUMER_OFFSET

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(frozen=True, slots=True)
class _QueueHeader(_Fields):
    """A request about one queue of a topic (its offsets, its earliest store time)."""

    topic: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(_QueueHeader):
    """GET_MAX_OFFSET (30)."""

    CODE: ClassVar[int] = MQRequestCode.GET_MAX_OFFSET


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(_QueueHeader):
    """GET_MIN_OFFSET (31)."""

    CODE: ClassVar[int] = MQRequestCode.GET_MIN_OFFSET


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(_QueueHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    CODE: ClassVar[int] = MQRequestCode.GET_EARLIEST_MSG_STORETIME


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(_Fields):
    """SEARCH_OFFSET_BY_TIMESTAMP (29): a queue's first offset stored at or after a time."""

    CODE: ClassVar[int] = MQRequestCode.SEARCH_OFFSET_BY_TIMESTAMP

    topic: str
    queue_id: int
    timestamp: int
    """Milliseconds since the epoch."""


@dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader(_Fields):
    """RECALL_MESSAGE (370, RocketMQ 5.3): recall a timer message by its handle."""

    CODE: ClassVar[int] = MQRequestCode.RECALL_MESSAGE

    topic: str
    recall_handle: str
    producer_group: str | None = None
    """Sent by RocketMQ's clients; the broker does not need it."""


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(_Fields):
    """GET_CONSUMER_CONNECTION_LIST (203): a group's remoting clients."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_CONNECTION_LIST

    consumer_group: str


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(_Fields):
    """GET_CONSUMER_RUNNING_INFO (307): one client's own view, asked through the broker."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_RUNNING_INFO

    consumer_group: str
    client_id: str
    jstack_enable: str = "false"
    """Passed on to the client as received (Java's boolean text)."""


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader(_Fields):
    """POP_MESSAGE (200050): up to ``max_msg_nums`` messages, invisible for a while."""

    CODE: ClassVar[int] = MQRequestCode.POP_MESSAGE

    consumer_group: str
    topic: str
    max_msg_nums: int
    invisible_time: int
    """Milliseconds."""
    queue_id: int = -1
    """-1: any queue."""
    poll_time: int = 0
    """Milliseconds the broker may wait for a message."""
    born_time: int | None = None
    init_mode: int | None = None
    exp_type: str | None = None
    exp: str | None = None
    """None or empty: every message (``*``)."""
    order: bool = False


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader(_Fields):
    """ACK_MESSAGE (200051): the delivery ``extra_info`` (its receipt handle) is done."""

    CODE: ClassVar[int] = MQRequestCode.ACK_MESSAGE

    consumer_group: str
    topic: str
    extra_info: str
    queue_id: int | None = None
    offset: int | None = None
    """Sent by RocketMQ's clients; the handle is the whole truth here."""


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader(_Fields):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the delivery ``extra_info`` names becomes
    invisible for ``invisible_time`` ms from now."""

    CODE: ClassVar[int] = MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME

    consumer_group: str
    topic: str
    extra_info: str
    invisible_time: int
    queue_id: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(_Fields):
    """UNREGISTER_CLIENT (35): a client leaves, as the producer of ``producer_group`` and the
    consumer of ``consumer_group`` (either may be absent: empty is read as absent)."""

    CODE: ClassVar[int] = MQRequestCode.UNREGISTER_CLIENT

    client_id: str = _required_text("clientID", nonempty=True)
    producer_group: str | None = _optional_text(empty_is_none=True, absent_as_empty=True)
    consumer_group: str | None = _optional_text(empty_is_none=True, absent_as_empty=True)


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(_Fields):
    """GET_CONSUMER_LIST_BY_GROUP (38): the client ids of a group's consumers."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_LIST_BY_GROUP

    consumer_group: str = ""
    """Absent: empty, a group no consumer is in (answered so)."""


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(_Fields):
    """GET_TOPIC_STATS_INFO (202): a topic's queues and their offsets."""

    CODE: ClassVar[int] = MQRequestCode.GET_TOPIC_STATS_INFO

    topic: str


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(_Fields):
    """GET_CONSUME_STATS (208): a group's progress, on one topic or all it consumes."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUME_STATS

    consumer_group: str
    topic: str | None = _optional_text(empty_is_none=True)
    """None (absent or empty): every topic of the group."""


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(_Fields):
    """QUERY_MESSAGE (12): a topic's messages by key (or unique id), newest first."""

    CODE: ClassVar[int] = MQRequestCode.QUERY_MESSAGE

    topic: str
    key: str
    max_num: int = 32
    begin_timestamp: int = 0
    end_timestamp: int = 1 << 62


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(_Fields):
    """SEND_MESSAGE (10): a send with RocketMQ's long field names (and SEND_MESSAGE_V2's once
    its one letters are renamed, ``wire.ext_fields.expand_send_v2_fields``). Defaults are the
    broker's for a field a client leaves out. Not in ``HEADER_TYPES``: the door reads sends
    through ``broker.remoting.send.parse_send_request``, which reads this header. RocketMQ's
    ``unitMode`` and ``brokerName`` are sent by its clients and read by no broker here."""

    CODE: ClassVar[int] = MQRequestCode.SEND_MESSAGE

    topic: str
    producer_group: str = ""
    default_topic: str | None = _optional_text(empty_is_none=True)
    """The template a missing topic is created from (None: the send creates none)."""
    default_topic_queue_nums: int = 4
    queue_id: int = -1
    """-1: the broker picks the queue."""
    sys_flag: int = 0
    born_timestamp: int = 0
    """Milliseconds since the epoch, by the producer's clock."""
    flag: int = 0
    properties: str = ""
    """RocketMQ's property string (empty for a batch: each message carries its own)."""
    reconsume_times: int = 0
    max_reconsume_times: int | None = None
    batch: bool = False


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(_Fields):
    """END_TRANSACTION (37): commit or roll back the half message stored at
    ``commit_log_offset``. Clients send it one-way (``broker.remoting.transactions``)."""

    CODE: ClassVar[int] = MQRequestCode.END_TRANSACTION

    commit_or_rollback: int
    """8 commit, 12 rollback, 0 unknown (RocketMQ's ``MessageSysFlag.TRANSACTION_*_TYPE``);
    the handler refuses any other value."""
    commit_log_offset: int
    """Where the half message is stored."""
    producer_group: str = ""
    tran_state_table_offset: int | None = None
    """The half message's offset in the half queue (absent or empty: None)."""
    from_transaction_check: bool = False
    """True when the producer answers the broker's check-back."""
    msg_id: str | None = _optional_text(empty_is_none=True)
    transaction_id: str | None = None
    topic: str | None = _optional_text(empty_is_none=True)
    """RocketMQ 5's: the half message's real topic, which the ACL grants PUB on and the
    handler checks against the half message (None: not given, checked once read)."""


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(_Fields):
    """CHECK_TRANSACTION_STATE (39): the broker asks a producer how a transaction ended, with
    the half message as the body; the producer answers with an END_TRANSACTION that gives the
    offsets back. Sent by the broker, read by the client: not in ``HEADER_TYPES``."""

    CODE: ClassVar[int] = MQRequestCode.CHECK_TRANSACTION_STATE

    tran_state_table_offset: int
    """The half message's offset in the half queue."""
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    topic: str | None = None
    """RocketMQ 5's: the half message's real topic."""
    broker_name: str | None = None
    """RocketMQ 5's: the broker group asking."""


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(_Fields):
    """NOTIFY_CONSUMER_IDS_CHANGED (40): the broker tells a consumer of ``consumer_group`` that
    the group's members changed (rebalance now). Sent by the broker, read by the client: not
    in ``HEADER_TYPES``."""

    CODE: ClassVar[int] = MQRequestCode.NOTIFY_CONSUMER_IDS_CHANGED

    consumer_group: str


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(_Fields):
    """CONSUMER_SEND_MSG_BACK (36): a consumer gives the message stored at ``offset`` back, to
    be redelivered later (``%RETRY%<group>``) or dead-lettered."""

    CODE: ClassVar[int] = MQRequestCode.CONSUMER_SEND_MSG_BACK

    offset: int
    """The message's commit-log offset."""
    group: str
    """The consumer group giving it back."""
    delay_level: int = 0
    """0: the broker's next level for the message; -1: straight to ``%DLQ%<group>``."""
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    """Sent by RocketMQ's clients; the record stored at ``offset`` is the whole truth here."""
    max_reconsume_times: int | None = None
    """None: the group's setting."""


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(_Fields):
    """VIEW_MESSAGE_BY_ID (33): the record stored at ``offset`` (what an offset message id
    names). What it needs from the ACL only the record tells (SUB on its topic)."""

    CODE: ClassVar[int] = MQRequestCode.VIEW_MESSAGE_BY_ID

    offset: int
    """A commit-log offset."""
    topic: str | None = _optional_text(empty_is_none=True)
    """RocketMQ 5's clients may name it; the broker reads the record's own."""


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(_Fields):
    """GET_PRODUCER_CONNECTION_LIST (204): a producer group's remoting clients (admin only:
    producer groups are no resource of the plain ACL)."""

    CODE: ClassVar[int] = MQRequestCode.GET_PRODUCER_CONNECTION_LIST

    producer_group: str


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(_Fields):
    """UPDATE_AND_CREATE_TOPIC (17): create a topic or change its queues (admin)."""

    CODE: ClassVar[int] = MQRequestCode.UPDATE_AND_CREATE_TOPIC

    topic: str
    default_topic: str | None = None
    """Sent by RocketMQ's admin tools; the broker does not need it."""
    read_queue_nums: int = 8
    write_queue_nums: int | None = None
    """None (absent or empty): as many as ``read_queue_nums``."""
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: str = ""
    """RocketMQ 5's attribute changes (``wire.topic_attributes``), parsed by the handler."""


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(_Fields):
    """DELETE_TOPIC_IN_BROKER (215): delete a topic from the broker group (admin)."""

    CODE: ClassVar[int] = MQRequestCode.DELETE_TOPIC_IN_BROKER

    topic: str


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(_Fields):
    """DELETE_SUBSCRIPTIONGROUP (207): delete a consumer group's config (admin)."""

    CODE: ClassVar[int] = MQRequestCode.DELETE_SUBSCRIPTIONGROUP

    group_name: str


@dataclass(frozen=True, slots=True)
class TransferLeadershipRequestHeader(_Fields):
    """TRANSFER_LEADERSHIP (1000, ours): hand the group's ledger leadership to a replica."""

    CODE: ClassVar[int] = MQRequestCode.TRANSFER_LEADERSHIP

    to: str
    """The replica's self id (``n1``)."""


@dataclass(frozen=True, slots=True)
class GetQuarantinedEntriesRequestHeader(_Fields):
    """GET_QUARANTINED_ENTRIES (1001, ours): committed entries a replica could not apply."""

    CODE: ClassVar[int] = MQRequestCode.GET_QUARANTINED_ENTRIES

    since_index: int = 0
    limit: int = 1000
    """At least 1 (the handler refuses less)."""


@dataclass(frozen=True, slots=True)
class ReplicaAddRequestHeader(_Fields):
    """REPLICA_ADD (1021, ours): add a replica to the broker group, as a learner first."""

    CODE: ClassVar[int] = MQRequestCode.REPLICA_ADD

    peer: str
    """``nX-HOST:PORT``."""


@dataclass(frozen=True, slots=True)
class ReplicaRemoveRequestHeader(_Fields):
    """REPLICA_REMOVE (1022, ours): remove a replica from the broker group."""

    CODE: ClassVar[int] = MQRequestCode.REPLICA_REMOVE

    replica_id: str = _required_text("id")
    """The replica's self id (``n3``)."""


@dataclass(frozen=True, slots=True)
class ReplicaBackupRequestHeader(_Fields):
    """REPLICA_BACKUP (1023, ours): a replica copies its data into a new directory."""

    CODE: ClassVar[int] = MQRequestCode.REPLICA_BACKUP

    to: str
    """An absolute path on the replica's host, new or empty."""


class _HeaderType(Protocol):
    def from_ext_fields(self, fields: Mapping[str, str], /) -> Header: ...


HEADER_TYPES: Final[Mapping[int, _HeaderType]] = {
    header.CODE: header
    for header in (
        PullMessageRequestHeader,
        QueryConsumerOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
        GetMaxOffsetRequestHeader,
        GetMinOffsetRequestHeader,
        GetEarliestMsgStoretimeRequestHeader,
        SearchOffsetRequestHeader,
        RecallMessageRequestHeader,
        GetConsumerConnectionListRequestHeader,
        GetConsumerRunningInfoRequestHeader,
        PopMessageRequestHeader,
        AckMessageRequestHeader,
        ChangeInvisibleTimeRequestHeader,
        UnregisterClientRequestHeader,
        GetConsumerListByGroupRequestHeader,
        GetTopicStatsInfoRequestHeader,
        GetConsumeStatsRequestHeader,
        QueryMessageRequestHeader,
        EndTransactionRequestHeader,
        ConsumerSendMsgBackRequestHeader,
        ViewMessageRequestHeader,
        GetProducerConnectionListRequestHeader,
        CreateTopicRequestHeader,
        DeleteTopicRequestHeader,
        DeleteSubscriptionGroupRequestHeader,
        TransferLeadershipRequestHeader,
        GetQuarantinedEntriesRequestHeader,
        ReplicaAddRequestHeader,
        ReplicaRemoveRequestHeader,
        ReplicaBackupRequestHeader,
    )
}
"""Request code -> its typed header (the registry ``parse_header`` reads)."""


def parse_header(code: int, fields: Mapping[str, str]) -> Header | None:
    """``fields`` parsed as ``code``'s typed header; None for a code without one here.
    Raises ``BadRequestError`` naming a field that is missing or not a number."""
    header_type = HEADER_TYPES.get(code)
    return None if header_type is None else header_type.from_ext_fields(fields)


_T = TypeVar("_T")


def _letter(key: str, default: _T) -> _T:
    """A SEND_MESSAGE_V2 field with a default, named by its one letter in extFields."""
    return field(default=default, metadata={"ext": key})


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2(_Fields):
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): RocketMQ's one-letter send header, as
    the stand-alone proxy and a follower's gRPC door forward a v5 send (``proxy.remote_backend``).
    Not in ``HEADER_TYPES``: the broker's door reads sends through ``wire.ext_fields``."""

    CODE: ClassVar[int] = MQRequestCode.SEND_MESSAGE_V2

    producer_group: str = _required_text("a")
    topic: str = _required_text("b")
    queue_id: int = cast("int", field(metadata={"ext": "e"}))
    default_topic: str | None = _letter("c", None)
    """The template a missing topic is created from (None: the send creates none)."""
    default_topic_queue_nums: int = _letter("d", 4)
    sys_flag: int = _letter("f", 0)
    born_timestamp: int = _letter("g", 0)
    flag: int = _letter("h", 0)
    properties: str = _letter("i", "")
    """RocketMQ's property string (empty for a batch: each message carries its own)."""
    reconsume_times: int = _letter("j", 0)
    unit_mode: bool = _letter("k", False)
    max_reconsume_times: int | None = _letter("l", None)
    batch: bool = _letter("m", False)
    broker_name: str = _letter("n", "")
