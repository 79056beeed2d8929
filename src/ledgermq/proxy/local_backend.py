"""The ``Backend`` of a replica's own gRPC door: the replica's ``BrokerServices`` (local mode).

Routes name every replica's door for its group (``proxy.routes``), so a call may reach a
follower. While this replica is not the master, what only the master serves goes there through
a ``RemoteBackend`` (the stand-alone proxy's way, over remoting, signed with the broker's own
account: the call was authorized at this door): acknowledgements, invisible-time changes and
dead letters (POP's state is the master's), transaction ends, and recalls (also those whose
handle names another broker group, whatever this replica's role), and a group's committed
offsets (a follower's copy may lag). Pulls and QueryOffset are served here in any role (queues
hold only committed messages). A door with no NameServer to find its master by has no remote
backend, and a follower answers as its services do.

Routes come from the NameServers (``proxy.routes``: every replica's door of each group), a
topic's message type and a group's orderliness from this replica's metadata; a send is placed
and stored by ``proxy.local_send`` (forwarded to the master while this replica is not it); a
POP receive is served by the pop service on the master, and forwarded to the master from a
follower. v5 clients' sessions go into the broker's client registry
(``broker.service.client_registry``, which the remoting heartbeats feed too), checked as a
remoting heartbeat is (``ClientService.client_alive``), so ``consumer-connection``, the console
and the metrics list them.

A transaction id is the half message's offset message id (``proxy.transactions``); a service's
refusal becomes a status through ``proxy.status``, its one table.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ledgermq.broker.errors import NotMasterError, ServiceError
from ledgermq.broker.service.access import OPEN_ACCESS
from ledgermq.broker.service.timers import RecallHandle
from ledgermq.broker.service.transactions import EndTransactionRequest
from ledgermq.errors import LedgerMQError, MessageFormatError
from ledgermq.messaging import Door, Limits, OffsetPolicy, TopicRoute
from ledgermq.proxy.local_send import LocalSender
from ledgermq.proxy.message_types import TopicMessageType, topic_message_type
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.replica_access import GrpcAccess
from ledgermq.proxy.routes import TopicNotFound
from ledgermq.proxy.status import Code, error_status, status
from ledgermq.proxy.transactions import TelemetryProducers
from ledgermq.wire.message import decode_offset_message_id

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.pop import PoppedMessage
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.messaging import (
        AckEntry,
        Caller,
        ClientSession,
        Delivered,
        EndTransaction,
        PullQuery,
        QueueRef,
        Receive,
        Sending,
        Sent,
    )
    from ledgermq.proxy.remote_backend import RemoteBackend
    from ledgermq.proxy.routes import RouteFinder
    from ledgermq.security.gate import AclGate

__all__ = ["LocalBackend"]


class LocalBackend:
    """``Backend`` over a replica's services (module docstring). ``routes``: the NameServers'
    routes and the replicas' doors; ``remote``: the way to the group's master while this
    replica is not it (None: none, the services answer)."""

    def __init__(
        self,
        services: BrokerServices,
        state: BrokerState,
        routes: RouteFinder,
        acl: AclGate | None,
        remote: RemoteBackend | None = None,
    ) -> None:
        self._services = services
        self._state = state
        self._routes = routes
        self._acl = acl
        self._remote = remote
        self._sender = LocalSender(state, services, remote)
        self.streams = TelemetryProducers()
        """v5 producers' Telemetry streams: where check-backs of gRPC half messages go."""
        services.transactions.channels.append(self.streams)

    # ------------------------------------------------------------------ routes and settings
    async def route(self, topic: str) -> TopicRoute:
        try:
            route = await self._routes.route(topic)
            endpoints = await self._routes.group_endpoints(route)
        except TopicNotFound as exc:
            raise Refusal(status(Code.TOPIC_NOT_FOUND, str(exc))) from None
        except LedgerMQError as exc:
            raise Refusal(
                status(Code.INTERNAL_ERROR, f"route of {topic} not found: {exc}")
            ) from None
        local = self._state.topics.find(topic)
        # Every group of a topic has its attributes (admin creates it on every master alike);
        # this replica knows its own.
        kind = topic_message_type(local) if local is not None else TopicMessageType.MIXED
        if not self._state.config.enable_topic_message_type_check:
            kind = TopicMessageType.MIXED  # every type goes
        # Every replica's door, each as broker id 0: the official clients send only to a queue
        # of id 0, and a follower's door forwards the writes (proxy.local_send).
        doors = {name: [Door(e.host, e.port) for e in found] for name, found in endpoints.items()}
        return TopicRoute(
            route.queue_datas, doors, kind,
            f"topic {topic} has no broker group with a replica serving gRPC now "
            "(grpcServerPort=-1 on them, or none registered)",
        )  # fmt: skip

    def limits(self) -> Limits:
        config = self._state.config
        return Limits(
            max_body_size=config.max_message_size,
            validate_message_type=config.enable_topic_message_type_check,
            max_subscriptions=config.heartbeat_max_subscriptions,
        )

    async def consumes_orderly(self, group: str, topics: Sequence[str]) -> bool:
        found = self._state.metadata.groups.get(group)
        return found is not None and found.consume_message_orderly

    # ------------------------------------------------------------------ send and receive
    async def send(self, sending: Sending, deadline_s: float) -> Sent:
        return await self._sender.send(sending, deadline_s)

    async def receive(self, request: Receive, deadline_s: float) -> Delivered:
        if (remote := self._master_elsewhere()) is not None:
            # the master's door serves its own group's queue whatever broker the queue names,
            # and the master needs the name
            named = request.broker_name or self._state.config.broker_name
            return await remote.receive(dataclasses.replace(request, broker_name=named), deadline_s)
        tracer = self._services.trace
        trace = None
        if tracer is not None:
            group = request.group

            def trace(popped: PoppedMessage) -> None:
                tracer.delivered(group=group, popped=popped)

        try:
            return await self._services.pop.deliver(request, trace)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None

    # ------------------------------------------------------------------ client sessions
    async def client_alive(self, session: ClientSession) -> None:
        """Into the broker's client registry, checked and bounded as a remoting heartbeat is
        (``ClientService.client_alive``); a consumer group seen on the master gets its
        subscription config and retry topic. While this replica is not the master, the master
        hears of the client too (a remoting heartbeat with the client's id, as the stand-alone
        proxy sends it): the views ask masters."""
        try:
            await self._services.clients.client_alive(
                session.heartbeat(GRPC_PRODUCER_GROUP), None, session.language, 0,
                session.address,
            )  # fmt: skip
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        if (remote := self._master_elsewhere()) is not None:
            await remote.client_alive(session)

    async def client_gone(self, client_id: str, group: str) -> None:
        self._services.clients.client_gone(client_id, group or None)
        if (remote := self._master_elsewhere()) is not None:
            await remote.client_gone(client_id, group)

    def _master_elsewhere(self) -> RemoteBackend | None:
        """The remote backend, when this replica is not the master and has one."""
        return None if self._state.is_master else self._remote

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> list[Refusal | None]:
        if (remote := self._master_elsewhere()) is not None:
            return await remote.ack(group, topic, entries, deadline_s)
        # one replicated op per queue for the whole batch (PopService.ack_many)
        errors = await self._services.pop.ack_many(
            group, topic, [entry.receipt_handle for entry in entries]
        )
        tracer = self._services.trace
        answers: list[Refusal | None] = []
        for entry, error in zip(entries, errors, strict=True):
            if error is not None:
                answers.append(Refusal(error_status(error)))
                continue
            if tracer is not None:
                tracer.acked(group=group, msg_id=entry.message_id, handle=entry.receipt_handle)
            answers.append(None)
        return answers

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int, deadline_s: float
    ) -> str:
        if (remote := self._master_elsewhere()) is not None:
            return await remote.change_invisible(
                group, topic, receipt_handle, invisible_ms, deadline_s
            )
        try:
            handle = await self._services.pop.change_invisible(
                group, topic, receipt_handle, invisible_ms
            )
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        return str(handle)

    async def forward_to_dead_letters(
        self, group: str, topic: str, receipt_handle: str, deadline_s: float
    ) -> None:
        if (remote := self._master_elsewhere()) is not None:
            await remote.forward_to_dead_letters(group, topic, receipt_handle, deadline_s)
            return
        try:
            await self._services.pop.forward_to_dead_letters(group, topic, receipt_handle)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None

    async def end_transaction(
        self, request: EndTransaction, caller: Caller, deadline_s: float
    ) -> None:
        """The caller needs PUB on the half message's real topic (checked by the service on
        the master; a forwarded end names the topic the door granted PUB on, and the master
        checks that it is the half message's)."""
        try:
            offset = decode_offset_message_id(request.transaction_id)[2]
        except (MessageFormatError, ValueError):
            raise Refusal(
                status(
                    Code.INVALID_TRANSACTION_ID,
                    f"transaction_id {request.transaction_id!r} is not one this broker gave",
                )
            ) from None
        remote = self._master_elsewhere()
        if remote is None:
            end = EndTransactionRequest(
                commit_log_offset=offset,
                resolution=request.resolution,
                msg_id=request.message_id or None,
                from_check=request.from_check,
                topic=request.topic or None,
            )
            try:
                await self._services.transactions.end(end, self._access(caller))
            except NotMasterError as exc:
                if self._remote is None:
                    raise Refusal(error_status(exc)) from None
                remote = self._remote  # stepped down meanwhile
            except ServiceError as exc:
                raise Refusal(error_status(exc)) from None
            else:
                return
        await remote.end_at(self._state.config.broker_name, offset, request, deadline_s)

    def _access(self, caller: Caller) -> Access:
        """The caller, for the checks the service makes once it has read a record."""
        if self._acl is None:
            return OPEN_ACCESS
        return GrpcAccess(
            self._acl, caller.address, caller.metadata, caller.request,
            self._state.clock.wall_time_s,
        )  # fmt: skip

    async def recall(self, topic: str, recall_handle: str, deadline_s: float) -> str:
        """The handle's master decides: the client calls any endpoint it knows."""
        try:
            handle = RecallHandle.parse(recall_handle)
            if handle.broker_name == self._state.config.broker_name and self._state.is_master:
                return await self._services.timers.recall(topic, recall_handle)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        if self._remote is None:
            raise Refusal(
                status(
                    Code.HA_NOT_AVAILABLE,
                    f"recall not forwarded: this replica knows no NameServer to find the "
                    f"master of {handle.broker_name} by",
                )
            )
        return await self._remote.recall(topic, recall_handle, deadline_s)

    # ------------------------------------------------------------------ pull and offsets
    def _queue(self, queue: QueueRef) -> tuple[str, int]:
        """(topic, queue id) of a queue of this broker group; ``Refusal`` for another group's,
        a topic this replica does not have, or a queue id the topic has not."""
        topic, mine = queue.topic, self._state.config.broker_name
        if queue.broker_name and queue.broker_name != mine:
            raise Refusal(
                status(
                    Code.BAD_REQUEST,
                    f"the queue belongs to broker {queue.broker_name}; this is broker {mine} "
                    "(send the request to the endpoint the route gives that broker)",
                )
            )
        config = self._state.topics.find(topic)
        if config is None:
            raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
        if not 0 <= queue.queue_id < config.read_queue_nums:
            raise Refusal(
                status(
                    Code.BAD_REQUEST,
                    f"queue id {queue.queue_id} is not one of topic {topic}'s "
                    f"{config.read_queue_nums} read queues",
                )
            )
        return topic, queue.queue_id

    def _named(self, queue: QueueRef) -> QueueRef:
        """``queue`` with this replica's group named, for the master's door."""
        if queue.broker_name:
            return queue
        return dataclasses.replace(queue, broker_name=self._state.config.broker_name)

    async def pull(self, query: PullQuery, deadline_s: float) -> Delivered:
        self._queue(query.queue)  # this group's, a topic and a queue id it has
        try:
            return await self._services.pull.deliver(query)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None

    async def commit_offset(
        self, group: str, queue: QueueRef, offset: int, deadline_s: float
    ) -> None:
        if (remote := self._master_elsewhere()) is not None:
            await remote.commit_offset(group, self._named(queue), offset, deadline_s)
            return
        topic, queue_id = self._queue(queue)
        try:
            await self._services.offsets.commit(group, topic, queue_id, offset)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        except LedgerMQError as exc:
            raise Refusal(status(Code.INTERNAL_ERROR, str(exc))) from None

    async def consumer_offset(self, group: str, queue: QueueRef, deadline_s: float) -> int | None:
        if (remote := self._master_elsewhere()) is not None:
            return await remote.consumer_offset(group, self._named(queue), deadline_s)
        topic, queue_id = self._queue(queue)
        try:
            return self._services.offsets.consumer_offset(group, topic, queue_id)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None

    async def query_offset(
        self, queue: QueueRef, policy: OffsetPolicy, at_ms: int | None, deadline_s: float
    ) -> int:
        topic, queue_id = self._queue(queue)
        try:
            return self._services.offsets.query_offset(topic, queue_id, policy, at_ms)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
