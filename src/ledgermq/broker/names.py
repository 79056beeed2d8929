"""The naming rules (``ledgermq.wire.names``) as the broker's refusals (``broker.errors``).

Every room of the broker checks a name it is given with these before anything is committed: the
doors where a request is parsed, the services where a rule holds for both doors, and the topic
manager (``broker.state.topics``) where a topic or group would be created, the last stop before
the ledger. A name that breaks a rule is an ``InvalidTopicError`` / ``InvalidGroupError`` whose
message names the rule (remoting: INVALID_PARAMETER; gRPC: ILLEGAL_TOPIC /
ILLEGAL_CONSUMER_GROUP), never an internal error and never a committed record no replica can
index (issue 25, item 1).
"""

from __future__ import annotations

from ledgermq.broker.errors import ForbiddenError, InvalidGroupError, InvalidTopicError
from ledgermq.wire.names import group_name_problem, send_topic_problem, topic_name_problem

__all__ = ["require_group_name", "require_send_topic", "require_topic_name"]


def require_topic_name(topic: str) -> str:
    """``topic``, or ``InvalidTopicError`` naming the rule it breaks."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise InvalidTopicError(problem)
    return topic


def require_group_name(group: str) -> str:
    """``group``, or ``InvalidGroupError`` naming the rule it breaks."""
    problem = group_name_problem(group)
    if problem is not None:
        raise InvalidGroupError(problem)
    return group


def require_send_topic(topic: str) -> str:
    """``topic`` if a producer may send into it: a valid name (else ``InvalidTopicError``) that
    is not a system topic only the broker writes (else ``ForbiddenError``, RocketMQ's
    NO_PERMISSION for ``TopicValidator.isNotAllowedSendTopic``)."""
    require_topic_name(topic)
    problem = send_topic_problem(topic)
    if problem is not None:
        raise ForbiddenError(problem)
    return topic
