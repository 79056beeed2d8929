"""A POP consumer over remoting: RocketMQ 5's POP_MESSAGE (200050), ACK_MESSAGE (200051) and
CHANGE_MESSAGE_INVISIBLETIME (200053), typed.

POP is broker-side consumption: the broker picks the queue and the messages, hands them out
invisible for a time, and forgets them only when they are acknowledged; one not acknowledged in
time comes back with its attempt + 1. So the consumer keeps no offsets and no queue assignment:
it only names a broker group (each group keeps its own POP state, served by its master) and
acks each message by the receipt handle the broker gave it (``POP_CK``).

Requests go to the master of the group, found in the topic's route like every write; a receive
and an ack are tried once more after a route refresh when the broker failed or said it is not
the master (both are safe to repeat: a repeated receive only hands out other messages, a
repeated ack of a settled message is accepted). A change of invisible time is not repeated: its
old handle is stale once it took effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.client._group_client import GroupClient
from ledgermq.client._routing import MessageQueue, subscribe_queues
from ledgermq.wire import MQRequestCode, MQResponseCode, decode_records
from ledgermq.wire.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)

if TYPE_CHECKING:
    from ledgermq.wire import MessageExt

__all__ = ["POP_CK", "PopConsumer", "PopReceiveResult", "PoppedMessage"]

POP_CK: Final = "POP_CK"
"""The property that carries a popped message's receipt handle (``PROPERTY_POP_CK``)."""


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    """One delivery: the message, the handle that names this delivery, its attempt (1 for
    the first delivery), and the broker group that handed it out."""

    message: MessageExt
    handle: str
    attempt: int
    broker_name: str

    @property
    def queue_id(self) -> int:
        return self.message.queue_id

    @property
    def queue_offset(self) -> int:
        return self.message.queue_offset


@dataclass(frozen=True, slots=True)
class PopReceiveResult:
    """One receive's answer (``messages`` empty: nothing was due within the poll time)."""

    messages: list[PoppedMessage]
    pop_time_ms: int
    invisible_ms: int


def handle_position(handle: str) -> tuple[str, int, int]:
    """``(broker name, queue id, queue offset)`` of a receipt handle (RocketMQ 5's
    ``ExtraInfoUtil`` layout: ``<ck> <popTime> <invisible> <reviveQid> <type> <broker>
    <queueId> <offset>``); ``ValueError`` for anything else."""
    fields = handle.split(" ")
    if len(fields) != 8 or not fields[6].isdigit() or not fields[7].isdigit():
        raise ValueError(f"not a receipt handle: {handle!r:.120}")
    return fields[5], int(fields[6]), int(fields[7])


class PopConsumer(GroupClient):
    """A consumer group's POP door (module docstring).

    Args:
        group: the consumer group (the broker keeps its POP state per group).
        namesrv_addr: ``"host:port;host:port"``.
        request_timeout_s: timeout of one request (a receive adds its poll time).
        network, client_id, instance_name, clock, credentials, tls,
        route_refresh_interval_s: see ``ClientInstance``.
    """

    async def broker_names(self, topic: str) -> list[str]:
        """The broker groups with readable queues of ``topic`` (looked up at the NameServer
        now), sorted: a receive names one of them."""
        route = await self._client.topic_route(topic, refresh=True)
        return sorted({mq.broker_name for mq in subscribe_queues(topic, route)})

    async def receive(
        self,
        topic: str,
        broker_name: str,
        *,
        max_messages: int = 32,
        invisible_s: float = 30.0,
        poll_s: float = 0.0,
        queue_id: int = -1,
        expression: str = "*",
    ) -> PopReceiveResult:
        """Up to ``max_messages`` messages of ``topic`` from ``broker_name``'s master (queue
        ``queue_id``, -1: any), invisible to the group for ``invisible_s``; the broker waits
        up to ``poll_s`` for one when none is due. Raises what the broker refused with
        (``MQResponseError``) or a network error."""
        fields = PopMessageRequestHeader(
            self.group,
            topic,
            max_messages,
            round(invisible_s * 1000),
            queue_id,
            round(poll_s * 1000),
            born_time=self._client.wall_ms(),
            init_mode=0,
            exp_type="TAG",
            exp=expression,
        ).to_ext_fields()
        answer = await self._api.call(
            MessageQueue(topic, broker_name, max(queue_id, 0)),
            MQRequestCode.POP_MESSAGE,
            fields,
            master=True,
            timeout_s=self.request_timeout_s + poll_s,
            expect=(MQResponseCode.SUCCESS, MQResponseCode.PULL_NOT_FOUND),
        )
        header = answer.ext_fields
        messages = []
        if answer.code == MQResponseCode.SUCCESS:
            for message in decode_records(answer.body):
                handle = message.properties.get(POP_CK, "")
                attempt = message.reconsume_times + 1
                messages.append(PoppedMessage(message, handle, attempt, broker_name))
        return PopReceiveResult(
            messages,
            int(header.get("popTime", "0") or 0),
            int(header.get("invisibleTime", "0") or 0),
        )

    async def ack(self, topic: str, handle: str) -> None:
        """Acknowledge the delivery ``handle`` names: the message is done for the group.
        Raises ``MQResponseError`` (NO_MESSAGE: a stale handle, the message was handed out
        again since) or a network error (the ack may or may not have taken effect)."""
        broker_name, queue_id, offset = handle_position(handle)
        fields = AckMessageRequestHeader(
            self.group, topic, handle, queue_id, offset
        ).to_ext_fields()
        await self._api.call(
            MessageQueue(topic, broker_name, queue_id), MQRequestCode.ACK_MESSAGE, fields,
            master=True,
        )  # fmt: skip

    async def change_invisible_time(self, topic: str, handle: str, invisible_s: float) -> str:
        """Make the delivery ``handle`` names invisible for ``invisible_s`` from now; the new
        handle (the old one is stale once this succeeded)."""
        broker_name, queue_id, offset = handle_position(handle)
        fields = ChangeInvisibleTimeRequestHeader(
            self.group, topic, handle, round(invisible_s * 1000), queue_id, offset
        ).to_ext_fields()
        answer = await self._api.call(
            MessageQueue(topic, broker_name, queue_id),
            MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            fields,
            master=True,
            attempts=1,
        )
        return answer.ext_fields.get("extraInfo", "")
