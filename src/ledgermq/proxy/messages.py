"""A v5 ``Message`` as a RocketMQ message (the backend's ``Outgoing``: properties and flags), and
a ``ReceiveMessage`` as the backend's ``Receive``.

Pure. The mapping is the Java proxy's (``SendMessageActivity.buildMessage`` /
``buildMessageProperty``), so that a message sent over gRPC reads the same as one sent over
remoting to every consumer: the user properties as they are, then ``TAGS`` (the tag), ``KEYS``
(the keys joined by a space, ``MessageConst.KEY_SEPARATOR``), ``UNIQ_KEY`` (the client's message
id, which the send answers with), ``RECONSUME_TIME`` (the delivery attempt), ``__SHARDINGKEY``
(the message group), ``TRACE_CONTEXT``, ``__BORNHOST`` (the client's, else the peer address)
and ``BORN_TIMESTAMP``. A user property may not use a reserved system name.

A TRANSACTION message becomes a half message (``TRAN_MSG=true``, and its
``orphaned_transaction_recovery_duration`` as ``CHECK_IMMUNITY_TIME_IN_SECONDS``; the end is
``proxy.transactions``'). A ``delivery_timestamp`` becomes ``TIMER_DELIVER_MS``: a timer message
(``broker.service.timers``; seconds past year 9999 are read as milliseconds, what the official
Python client sends: ``proxy.timestamps``). A Timestamp or Duration that is not valid is
refused with the field named, never an internal error. What is refused here, with the status
saying so (never a dropped stream): a message group the Java proxy would refuse
(``message_groups.group_problem``: ILLEGAL_MESSAGE_GROUP), and a transactional message with a
delivery time (RocketMQ 5 has no such message either). A FIFO message's queue and the topic's
message type are ``placement``'s.
"""

from __future__ import annotations

from typing import Final

from ledgermq.broker.service.pop import MAX_POLL_MS, MAX_POP_MESSAGES
from ledgermq.messaging import Outgoing, Receive
from ledgermq.proxy.message_groups import group_problem
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, status
from ledgermq.proxy.timestamps import delivery_time_ms, duration_ms, timestamp_ms
from ledgermq.wire.message import MessageProperty

__all__ = ["PROPERTY_BORN_HOST", "PROPERTY_SHARDING_KEY", "PROPERTY_TRACE_CONTEXT",
           "RESERVED_PROPERTIES", "Refusal", "long_polling_ms", "message_properties",
           "outgoing", "receive_request"]  # fmt: skip

PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
"""``MessageConst.PROPERTY_SHARDING_KEY``: a FIFO message's group."""
PROPERTY_BORN_HOST: Final = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"

RESERVED_PROPERTIES: Final = frozenset(
    {
        value
        for name, value in vars(MessageProperty).items()
        if name.isupper() and isinstance(value, str)
    }
    | {PROPERTY_SHARDING_KEY, PROPERTY_BORN_HOST, PROPERTY_BORN_TIMESTAMP, PROPERTY_TRACE_CONTEXT}
)
"""System property names a user property may not take (``MessageConst.STRING_HASH_SET``)."""

GRPC_PRODUCER_GROUP: Final = "__grpc_producer"
"""v5 producers have no group; the service records this one (the Java proxy sends none)."""


def message_properties(message: definition_pb2.Message, peer_host: str) -> dict[str, str]:
    """The RocketMQ properties of ``message`` (the module docstring's mapping)."""
    props: dict[str, str] = {}
    for key, value in message.user_properties.items():
        if key in RESERVED_PROPERTIES:
            raise Refusal(
                status(
                    Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                    f"property key {key!r} is reserved for the system",
                )
            )
        props[key] = value
    system = message.system_properties
    if system.HasField("tag") and system.tag:
        props[MessageProperty.TAGS] = system.tag
    if system.keys:
        props[MessageProperty.KEYS] = " ".join(system.keys)
    props[MessageProperty.UNIQ_KEY] = system.message_id
    props[MessageProperty.RECONSUME_TIME] = str(system.delivery_attempt)
    if system.HasField("message_group") and system.message_group:
        props[PROPERTY_SHARDING_KEY] = system.message_group
    if system.HasField("trace_context") and system.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = system.trace_context
    born_host = system.born_host or peer_host
    if born_host:
        props[PROPERTY_BORN_HOST] = born_host
    if system.HasField("born_timestamp"):
        props[PROPERTY_BORN_TIMESTAMP] = str(timestamp_ms(system.born_timestamp, "born_timestamp"))
    if system.HasField("delivery_timestamp"):
        # a timer message (broker.service.timers), as the Java proxy maps it
        props[MessageProperty.TIMER_DELIVER_MS] = str(delivery_time_ms(system.delivery_timestamp))
    return props


