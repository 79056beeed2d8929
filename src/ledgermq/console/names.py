"""Names the console refuses to create: the ones RocketMQ reserves for itself.

A group's retry topic is ``%RETRY%<group>`` and its dead-letter topic ``%DLQ%<group>``; brokers
make them on first need. A console that lets an operator create a topic or group with such a
prefix makes names that collide with them (the group page of ``%RETRY%orders`` offered to
create a group whose retry topic is ``%RETRY%%RETRY%orders``). So every form that creates a
name asks here first and shows the sentence when it is refused. Editing what already exists
(a system group's settings, a retry topic's queue count) is not creating and stays allowed.
"""

from __future__ import annotations

from typing import Final

from ledgermq.console.views import SYSTEM_GROUPS, is_system_topic
from ledgermq.wire.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    group_name_problem,
    topic_name_problem,
)

__all__ = ["group_of_side_topic", "reserved_group_problem", "reserved_topic_problem"]

_GROUP_PREFIXES: Final = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, "CID_RMQ_SYS_")


def group_of_side_topic(name: str) -> str | None:
    """The group whose retry or dead-letter topic ``name`` is; None for any other name."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return None


def _side_topic_sentence(kind: str, name: str) -> str | None:
    owner = group_of_side_topic(name)
    if owner is None:
        return None
    role = "retry" if name.startswith(RETRY_GROUP_TOPIC_PREFIX) else "dead-letter"
    return (
        f"{name} is a reserved name: it is the {role} topic of consumer group {owner}, which "
        f"brokers make themselves; a {kind} may not start with {RETRY_GROUP_TOPIC_PREFIX} or "
        f"{DLQ_GROUP_TOPIC_PREFIX}"
    )


def reserved_topic_problem(topic: str, cluster_names: frozenset[str] = frozenset()) -> str | None:
    """Why the console will not create topic ``topic``, as a sentence; None when it may."""
    problem = topic_name_problem(topic)
    if problem is not None:
        return problem
    side = _side_topic_sentence("topic", topic)
    if side is not None:
        return side
    if is_system_topic(topic, cluster_names) or topic in NOT_ALLOWED_SEND_TOPICS:
        return (
            f"{topic} is a reserved name: RocketMQ uses it for a system topic (TBW102, RMQ_SYS_*, "
            "the names of clusters and broker groups, ...); choose another name"
        )
    return None


def reserved_group_problem(group: str) -> str | None:
    """Why the console will not create consumer group ``group``, as a sentence; None when it
    may."""
    problem = group_name_problem(group)
    if problem is not None:
        return problem
    side = _side_topic_sentence("group", group)
    if side is not None:
        return side
    if group in SYSTEM_GROUPS or group.startswith(_GROUP_PREFIXES):
        return (
            f"{group} is a reserved name: RocketMQ uses it for a built-in group; choose another "
            "name"
        )
    return None
