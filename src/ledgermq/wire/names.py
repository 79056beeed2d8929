"""The naming rules of topics and consumer or producer groups: one module every door, the
services, the storage and the client check names with.

RocketMQ's rules (``TopicValidator``, the client's ``Validators.checkTopic`` / ``checkGroup``):

- a topic is 1 to 127 characters out of ``a-z A-Z 0-9 % | _ -`` (ASCII, so 127 bytes: the
  commit-log record holds the topic's length in one byte, and the topic names a directory under
  ``consumequeue``);
- a group is made of the same characters, and since the broker stores a group's redeliveries in
  ``%RETRY%<group>`` and its dead letters in ``%DLQ%<group>``, a group whose retry topic would not
  be a valid topic (more than 120 characters) is refused too. Without that rule a group such as
  ``orders.v1`` or a 125-character name was accepted and its first redelivery wrote a record no
  replica could index (issue 25, items 1 and 7);
- producers may not send into the broker's own topics (``TopicValidator.isNotAllowedSendTopic``,
  plus the few more of ours in ``NOT_ALLOWED_SEND_TOPICS``); the broker writes there itself,
  below the doors.

Pure: no I/O; the checks return the broken rule as a sentence (``*_problem``) or raise
``InvalidTopicNameError`` / ``InvalidGroupNameError`` with it.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from ledgermq.errors import InvalidGroupNameError, InvalidTopicNameError

__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "GROUP_MAX_LENGTH",
    "NAME_CHARACTERS",
    "NAME_PATTERN",
    "NOT_ALLOWED_SEND_TOPICS",
    "RETRY_GROUP_TOPIC_PREFIX",
    "TOPIC_MAX_LENGTH",
    "check_group_name",
    "check_send_topic",
    "check_topic_name",
    "group_name_problem",
    "is_group_name",
    "is_topic_name",
    "send_topic_problem",
    "topic_name_problem",
]

TOPIC_MAX_LENGTH: Final = 127
"""Longest topic, in characters (= bytes: every allowed character is ASCII)."""
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
"""A group's redeliveries wait in ``%RETRY%<group>``."""
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
"""A group's dead letters go to ``%DLQ%<group>``."""
GROUP_MAX_LENGTH: Final = TOPIC_MAX_LENGTH - len(RETRY_GROUP_TOPIC_PREFIX)
"""Longest group (120): its retry topic, the longer of its two, must be a valid topic."""
NAME_CHARACTERS: Final = "a-z A-Z 0-9 % | _ -"
"""The allowed characters, as the refusals name them."""
NAME_PATTERN: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
"""Used with ``fullmatch`` (``$`` would also accept a trailing newline)."""

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        # RocketMQ's TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
        "SCHEDULE_TOPIC_XXXX",
        "SCHEDULE_TOPIC_XXXX_V2",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        # ours: the route template of auto-created topics, and the timer wheel's topic
        "TBW102",
        "rmq_sys_wheel_timer",
    }
)
"""Topics only the broker writes: a delayed, timer or transactional message is diverted there by
the broker itself, with its real destination in its properties, so a producer's record there
would be delivered somewhere it never had permission to send. (``RMQ_SYS_TRACE_TOPIC`` is not
here: clients send their traces there.)"""


@functools.lru_cache(maxsize=4096)
def topic_name_problem(topic: str) -> str | None:
    """The rule ``topic`` breaks, as a sentence; None when it is a valid topic name.

    Cached: the send path asks about the same few topics over and over."""
    if not topic:
        return "the topic name is empty"
    if len(topic) > TOPIC_MAX_LENGTH:
        return (
            f"the topic name {topic[:40]!r}... is {len(topic)} characters long; "
            f"a topic has at most {TOPIC_MAX_LENGTH}"
        )
    if NAME_PATTERN.fullmatch(topic) is None:
        return f"the topic name {topic!r} may contain only the characters {NAME_CHARACTERS}"
    return None


@functools.lru_cache(maxsize=4096)
def group_name_problem(group: str) -> str | None:
    """The rule ``group`` breaks, as a sentence; None when it is a valid group name."""
    if not group:
        return "the group name is empty"
    if NAME_PATTERN.fullmatch(group) is None:
        return (
            f"the group name {group[:130]!r} may contain only the characters {NAME_CHARACTERS} "
            f"(its retry topic {RETRY_GROUP_TOPIC_PREFIX}<group> must be a valid topic)"
        )
    if len(group) > GROUP_MAX_LENGTH:
        return (
            f"the group name {group[:40]!r}... is {len(group)} characters long; a group has at "
            f"most {GROUP_MAX_LENGTH}, so that its retry topic {RETRY_GROUP_TOPIC_PREFIX}<group> "
            f"is at most {TOPIC_MAX_LENGTH}"
        )
    return None


def is_topic_name(topic: str) -> bool:
    """Whether ``topic`` is a valid topic name (and so a safe directory name)."""
    return topic_name_problem(topic) is None


def is_group_name(group: str) -> bool:
    """Whether ``group`` is a valid group name (its retry and dead-letter topics are valid)."""
    return group_name_problem(group) is None


def check_topic_name(topic: str) -> None:
    """Raise ``InvalidTopicNameError`` naming the rule unless ``topic`` is a valid name."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise InvalidTopicNameError(problem)


def check_group_name(group: str) -> None:
    """Raise ``InvalidGroupNameError`` naming the rule unless ``group`` is a valid name."""
    problem = group_name_problem(group)
    if problem is not None:
        raise InvalidGroupNameError(problem)


def send_topic_problem(topic: str) -> str | None:
    """Why a producer may not send into ``topic`` (a valid name): None when it may."""
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return (
            f"sending messages to topic[{topic}] is forbidden: it is a system topic only the "
            "broker writes"
        )
    return None


def check_send_topic(topic: str) -> None:
    """Raise ``InvalidTopicNameError`` unless a producer may send into ``topic``: a valid name
    that is not one of ``NOT_ALLOWED_SEND_TOPICS`` (the client's check before it sends)."""
    check_topic_name(topic)
    problem = send_topic_problem(topic)
    if problem is not None:
        raise InvalidTopicNameError(problem)