def outgoing(message: definition_pb2.Message, peer_host: str, max_body_size: int) -> Outgoing:
    """The backend's message for one v5 message; ``Refusal`` if not taken (a body over
    ``max_body_size``, ``maxMessageSize``: MESSAGE_BODY_TOO_LARGE, as the Java proxy answers
    it)."""
    system = message.system_properties
    if len(message.body) > max_body_size:
        raise Refusal(
            status(
                Code.MESSAGE_BODY_TOO_LARGE,
                f"the message body of {len(message.body)} bytes exceeds maxMessageSize "
                f"{max_body_size}",
            )
        )
    if not message.topic.name:
        raise Refusal(status(Code.ILLEGAL_TOPIC, "the message names no topic"))
    if not system.message_id:
        raise Refusal(status(Code.ILLEGAL_MESSAGE_ID, "the message has no message_id"))
    kind = system.message_type
    if system.message_group and (problem := group_problem(system.message_group)):
        raise Refusal(status(Code.ILLEGAL_MESSAGE_GROUP, problem))
    if kind == definition_pb2.DELAY and not system.HasField("delivery_timestamp"):
        raise Refusal(
            status(Code.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery_timestamp")
        )
    if kind == definition_pb2.TRANSACTION and system.HasField("delivery_timestamp"):
        raise Refusal(
            status(
                Code.BAD_REQUEST,
                "a transactional message cannot have a delivery_timestamp: send it as a "
                "timer message, or commit a transaction of normal messages",
            )
        )
    if kind not in (
        definition_pb2.NORMAL,
        definition_pb2.FIFO,
        definition_pb2.DELAY,
        definition_pb2.MESSAGE_TYPE_UNSPECIFIED,
        definition_pb2.TRANSACTION,
    ):
        raise Refusal(status(Code.BAD_REQUEST, f"message type {kind} is not one this door knows"))
    born_ms = (
        timestamp_ms(system.born_timestamp, "born_timestamp")
        if system.HasField("born_timestamp")
        else 0
    )
    props = message_properties(message, peer_host)
    if kind == definition_pb2.TRANSACTION:
        # a half message (broker.service.transactions), as the Java proxy marks it
        props[MessageProperty.TRAN_MSG] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = (
                duration_ms(
                    system.orphaned_transaction_recovery_duration,
                    "orphaned_transaction_recovery_duration",
                )
                // 1000
            )
            props[MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(seconds, 0))
    return Outgoing(
        body=message.body,
        properties=props,
        compressed=system.body_encoding == definition_pb2.GZIP,
        born_ms=born_ms,
        reconsume_times=system.delivery_attempt,
        queue_id=system.queue_id,
    )


DEFAULT_INVISIBLE_MS: Final = 30_000
"""A receive without ``invisible_duration`` (the Java proxy's default)."""
DEFAULT_LONG_POLLING_MS: Final = 20_000
"""A receive without ``long_polling_timeout`` (the clients' default, 20 s)."""


def receive_request(request: service_pb2.ReceiveMessageRequest) -> Receive:
    """The backend's receive for a ``ReceiveMessage``; ``Refusal`` if its values are bad.

    ``batch_size`` above the service's maximum is lowered to it (the clients ask for 32 or
    less); the long-polling time is capped at ``MAX_POLL_MS``, answered before the client's
    deadline (its own timeout plus the long-polling time)."""
    group = request.group.name
    topic = request.message_queue.topic.name
    if not group:
        raise Refusal(status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group"))
    if not topic:
        raise Refusal(status(Code.ILLEGAL_TOPIC, "the request names no topic"))
    if request.batch_size <= 0:
        raise Refusal(
            status(Code.BAD_REQUEST, f"batch_size must be positive, got {request.batch_size}")
        )
    invisible_ms = (
        duration_ms(request.invisible_duration, "invisible_duration", Code.ILLEGAL_INVISIBLE_TIME)
        if request.HasField("invisible_duration")
        else DEFAULT_INVISIBLE_MS
    )
    if invisible_ms <= 0:
        raise Refusal(
            status(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible_duration must be positive, got {invisible_ms} ms",
            )
        )
    poll_ms = long_polling_ms(request)
    expression = request.filter_expression
    if expression.type == definition_pb2.SQL:
        subscription = (expression.expression, "SQL92")
    else:
        subscription = (expression.expression or "*", "TAG")
    # Any queue of this broker, whatever queue id the request names, as the Java proxy pops
    # (ReceiveMessageActivity selects by broker name only): the official clients name one
    # queue of the route per receive, and pinning it made a message in another queue wait
    # while they long-polled empty ones (up to ~6 s seen on a 4-queue topic).
    return Receive(
        group=group,
        topic=topic,
        broker_name=request.message_queue.broker.name,
        max_messages=min(request.batch_size, MAX_POP_MESSAGES),
        invisible_ms=invisible_ms,
        expression=subscription[0],
        expression_type=subscription[1],
        poll_ms=min(poll_ms, MAX_POLL_MS),
    )


def long_polling_ms(
    request: service_pb2.ReceiveMessageRequest | service_pb2.PullMessageRequest,
) -> int:
    """A receive's or pull's ``long_polling_timeout`` in ms (``DEFAULT_LONG_POLLING_MS`` when
    absent); ``Refusal`` ILLEGAL_POLLING_TIME for one that is invalid or negative."""
    if not request.HasField("long_polling_timeout"):
        return DEFAULT_LONG_POLLING_MS
    poll_ms = duration_ms(
        request.long_polling_timeout, "long_polling_timeout", Code.ILLEGAL_POLLING_TIME
    )
    if poll_ms < 0:
        raise Refusal(
            status(Code.ILLEGAL_POLLING_TIME, f"long_polling_timeout is negative: {poll_ms} ms")
        )
    return poll_ms
