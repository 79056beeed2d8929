"""Routes, settings, sends and receives of the stand-alone proxy over the masters' remoting
(part of ``proxy.remote_backend``).

Routes answer the topic's queues with the broker group names kept and **the proxy's endpoint**
for every group (as the Java proxy does in cluster mode), so a client never needs a new route
after a failover: the proxy finds the new master and the client's address stays good. A
topic's message type comes from a master (``proxy.cluster_topic_types``), a group's
orderliness too (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).

A send is SEND_MESSAGE_V2 (one message) or SEND_BATCH_MESSAGE (several that share a queue:
one append), its header ``wire.headers.SendMessageRequestHeaderV2``, to the master of the
chosen queue's group; sends are at-least-once: a send whose outcome is unknown (the master died
with the request in flight) is sent again to the new master, as our ``Producer`` does, so a
message acknowledged to the client is stored, and may be stored twice. A receive is
POP_MESSAGE (200050) to the assignment's group; its receipt handle is the broker's ``POP_CK``,
which names its broker group, so an ack goes to that group's master whichever proxy or master
handed the message out.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from ledgermq.errors import LedgerMQError, TopicNotFoundError
from ledgermq.messaging import Delivered, Delivery, Door, Limits, PullOutcome, Sent, TopicRoute
from ledgermq.proxy.cluster_topic_types import TopicTypes
from ledgermq.proxy.cluster_transactions import transaction_id
from ledgermq.proxy.forward import write_queues
from ledgermq.proxy.message_types import TopicMessageType
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.name_status import DEFAULT_MAX_SUBSCRIPTIONS
from ledgermq.proxy.placement import place
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, status
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.headers import PopMessageRequestHeader, SendMessageRequestHeaderV2
from ledgermq.wire.message import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MessageProperty,
    SysFlag,
    decode_records,
)
from ledgermq.wire.route import is_readable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from ledgermq.messaging import Receive, Sending
    from ledgermq.proxy.forward import Forwarder
    from ledgermq.wire.route import TopicRouteData

__all__ = ["POP_CK", "RemoteMessages", "Stored", "refusing"]

_log = logging.getLogger(__name__)

POP_CK: Final = "POP_CK"
"""``MessageConst.PROPERTY_POP_CK``: where a popped record carries its receipt handle."""
_DEFAULT_TOPIC: Final = "TBW102"
_DEFAULT_QUEUE_NUMS: Final = 4
_SEND_ANSWERS: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.FLUSH_DISK_TIMEOUT,
    MQResponseCode.FLUSH_SLAVE_TIMEOUT,
    MQResponseCode.SLAVE_NOT_AVAILABLE,
)
"""A stored send's answers (the last three: stored, a durability wait not met)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A master's answer to a forwarded send."""

    msg_ids: Sequence[str]
    """Offset message ids, one per message."""
    queue_id: int
    queue_offset: int
    recall_handle: str


_T = TypeVar("_T")


async def refusing(call: Awaitable[_T], topic: str) -> _T:
    """``call``'s answer; its failure as the ``Refusal`` the client reads (TOPIC_NOT_FOUND when
    no NameServer knows ``topic``, else ``proxy.remote_status``'s)."""
    try:
        return await call
    except TopicNotFoundError:
        raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")) from None
    except LedgerMQError as exc:
        raise Refusal(remote_status(exc)) from None


