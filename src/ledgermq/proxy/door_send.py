"""SendMessage at the gRPC door (part of ``proxy.door``): a v5 request's messages committed
together.

Each message is read once (``proxy.messages.outgoing``: the mapping, the body limit, the names,
the timestamps). Messages that go to one queue are one append (``Sending``: one replicated entry,
RocketMQ's batch for several): those of one topic with the same message group (FIFO: the group's
queue), body encoding and delivery attempt; a half message or a timer message alone, as the
broker stores those only one by one (RocketMQ has no batch of either). The backend places and
stores each ``Sending``; all its messages get its one answer.

The answer has one entry per message, in order (the clients check there is exactly one per
message they sent); the response's status is the entries' common one, else MULTIPLE_RESULTS,
as the Java proxy's ``SendMessageActivity`` answers (the protocol's "some implementation may
have partial failure issues": a request whose messages go to several queues is several appends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledgermq.messaging import Sending
from ledgermq.proxy.messages import PROPERTY_SHARDING_KEY, outgoing
from ledgermq.proxy.name_status import send_topic_refusal
from ledgermq.proxy.protocol import service_pb2
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, common_status, ok, status
from ledgermq.security.acl import Needs, Perm
from ledgermq.security.acl.resources import topic_resource
from ledgermq.wire.message import MessageProperty

if TYPE_CHECKING:
    from collections.abc import Sequence

    import grpc.aio

    from ledgermq.messaging import Outgoing
    from ledgermq.proxy.door import DoorServicer

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["send_message", "sendings"]

_ALONE = (MessageProperty.TRAN_MSG, MessageProperty.TIMER_DELIVER_MS)
"""Properties of messages the broker stores one by one (a half message, a timer message)."""


def sendings(
    topics: Sequence[str], messages: Sequence[Outgoing], born_host: str
) -> list[tuple[Sending, list[int]]]:
    """The appends of a request's messages (module docstring), in the order of their first
    message; each with the indices of its messages."""
    found: dict[object, tuple[str, list[Outgoing], list[int]]] = {}
    for index, (topic, message) in enumerate(zip(topics, messages, strict=True)):
        props = message.properties
        alone = any(name in props for name in _ALONE)
        key: object = (
            ("alone", index)
            if alone
            else (
                topic,
                props.get(PROPERTY_SHARDING_KEY),
                message.compressed,
                message.reconsume_times,
            )
        )
        entry = found.setdefault(key, (topic, [], []))
        entry[1].append(message)
        entry[2].append(index)
    return [
        (Sending(topic, group, born_host, group[0].properties.get(PROPERTY_SHARDING_KEY)), indices)
        for topic, group, indices in found.values()
    ]


async def send_message(
    door: DoorServicer, request: service_pb2.SendMessageRequest, context: Context
) -> service_pb2.SendMessageResponse:
    """SendMessage (module docstring)."""
    needs = Needs(resources={topic_resource(m.topic.name): Perm.PUB for m in request.messages})
    if (refused := door._admit(context, "SendMessage", needs)) is not None:
        return service_pb2.SendMessageResponse(status=refused)
    if not request.messages:
        return service_pb2.SendMessageResponse(
            status=status(Code.BAD_REQUEST, "the request holds no message")
        )
    backend = door.backend
    peer = door.peer(context)
    peer_host = peer.rpartition(":")[0]
    max_body = backend.limits().max_body_size
    entries = [
        service_pb2.SendResultEntry(message_id=m.system_properties.message_id)
        for m in request.messages
    ]
    topics: list[str] = []
    taken: list[Outgoing] = []
    kept: list[int] = []
    for index, message in enumerate(request.messages):
        try:
            taken_one = outgoing(message, peer_host, max_body)
            if (refused := send_topic_refusal(message.topic.name)) is not None:
                raise Refusal(refused)  # noqa: TRY301 - answered below, as every refusal
        except Refusal as refusal:
            entries[index].status.CopyFrom(refusal.status)
            continue
        taken.append(taken_one)
        topics.append(message.topic.name)
        kept.append(index)
    deadline = door._deadline_s(context)
    for sending, indices in sendings(topics, taken, peer):
        positions = [kept[i] for i in indices]
        try:
            sent = await backend.send(sending, deadline)
        except Refusal as refusal:
            for position in positions:
                entries[position].status.CopyFrom(refusal.status)
            continue
        for n, position in enumerate(positions):
            entry = entries[position]
            entry.status.CopyFrom(ok())
            entry.offset = sent.queue_offset + n
            entry.transaction_id = sent.transaction_id
            entry.recall_handle = sent.recall_handle
    overall = common_status([e.status for e in entries])
    return service_pb2.SendMessageResponse(status=overall, entries=entries)
