"""Where a v5 send goes once its topic is known: the topic's message type checked
(``message_types``), and a FIFO message's queue chosen by its message group
(``message_groups``). Pure; both backends call it once the topic's type and write queues are
known (a replica from its topic config, the stand-alone proxy from the route and a master).

The service stores what it is given; these are the Java proxy's decisions (its
``ProducerProcessor.sendMessage`` validates the type, its ``SendMessageQueueSelector`` picks the
queue), so they live at the gRPC door, and the remoting door goes on storing what its producers
choose (an orderly selector's queue, a sharding key) unchecked, as RocketMQ's broker does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.proxy.message_groups import queue_of_group
from ledgermq.proxy.message_types import PROPERTY_SHARDING_KEY, message_type_of, type_conflict
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, status

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ledgermq.proxy.message_types import TopicMessageType

__all__ = ["place"]


def place(
    properties: Iterable[Mapping[str, str]],
    kind: TopicMessageType,
    write_queues: int,
    topic: str,
    *,
    check_type: bool = True,
) -> int:
    """The queue the messages go to (-1: any write queue, the backend picks); ``Refusal``
    (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) if a message's type is not the topic's ``kind`` and
    ``check_type`` (the broker's ``enableTopicMessageTypeCheck``). Messages with a message
    group go to the write queue their group hashes to, whatever queue the client named (they
    share the group: ``proxy.door_send``); others to any write queue, as the Java proxy's
    ``selectOneByPipeline``: the official clients name queue 0 in every message, and taking it
    piled every message of a topic into one queue."""
    group: str | None = None
    for props in properties:
        problem = type_conflict(topic, kind, message_type_of(props))
        if problem is not None and check_type:
            raise Refusal(status(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, problem))
        group = props.get(PROPERTY_SHARDING_KEY)
    return -1 if group is None else queue_of_group(group, write_queues)