class RemoteMessages:
    """Routes, settings, sends and receives over a ``Forwarder`` (module docstring)."""

    def __init__(
        self,
        forwarder: Forwarder,
        endpoint: Door | None,
        *,
        check_message_type: bool,
        max_body_size: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """``endpoint``: the door routes name for every group (the proxy's own; None: this
        backend answers no route, a replica's door asks its NameServers itself)."""
        self._forward = forwarder
        self._endpoint = endpoint
        self._check_type = check_message_type
        """``enableTopicMessageTypeCheck``: a send must match its topic's ``message.type``."""
        self._max_body = max_body_size
        """``maxMessageSize``: the largest body a send may carry (told to the clients)."""
        self._types = TopicTypes(forwarder)
        self._counter = itertools.count()

    # ------------------------------------------------------------------ routes and settings
    async def _route(self, topic: str) -> TopicRouteData:
        """A NameServer's route now, else the cached one (a NameServer restart)."""
        try:
            return await self._forward.route(topic, refresh=True)
        except TopicNotFoundError:
            cached = self._forward.client.cached_route(topic)
            if cached is None:
                raise
            return cached

    async def route(self, topic: str) -> TopicRoute:
        try:
            route = await self._route(topic)
        except TopicNotFoundError:
            raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")) from None
        except LedgerMQError as exc:
            raise Refusal(
                status(Code.INTERNAL_ERROR, f"route of {topic} not found: {exc}")
            ) from None
        datas = sorted(route.queue_datas, key=lambda q: q.broker_name)
        doors = [] if self._endpoint is None else [self._endpoint]
        kind = await self._types.kind(topic) if self._check_type else None
        return TopicRoute(
            datas,
            {data.broker_name: doors for data in datas},
            kind,
            f"topic {topic} has no queue on any broker",
        )

    def limits(self) -> Limits:
        return Limits(
            max_body_size=self._max_body,
            validate_message_type=True,
            max_subscriptions=DEFAULT_MAX_SUBSCRIPTIONS,
        )

    async def consumes_orderly(self, group: str, topics: Sequence[str]) -> bool:
        """As the master of a broker group of the first topic holds it
        (GET_ALL_SUBSCRIPTIONGROUP_CONFIG); False when no master says so."""
        if not (group and topics):
            return False
        try:
            route = await self._route(topics[0])
            brokers = sorted(d.broker_name for d in route.queue_datas)
            if not brokers:
                return False
            forwarded = await self._forward.call(
                topics[0], brokers[0], MQRequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {},
                deadline_s=3.0,
            )  # fmt: skip
            table = json.loads(forwarded.response.body or b"{}").get("subscriptionGroupTable")
        except (LedgerMQError, ValueError) as exc:
            _log.info("cannot tell whether group %s is orderly: %s", group, exc)
            return False
        config = table.get(group) if isinstance(table, dict) else None
        return isinstance(config, dict) and config.get("consumeMessageOrderly") is True

    # ------------------------------------------------------------------ send
    async def send(self, sending: Sending, deadline_s: float) -> Sent:
        topic = sending.topic
        route = await refusing(self._route(topic), topic)
        queues = write_queues(route)
        if not queues:
            raise Refusal(status(Code.FORBIDDEN, f"topic {topic} has no writable queue"))
        kind = await self._types.kind(topic) if self._check_type else None
        group_queue = place(
            [m.properties for m in sending.messages],
            kind or TopicMessageType.MIXED,
            len(queues),
            topic,
            check_type=kind is not None,
        )
        # a message group keeps its queue (FIFO: the Java proxy's hash, as the replicas' doors
        # place it, the same queue for one broker group); others go round the queues
        index = group_queue if group_queue >= 0 else next(self._counter)
        chosen = queues[index % len(queues)]
        first = sending.messages[0]
        header = SendMessageRequestHeaderV2(
            producer_group=GRPC_PRODUCER_GROUP, topic=topic, default_topic=_DEFAULT_TOPIC,
            default_topic_queue_nums=_DEFAULT_QUEUE_NUMS, queue_id=chosen.queue_id,
            sys_flag=SysFlag.COMPRESSED if first.compressed else 0,
            born_timestamp=first.born_ms, flag=0, properties=sending.properties_text(),
            reconsume_times=first.reconsume_times, max_reconsume_times=None,
            batch=len(sending.messages) > 1, broker_name=chosen.broker_name,
        )  # fmt: skip
        stored = await self.store(header, sending.body(), deadline_s)
        half = first.properties.get(MessageProperty.TRAN_MSG) == "true"
        return Sent(
            queue_offset=stored.queue_offset,
            transaction_id=(
                transaction_id(chosen.broker_name, stored.msg_ids[0])
                if half and stored.msg_ids
                else ""
            ),
            recall_handle=stored.recall_handle,
        )

    async def store(
        self, header: SendMessageRequestHeaderV2, body: bytes, deadline_s: float
    ) -> Stored:
        """``header``'s send to the master of its broker group (``Refusal`` when it fails)."""
        code = MQRequestCode.SEND_BATCH_MESSAGE if header.batch else MQRequestCode.SEND_MESSAGE_V2
        forwarded = await refusing(
            self._forward.call(
                header.topic, header.broker_name, code, header.to_ext_fields(), body,
                deadline_s=deadline_s, expect=_SEND_ANSWERS,
            ),
            header.topic,
        )  # fmt: skip
        if forwarded.unknown_before:
            _log.warning("a send to %s was sent again after a failover; it may be stored twice",
                         header.topic)  # fmt: skip
        ext = forwarded.response.ext_fields
        return Stored(
            msg_ids=[m for m in ext.get("msgId", "").split(",") if m],
            queue_id=int(ext.get("queueId", header.queue_id) or header.queue_id),
            queue_offset=int(ext.get("queueOffset", "0") or 0),
            recall_handle=ext.get("recallHandle", ""),
        )

    # ------------------------------------------------------------------ POP
    async def receive(self, request: Receive, deadline_s: float) -> Delivered:
        """POP_MESSAGE to the assignment's broker group (any readable one when none named)."""
        broker_name = request.broker_name or await self._any_readable(request.topic)
        header = PopMessageRequestHeader(
            consumer_group=request.group, topic=request.topic,
            max_msg_nums=request.max_messages, invisible_time=request.invisible_ms,
            queue_id=-1, poll_time=request.poll_ms, born_time=0, init_mode=0,
            exp_type=request.expression_type or "TAG", exp=request.expression,
        )  # fmt: skip
        forwarded = await refusing(
            self._forward.call(
                request.topic, broker_name, MQRequestCode.POP_MESSAGE, header.to_ext_fields(),
                deadline_s=max(deadline_s, request.poll_ms / 1000),
                timeout_s=request.poll_ms / 1000 + 3.0,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.PULL_NOT_FOUND),
            ),
            request.topic,
        )  # fmt: skip
        response = forwarded.response
        records = decode_records(response.body) if response.code == MQResponseCode.SUCCESS else []
        invisible_ms = int(response.ext_fields.get("invisibleTime") or request.invisible_ms)
        delivered = []
        for record in records:
            handle = record.properties.pop(POP_CK, "")
            delivered.append(Delivery(record, handle, record.reconsume_times + 1, invisible_ms))
        return Delivered(
            PullOutcome.FOUND if delivered else PullOutcome.NOT_FOUND,
            delivered,
            pop_time_ms=int(response.ext_fields.get("popTime", 0) or 0),
        )

    async def _any_readable(self, topic: str) -> str:
        route = await refusing(self._route(topic), topic)
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if is_readable(data.perm):
                return data.broker_name
        raise Refusal(status(Code.FORBIDDEN, f"topic {topic} has no readable queue"))
