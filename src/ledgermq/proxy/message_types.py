"""A topic's message type (RocketMQ 5's ``message.type`` topic attribute) and the check a v5 send
passes against it. Pure.

RocketMQ 5 gives every topic one message type, in its attributes (``updateTopic -a
+message.type=FIFO``). Its proxy reads a message's type from the properties the message will
be stored with (``TopicMessageType.parseFromMessageProperty``: transactional, then timer /
delay, then FIFO when it has a message group, else normal) and refuses a message whose type is
not the topic's (MIXED takes all four) with ``MESSAGE_PROPERTY_CONFLICT_WITH_TYPE``
("TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL").
The route tells the clients the same in each queue's ``accept_message_types``, and the clients
check it before they send when the settings say ``validate_message_type`` (ours do, as the
Java proxy's default ``enableTopicMessageTypeCheck=true``).

One difference: a topic without the attribute is NORMAL to RocketMQ
(``TopicConfig.getTopicMessageType``) and takes every type here (as MIXED), so that topics made
before they had types, or by a remoting admin that sets none, keep taking the timer and
transactional v5 messages they took before; a topic that names its type is held to it.

Only the gRPC door checks, as in RocketMQ, where the proxy checks and the broker's remoting
port does not: remoting producers (an orderly selector, a sharding key) keep sending to any
topic as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.messaging import TopicMessageType
from ledgermq.proxy.protocol import definition_pb2
from ledgermq.wire.message import MessageProperty

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.wire.route import TopicConfig

__all__ = [
    "MESSAGE_TYPE_ATTRIBUTE",
    "PROPERTY_SHARDING_KEY",
    "TopicMessageType",
    "accepted_message_types",
    "message_type_of",
    "topic_message_type",
    "type_conflict",
]

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
"""``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``'s name."""
PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
"""``MessageConst.PROPERTY_SHARDING_KEY``: a FIFO message's group."""
_TIMER_PROPERTIES: Final = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
"""``MessageConst.PROPERTY_TIMER_*``: a RocketMQ 5 timer message's due time."""


def topic_message_type(config: TopicConfig) -> TopicMessageType:
    """The topic's type: its ``message.type`` attribute, MIXED without one (module docstring).
    An attribute this broker does not know (written by hand into the metadata) reads as
    UNSPECIFIED, which no message matches, rather than as a type it does not say."""
    value = config.attributes.get(MESSAGE_TYPE_ATTRIBUTE)
    if value is None:
        return TopicMessageType.MIXED
    try:
        return TopicMessageType(value)
    except ValueError:
        return TopicMessageType.UNSPECIFIED


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """A message's type from the properties it is stored with (RocketMQ's order of tests)."""
    if properties.get(MessageProperty.TRAN_MSG) == "true":
        return TopicMessageType.TRANSACTION
    if properties.get(MessageProperty.DELAY) is not None or any(
        properties.get(name) is not None for name in _TIMER_PROPERTIES
    ):
        return TopicMessageType.DELAY
    if properties.get(PROPERTY_SHARDING_KEY) is not None:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def type_conflict(topic: str, expected: TopicMessageType, actual: TopicMessageType) -> str | None:
    """None if a message of type ``actual`` may go to a topic of type ``expected``, else the
    sentence to refuse it with (the Java proxy's ``DefaultTopicMessageTypeValidator``)."""
    if actual is not TopicMessageType.UNSPECIFIED and (
        actual is expected or expected is TopicMessageType.MIXED
    ):
        return None
    return (
        f"TopicMessageType validate failed, the expected type is {expected.value}, but actual "
        f"type is {actual.value} (topic {topic}; a topic's type is its "
        f"'{MESSAGE_TYPE_ATTRIBUTE}' attribute: admin topic-create -a "
        f"+{MESSAGE_TYPE_ATTRIBUTE}={actual.value})"
    )


_ACCEPTED: Final[dict[TopicMessageType, tuple[definition_pb2.MessageType.ValueType, ...]]] = {
    TopicMessageType.NORMAL: (definition_pb2.NORMAL,),
    TopicMessageType.FIFO: (definition_pb2.FIFO,),
    TopicMessageType.DELAY: (definition_pb2.DELAY,),
    TopicMessageType.TRANSACTION: (definition_pb2.TRANSACTION,),
    TopicMessageType.MIXED: (
        definition_pb2.NORMAL,
        definition_pb2.FIFO,
        definition_pb2.DELAY,
        definition_pb2.TRANSACTION,
    ),
}


def accepted_message_types(
    kind: TopicMessageType,
) -> tuple[definition_pb2.MessageType.ValueType, ...]:
    """A route queue's ``accept_message_types`` for a topic of type ``kind`` (the Java proxy's
    ``RouteActivity.parseTopicMessageType``)."""
    return _ACCEPTED.get(kind, (definition_pb2.MESSAGE_TYPE_UNSPECIFIED,))
