"""Typed remoting request headers (RocketMQ's ``*RequestHeader`` classes), parsed once.

A request's extFields are read here, once, into a frozen dataclass; the broker's door computes
what the request needs from the ACL from that object (``ledgermq.acl.header_needs``) and hands
the same object to the handler, so the check and the work cannot read different fields
(issue 25 item 2: a send was checked on one field and stored by another). Our clients build the
same headers with ``to_ext_fields``, so the field names are written in one place.

``parse_header(code, fields)`` is the registry: the header class of each code it knows
(``HEADER_TYPES``), or None for a code whose header is parsed elsewhere (sends:
``ledgermq.wire.ext_fields``; bodies: heartbeats and locks) or not yet typed. A missing or
malformed field is a ``BadRequestError`` naming it, as the handlers answered before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final, Protocol

from ledgermq.errors import BadRequestError
from ledgermq.wire.codes import MQRequestCode
from ledgermq.wire.ext_fields import ext_bool, ext_int, ext_str

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "HEADER_TYPES",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMinOffsetRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "Header",
    "PopMessageRequestHeader",
    "PullMessageRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryMessageRequestHeader",
    "RecallMessageRequestHeader",
    "SearchOffsetRequestHeader",
    "SendMessageRequestHeaderV2",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "parse_header",
]


class Header(Protocol):
    """A typed request header: its request code, read from and written to extFields."""

    CODE: ClassVar[int]

    def to_ext_fields(self) -> dict[str, str]: ...


def _optional_int(fields: Mapping[str, str], name: str) -> int | None:
    """An integer field that may be absent (absent or empty: None), else checked as
    ``ext_int`` checks it."""
    value = fields.get(name)
    return None if value is None or value == "" else ext_int(fields, name)


def _put(fields: dict[str, str], name: str, value: object) -> None:
    if value is not None:
        fields[name] = str(value)


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader:
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

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> PullMessageRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "topic"),
            ext_int(fields, "queueId"),
            ext_int(fields, "queueOffset"),
            ext_int(fields, "maxMsgNums", 32),
            ext_int(fields, "sysFlag", 0),
            ext_int(fields, "commitOffset", -1),
            ext_int(fields, "suspendTimeoutMillis", 15_000),
            fields.get("subscription"),
            _optional_int(fields, "subVersion"),
            fields.get("expressionType"),
            _optional_int(fields, "maxMsgBytes"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
            "maxMsgNums": str(self.max_msg_nums),
            "sysFlag": str(self.sys_flag),
            "commitOffset": str(self.commit_offset),
            "suspendTimeoutMillis": str(self.suspend_timeout_millis),
        }
        _put(fields, "subscription", self.subscription)
        _put(fields, "subVersion", self.sub_version)
        _put(fields, "expressionType", self.expression_type)
        _put(fields, "maxMsgBytes", self.max_msg_bytes)
        return fields


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET (14): a group's committed offset of one queue."""

    CODE: ClassVar[int] = MQRequestCode.QUERY_CONSUMER_OFFSET

    consumer_group: str
    topic: str
    queue_id: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> QueryConsumerOffsetRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"), ext_str(fields, "topic"), ext_int(fields, "queueId")
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
        }


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader:
    """UPDATE_CONSUMER_OFFSET (15): commit a group's offset of one queue."""

    CODE: ClassVar[int] = MQRequestCode.UPDATE_CONSUMER_OFFSET

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> UpdateConsumerOffsetRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "topic"),
            ext_int(fields, "queueId"),
            ext_int(fields, "commitOffset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "commitOffset": str(self.commit_offset),
        }


@dataclass(frozen=True, slots=True)
class _QueueHeader:
    """A request about one queue of a topic (its offsets, its earliest store time)."""

    topic: str
    queue_id: int

    def to_ext_fields(self) -> dict[str, str]:
        return {"topic": self.topic, "queueId": str(self.queue_id)}


@dataclass(frozen=True, slots=True)
class GetMaxOffsetRequestHeader(_QueueHeader):
    """GET_MAX_OFFSET (30)."""

    CODE: ClassVar[int] = MQRequestCode.GET_MAX_OFFSET

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetMaxOffsetRequestHeader:
        return cls(ext_str(fields, "topic"), ext_int(fields, "queueId"))


