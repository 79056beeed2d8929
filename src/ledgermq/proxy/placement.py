"""Where a v5 send goes once its topic is known: the topic's message type checked
(``message_types``), and a FIFO message's queue chosen by its message group
(``message_groups``). Pure; the servicer calls it between ``send_request`` and the service.

The service stores what it is given; these are the Java proxy's decisions (its
``ProducerProcessor.sendMessage`` validates the type, its ``SendMessageQueueSelector`` picks the
queue), so they live at the gRPC door, and the remoting door goes on storing what its producers
choose (an orderly selector's queue, a sharding key) unchecked, as RocketMQ's broker does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.proxy.message_groups import queue_of_group
from ledgermq.proxy.message_types import (
    PROPERTY_SHARDING_KEY,
    message_type_of,
    topic_message_type,
    type_conflict,
)
from ledgermq.proxy.messages import Refusal
from ledgermq.proxy.status import Code, status
from ledgermq.wire.message import decode_properties

if TYPE_CHECKING:
    from ledgermq.broker.service.send import SendRequest
    from ledgermq.wire.route import TopicConfig

__all__ = ["place"]


def place(request: SendRequest, config: TopicConfig, *, check_type: bool = True) -> SendRequest:
    """``request`` with its queue chosen; ``Refusal`` (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) if
    the message's type is not the topic's and ``check_type`` (the broker's
    ``enableTopicMessageTypeCheck``). A message with a message group goes to the write queue its
    group hashes to, whatever queue the client named; others to any write queue (the send
    service picks one), as the Java proxy's ``selectOneByPipeline``: the official clients name
    queue 0 in every message, and taking it piled every message of a topic into one queue."""
    properties = decode_properties(request.properties)
    problem = type_conflict(
        config.topic_name, topic_message_type(config), message_type_of(properties)
    )
    if problem is not None and check_type:
        raise Refusal(status(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, problem))
    group = properties.get(PROPERTY_SHARDING_KEY)
    request.queue_id = -1 if group is None else queue_of_group(group, config.write_queue_nums)
    return request
