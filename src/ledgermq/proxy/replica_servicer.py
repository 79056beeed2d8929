"""A replica's gRPC door that serves its group whatever the replica's role (``GrpcDoor``'s).

Routes name every replica's door (``proxy.routes``), so consumers reach followers too. While
this replica is not the master, what only the master serves goes there over remoting, as the
stand-alone proxy forwards it (its ``ClusterServicer``, over the same ``Forwarder``): POP's
ReceiveMessage of the assignment's group. Sends take ``proxy.master_link`` inside
``MessagingServicer`` (placed and answered as the master's door would); acknowledgements,
invisible-time changes, dead letters, EndTransaction, RecallMessage and the committed offsets
(UpdateOffset, GetOffset: a follower's copy may lag) go through the door's ``LocalBackend``,
which hands them to a ``RemoteBackend`` while this replica is not the master
(``proxy.local_backend``). The rest is served here in any role: routes, assignments, settings
and Telemetry (a producer's stream stays on the door it opened, which carries check-backs once
its replica is master), PullMessage, QueryOffset.

The call is authorized here, at the door it arrives at, with the same ACL as the master's door
(``ClusterServicer._admit`` and ``MessagingServicer._admit`` make the same decision), and the
forwarded remoting request is signed with the broker's own account (``proxy.master_link``'s
docstring says why and what the master still checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ledgermq.proxy.servicer import MessagingServicer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    import grpc.aio

    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.proxy.cluster_servicer import ClusterServicer
    from ledgermq.proxy.master_link import MasterLink
    from ledgermq.proxy.protocol import service_pb2
    from ledgermq.proxy.remote_backend import RemoteBackend
    from ledgermq.proxy.routes import RouteFinder
    from ledgermq.security import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]

__all__ = ["ReplicaServicer"]

_QueueRequest = TypeVar("_QueueRequest", bound="service_pb2.ReceiveMessageRequest")


class ReplicaServicer(MessagingServicer):
    """``MessagingServicer``, with the master-only RPCs forwarded while not master."""

    def __init__(
        self,
        services: BrokerServices,
        state: BrokerState,
        routes: RouteFinder,
        acl: AclGate | None,
        real_peer: Callable[[str], str] | None,
        link: MasterLink,
        forwarding: ClusterServicer,
        remote: RemoteBackend,
    ) -> None:
        super().__init__(services, state, routes, acl, real_peer, link, remote)
        self._forwarding = forwarding

    def _follows(self) -> bool:
        return not self._state.is_master

    def _own_group(self, request: _QueueRequest) -> _QueueRequest:
        """``request``, its queue in this replica's group when it names none: the master's
        door serves its own group's queue whatever broker the queue names, and the stand-alone
        proxy's forwarding needs the name."""
        if request.message_queue.broker.name:
            return request
        named = type(request)()
        named.CopyFrom(request)
        named.message_queue.broker.name = self._state.config.broker_name
        return named

    async def ReceiveMessage(  # noqa: N802 - the generated servicer's names
        self, request: service_pb2.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        answers = (
            self._forwarding.ReceiveMessage(self._own_group(request), context)
            if self._follows()
            else super().ReceiveMessage(request, context)
        )
        async for answer in answers:
            yield answer