@dataclass(frozen=True, slots=True)
class GetMinOffsetRequestHeader(_QueueHeader):
    """GET_MIN_OFFSET (31)."""

    CODE: ClassVar[int] = MQRequestCode.GET_MIN_OFFSET

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetMinOffsetRequestHeader:
        return cls(ext_str(fields, "topic"), ext_int(fields, "queueId"))


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(_QueueHeader):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    CODE: ClassVar[int] = MQRequestCode.GET_EARLIEST_MSG_STORETIME

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetEarliestMsgStoretimeRequestHeader:
        return cls(ext_str(fields, "topic"), ext_int(fields, "queueId"))


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): a queue's first offset stored at or after a time."""

    CODE: ClassVar[int] = MQRequestCode.SEARCH_OFFSET_BY_TIMESTAMP

    topic: str
    queue_id: int
    timestamp: int
    """Milliseconds since the epoch."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> SearchOffsetRequestHeader:
        return cls(
            ext_str(fields, "topic"), ext_int(fields, "queueId"), ext_int(fields, "timestamp")
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "timestamp": str(self.timestamp),
        }


@dataclass(frozen=True, slots=True)
class RecallMessageRequestHeader:
    """RECALL_MESSAGE (370, RocketMQ 5.3): recall a timer message by its handle."""

    CODE: ClassVar[int] = MQRequestCode.RECALL_MESSAGE

    topic: str
    recall_handle: str
    producer_group: str | None = None
    """Sent by RocketMQ's clients; the broker does not need it."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> RecallMessageRequestHeader:
        return cls(
            ext_str(fields, "topic"), ext_str(fields, "recallHandle"), fields.get("producerGroup")
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        _put(fields, "producerGroup", self.producer_group)
        fields["topic"] = self.topic
        fields["recallHandle"] = self.recall_handle
        return fields


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader:
    """GET_CONSUMER_CONNECTION_LIST (203): a group's remoting clients."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_CONNECTION_LIST

    consumer_group: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetConsumerConnectionListRequestHeader:
        return cls(ext_str(fields, "consumerGroup"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"consumerGroup": self.consumer_group}


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO (307): one client's own view, asked through the broker."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_RUNNING_INFO

    consumer_group: str
    client_id: str
    jstack_enable: str = "false"
    """Passed on to the client as received (Java's boolean text)."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetConsumerRunningInfoRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "clientId"),
            fields.get("jstackEnable", "false"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "consumerGroup": self.consumer_group,
            "clientId": self.client_id,
            "jstackEnable": self.jstack_enable,
        }


@dataclass(frozen=True, slots=True)
class PopMessageRequestHeader:
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

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> PopMessageRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "topic"),
            ext_int(fields, "maxMsgNums"),
            ext_int(fields, "invisibleTime"),
            ext_int(fields, "queueId", -1),
            ext_int(fields, "pollTime", 0),
            _optional_int(fields, "bornTime"),
            _optional_int(fields, "initMode"),
            fields.get("expType"),
            fields.get("exp"),
            ext_bool(fields, "order"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "consumerGroup": self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "maxMsgNums": str(self.max_msg_nums),
            "invisibleTime": str(self.invisible_time),
            "pollTime": str(self.poll_time),
        }
        _put(fields, "bornTime", self.born_time)
        _put(fields, "initMode", self.init_mode)
        _put(fields, "expType", self.exp_type)
        _put(fields, "exp", self.exp)
        fields["order"] = "true" if self.order else "false"
        return fields


@dataclass(frozen=True, slots=True)
class AckMessageRequestHeader:
    """ACK_MESSAGE (200051): the delivery ``extra_info`` (its receipt handle) is done."""

    CODE: ClassVar[int] = MQRequestCode.ACK_MESSAGE

    consumer_group: str
    topic: str
    extra_info: str
    queue_id: int | None = None
    offset: int | None = None
    """Sent by RocketMQ's clients; the handle is the whole truth here."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> AckMessageRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "topic"),
            ext_str(fields, "extraInfo"),
            _optional_int(fields, "queueId"),
            _optional_int(fields, "offset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"consumerGroup": self.consumer_group, "topic": self.topic}
        _put(fields, "queueId", self.queue_id)
        _put(fields, "offset", self.offset)
        fields["extraInfo"] = self.extra_info
        return fields


@dataclass(frozen=True, slots=True)
class ChangeInvisibleTimeRequestHeader:
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the delivery ``extra_info`` names becomes
    invisible for ``invisible_time`` ms from now."""

    CODE: ClassVar[int] = MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME

    consumer_group: str
    topic: str
    extra_info: str
    invisible_time: int
    queue_id: int | None = None
    offset: int | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> ChangeInvisibleTimeRequestHeader:
        return cls(
            ext_str(fields, "consumerGroup"),
            ext_str(fields, "topic"),
            ext_str(fields, "extraInfo"),
            ext_int(fields, "invisibleTime"),
            _optional_int(fields, "queueId"),
            _optional_int(fields, "offset"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"consumerGroup": self.consumer_group, "topic": self.topic}
        _put(fields, "queueId", self.queue_id)
        _put(fields, "offset", self.offset)
        fields["extraInfo"] = self.extra_info
        fields["invisibleTime"] = str(self.invisible_time)
        return fields


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT (35): a client leaves, as the producer of ``producer_group`` and the
    consumer of ``consumer_group`` (either may be absent: empty is read as absent)."""

    CODE: ClassVar[int] = MQRequestCode.UNREGISTER_CLIENT

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> UnregisterClientRequestHeader:
        client_id = fields.get("clientID")
        if not client_id:
            raise BadRequestError("the request header lacks the field 'clientID'")
        return cls(
            client_id, fields.get("producerGroup") or None, fields.get("consumerGroup") or None
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "clientID": self.client_id,
            "producerGroup": self.producer_group or "",
            "consumerGroup": self.consumer_group or "",
        }


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader:
    """GET_CONSUMER_LIST_BY_GROUP (38): the client ids of a group's consumers."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUMER_LIST_BY_GROUP

    consumer_group: str
    """Absent: empty, a group no consumer is in (answered so)."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetConsumerListByGroupRequestHeader:
        return cls(fields.get("consumerGroup", ""))

    def to_ext_fields(self) -> dict[str, str]:
        return {"consumerGroup": self.consumer_group}


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader:
    """GET_TOPIC_STATS_INFO (202): a topic's queues and their offsets."""

    CODE: ClassVar[int] = MQRequestCode.GET_TOPIC_STATS_INFO

    topic: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetTopicStatsInfoRequestHeader:
        return cls(ext_str(fields, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"topic": self.topic}


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS (208): a group's progress, on one topic or all it consumes."""

    CODE: ClassVar[int] = MQRequestCode.GET_CONSUME_STATS

    consumer_group: str
    topic: str | None = None
    """None (absent or empty): every topic of the group."""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> GetConsumeStatsRequestHeader:
        return cls(ext_str(fields, "consumerGroup"), fields.get("topic") or None)

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"consumerGroup": self.consumer_group}
        _put(fields, "topic", self.topic)
        return fields


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE (12): a topic's messages by key (or unique id), newest first."""

    CODE: ClassVar[int] = MQRequestCode.QUERY_MESSAGE

    topic: str
    key: str
    max_num: int = 32
    begin_timestamp: int = 0
    end_timestamp: int = 1 << 62

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> QueryMessageRequestHeader:
        return cls(
            ext_str(fields, "topic"),
            ext_str(fields, "key"),
            ext_int(fields, "maxNum", 32),
            ext_int(fields, "beginTimestamp", 0),
            ext_int(fields, "endTimestamp", 1 << 62),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "topic": self.topic,
            "key": self.key,
            "maxNum": str(self.max_num),
            "beginTimestamp": str(self.begin_timestamp),
            "endTimestamp": str(self.end_timestamp),
        }


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
    )
}
"""Request code -> its typed header (the registry ``parse_header`` reads)."""


