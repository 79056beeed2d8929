"""The naming rules (``ledgermq.wire.names``) as statuses of RocketMQ 5's gRPC protocol, for both
gRPC doors (the in-replica one and the stand-alone proxy).

A door checks every topic and group a request names before it acts on it, and answers a name
that breaks a rule with ILLEGAL_TOPIC or ILLEGAL_CONSUMER_GROUP and the rule in the message (the
Java proxy's codes for them), FORBIDDEN for a send into a system topic. The stand-alone proxy
must refuse before it forwards: over remoting a broker answers a bad name INVALID_PARAMETER,
which does not say whether the topic or the group was wrong. Pure: requests in, statuses out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.proxy.status import Code, status
from ledgermq.wire.names import group_name_problem, send_topic_problem, topic_name_problem

if TYPE_CHECKING:
    from ledgermq.proxy.protocol import definition_pb2

__all__ = [
    "DEFAULT_MAX_SUBSCRIPTIONS",
    "consume_refusal",
    "group_refusal",
    "send_topic_refusal",
    "settings_refusal",
    "topic_refusal",
]

DEFAULT_MAX_SUBSCRIPTIONS: Final = 1_000
"""Subscriptions one client's settings may carry (the broker's ``heartbeatMaxSubscriptions``
default, for the stand-alone proxy, which has no broker.conf)."""


def topic_refusal(topic: str) -> definition_pb2.Status | None:
    """ILLEGAL_TOPIC naming the rule ``topic`` breaks; None for a valid topic name."""
    problem = topic_name_problem(topic)
    return None if problem is None else status(Code.ILLEGAL_TOPIC, problem)


def group_refusal(group: str) -> definition_pb2.Status | None:
    """ILLEGAL_CONSUMER_GROUP naming the rule ``group`` breaks; None for a valid group name."""
    problem = group_name_problem(group)
    return None if problem is None else status(Code.ILLEGAL_CONSUMER_GROUP, problem)


def consume_refusal(topic: str, group: str) -> definition_pb2.Status | None:
    """The refusal of a consumer's request (receive, ack, change invisible time, forward to
    the dead-letter queue, pull, offsets) for its group and topic; None when both are valid."""
    return group_refusal(group) or topic_refusal(topic)


def send_topic_refusal(topic: str) -> definition_pb2.Status | None:
    """ILLEGAL_TOPIC for a bad name, FORBIDDEN for a system topic only the broker writes
    (RocketMQ's ``isNotAllowedSendTopic``); None when a producer may send into ``topic``."""
    refused = topic_refusal(topic)
    if refused is not None:
        return refused
    problem = send_topic_problem(topic)
    return None if problem is None else status(Code.FORBIDDEN, problem)


def settings_refusal(
    settings: definition_pb2.Settings, max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS
) -> definition_pb2.Status | None:
    """The refusal of a client's Telemetry ``settings`` (its heartbeat, in v5): the
    subscription's group and topics, the topics it publishes, and at most
    ``max_subscriptions`` subscriptions (BAD_REQUEST above); None when all are good."""
    if settings.HasField("subscription"):
        subscription = settings.subscription
        count = len(subscription.subscriptions)
        if count > max_subscriptions:
            return status(
                Code.BAD_REQUEST,
                f"the settings carry {count} subscriptions; at most {max_subscriptions} are "
                "taken per client",
            )
        if subscription.HasField("group"):
            refused = group_refusal(subscription.group.name)
            if refused is not None:
                return refused
        for entry in subscription.subscriptions:
            refused = topic_refusal(entry.topic.name)
            if refused is not None:
                return refused
    if settings.HasField("publishing"):
        topics = settings.publishing.topics
        if len(topics) > max_subscriptions:
            return status(
                Code.BAD_REQUEST,
                f"the settings publish {len(topics)} topics; at most {max_subscriptions} are "
                "taken per client",
            )
        for topic in topics:
            refused = topic_refusal(topic.name)
            if refused is not None:
                return refused
    return None
