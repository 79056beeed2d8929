"""A v5 send in a replica's door (``proxy.local_backend``): placed here, stored by the replica's
send service, or by the group's master while this replica is not it.

Routes name every replica's door for its group (``proxy.routes``), so a v5 client may send to a
follower: right after a failover the client's retry goes to another endpoint of the route, and
the official Node.js client (1.0.8) keeps the endpoints of its first route for good. Such a
door serves the send as the master's door would: the request is read, checked (the ACL, at the
door the call arrives at) and placed exactly as there, and only storing it goes to the master,
over remoting (``RemoteBackend.store``: the master found in the NameServers' route, retried with
a back-off across an election until the client's deadline). The client reads the same answer
it would have from the master's door: the queue offset, the offset message id as the
transaction id, the recall handle.

The forwarded request is signed with the broker's own account (``aclAccessKey``): the client's
``authorization`` (an HMAC of a date, over the gRPC metadata) cannot be replayed as a remoting
signature, so the door that received the call is the one that authorizes it (PUB on each
message's topic), and the master trusts the broker's account. A forwarded send never creates
its topic (no default topic is named). Send is at-least-once across the failover, as through
the stand-alone proxy: a send whose outcome is unknown is sent again to the new master.

A request's messages that share a queue are one append (``Sending``), committed in one entry:
the replica's send service takes them as they are (``messaging.SendRequest.of``); a forwarded
send carries one message as itself, several as RocketMQ's batch (``SEND_BATCH_MESSAGE``'s
encoding).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from ledgermq.broker.errors import NotMasterError, ServiceError
from ledgermq.broker.service.send import SendResult
from ledgermq.errors import LedgerMQError
from ledgermq.messaging import SendRequest, Sent
from ledgermq.proxy.message_types import topic_message_type
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.placement import place
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, error_status, status
from ledgermq.proxy.transactions import transaction_id
from ledgermq.wire.headers import SendMessageRequestHeaderV2
from ledgermq.wire.message import MessageProperty

if TYPE_CHECKING:
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.messaging import Sending
    from ledgermq.proxy.remote_backend import RemoteBackend

__all__ = ["LocalSender"]


class LocalSender:
    """``send``: the service here when this replica is the master, else forwarded to the
    group's master (module docstring). ``remote`` None: nothing is forwarded (a broker with no
    NameServer), and a follower answers as its services do."""

    def __init__(
        self, state: BrokerState, services: BrokerServices, remote: RemoteBackend | None
    ) -> None:
        self._state = state
        self._services = services
        self._remote = remote
        self._counter = itertools.count()

    async def send(self, sending: Sending, deadline_s: float) -> Sent:
        state = self._state
        request = SendRequest.of(
            sending, GRPC_PRODUCER_GROUP, state.config.default_topic_queue_nums
        )
        config = state.topics.find(sending.topic)
        if state.is_master and config is None:
            # A v5 send never creates its topic (the Java proxy picks the queue from the
            # topic's route first, and answers TOPIC_NOT_FOUND when there is none). Only the
            # master's answer counts: a slave may not have applied a topic the master just
            # created, and forwards the send to the master.
            raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {sending.topic} does not exist"))
        if config is not None:
            request.queue_id = place(
                [m.properties for m in sending.messages],
                topic_message_type(config),
                config.write_queue_nums,
                sending.topic,
                check_type=state.config.enable_topic_message_type_check,
            )
        tracer = self._services.trace
        started_ms = tracer.now_ms() if tracer is not None else 0
        write_queues = config.write_queue_nums if config is not None else 0
        try:
            result = await self._store(request, sending, deadline_s, write_queues)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        except LedgerMQError as exc:
            raise Refusal(status(Code.INTERNAL_ERROR, str(exc))) from None
        if tracer is not None:
            for message, offset_msg_id in zip(sending.messages, result.msg_ids, strict=False):
                props = message.properties
                tracer.pub(
                    timestamp_ms=started_ms, group=request.producer_group, topic=sending.topic,
                    msg_id=props.get(MessageProperty.UNIQ_KEY, ""),
                    tags=props.get(MessageProperty.TAGS, ""),
                    keys=props.get(MessageProperty.KEYS, ""), body_length=len(message.body),
                    cost_ms=tracer.now_ms() - started_ms, offset_msg_id=offset_msg_id,
                )  # fmt: skip
        half = sending.messages[0].properties.get(MessageProperty.TRAN_MSG) == "true"
        return Sent(
            queue_offset=result.queue_offset,
            transaction_id=transaction_id(result.msg_ids[0]) if half and result.msg_ids else "",
            recall_handle=result.recall_handle or "",
        )

    async def _store(
        self, request: SendRequest, sending: Sending, deadline_s: float, write_queues: int
    ) -> SendResult:
        """Store ``request`` (made of ``sending``: the service takes its messages as they are;
        only a forwarded send encodes them, as RocketMQ's batch when more than one);
        ``write_queues``: the topic's write queue count here (0: not known here), for a
        message placed on any queue."""
        if self._remote is None or self._state.is_master:
            try:
                return await self._services.send.send(request, b"", sending.born_host)
            except NotMasterError:
                if self._remote is None:
                    raise  # nothing to forward with: the client goes elsewhere
        queue_id = request.queue_id
        if queue_id < 0 and write_queues > 0:
            queue_id = next(self._counter) % write_queues  # what the master's service would pick
        broker_name = self._state.config.broker_name
        header = SendMessageRequestHeaderV2(
            producer_group=request.producer_group, topic=request.topic, default_topic=None,
            default_topic_queue_nums=request.default_topic_queue_nums, queue_id=queue_id,
            sys_flag=request.sys_flag, born_timestamp=request.born_timestamp, flag=request.flag,
            properties=sending.properties_text(), reconsume_times=request.reconsume_times,
            max_reconsume_times=request.max_reconsume_times, batch=request.batch,
            broker_name=broker_name,
        )  # fmt: skip
        stored = await self._remote.store(header, sending.body(), deadline_s)
        return SendResult(
            msg_ids=list(stored.msg_ids),
            queue_id=stored.queue_id,
            queue_offset=stored.queue_offset,
            unique_key=None,
            recall_handle=stored.recall_handle or None,
        )