def parse_header(code: int, fields: Mapping[str, str]) -> Header | None:
    """``fields`` parsed as ``code``'s typed header; None for a code without one here.
    Raises ``BadRequestError`` naming a field that is missing or not a number."""
    header_type = HEADER_TYPES.get(code)
    return None if header_type is None else header_type.from_ext_fields(fields)


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2:
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): RocketMQ's one-letter send header, as
    the stand-alone proxy and a follower's gRPC door forward a v5 send (``proxy.remote_backend``).
    Not in ``HEADER_TYPES``: the broker's door reads sends through ``wire.ext_fields``."""

    CODE: ClassVar[int] = MQRequestCode.SEND_MESSAGE_V2

    producer_group: str
    topic: str
    default_topic: str | None
    """The template a missing topic is created from (None: the send creates none)."""
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    """RocketMQ's property string (empty for a batch: each message carries its own)."""
    reconsume_times: int
    max_reconsume_times: int | None
    batch: bool
    broker_name: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> SendMessageRequestHeaderV2:
        return cls(
            ext_str(fields, "a"),
            ext_str(fields, "b"),
            fields.get("c"),
            ext_int(fields, "d", 4),
            ext_int(fields, "e"),
            ext_int(fields, "f", 0),
            ext_int(fields, "g", 0),
            ext_int(fields, "h", 0),
            fields.get("i", ""),
            ext_int(fields, "j", 0),
            _optional_int(fields, "l"),
            ext_bool(fields, "m"),
            fields.get("n", ""),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {
            "a": self.producer_group,
            "b": self.topic,
            "d": str(self.default_topic_queue_nums),
            "e": str(self.queue_id),
            "f": str(self.sys_flag),
            "g": str(self.born_timestamp),
            "h": str(self.flag),
            "i": self.properties,
            "j": str(self.reconsume_times),
            "k": "false",
            "m": "true" if self.batch else "false",
            "n": self.broker_name,
        }
        _put(fields, "c", self.default_topic)
        _put(fields, "l", self.max_reconsume_times)
        return fields
