"""The gRPC door inside a broker replica (RocketMQ's "local" proxy mode).

``GrpcDoor`` serves ``MessagingService`` with ``grpc.aio`` on ``grpcServerPort`` of the
replica's ``brokerIP1``, over the replica's ``BrokerServices``. ``BrokerServer`` starts it
(``grpc_door=GrpcDoor`` from the ``ledgermq broker`` command and the quickstart) before the
remoting port, so that the remoting port can name it to a gRPC client that knocks on the wrong
door, and closes it first. ``grpc.so_reuseport`` is off: grpcio turns it on by default, and two
servers could then share a port without a word (spec protocol-remoting-and-grpc.md section 3.4).
TLS comes from the broker's ``tls.server.*`` settings, the remoting port's (``proxy.tls`` says
how each mode maps onto grpcio); authentication is ``proxy.admission`` (the ACL's
``authorization`` header, checked before a call's request is read) and permissions the
servicer's ``_admit``, over plaintext or TLS alike. The door serves its broker group in any
role: while its replica is not the master, the writes go to the master over remoting
(``proxy.local_backend``, ``proxy.local_send``), through a client of the cluster that signs
with the broker's own account.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import grpc.aio

from ledgermq.client import ClientInstance, Credentials
from ledgermq.errors import NetworkError
from ledgermq.messaging import Door
from ledgermq.net import ConnectionPool
from ledgermq.proxy.admission import Admission
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.forward import Forwarder
from ledgermq.proxy.local_backend import LocalBackend
from ledgermq.proxy.protocol import service_pb2_grpc
from ledgermq.proxy.remote_backend import RemoteBackend
from ledgermq.proxy.routes import RouteFinder
from ledgermq.proxy.server_options import max_request_bytes, server_options
from ledgermq.proxy.tls import door_tls
from ledgermq.proxy.unify import PortUnifier
from ledgermq.security.acl import sign_request

if TYPE_CHECKING:
    from ledgermq.broker.server import BrokerServer

__all__ = ["GrpcDoor"]

_log = logging.getLogger(__name__)

_GRACE_S: Final = 0.5
"""How long ``close`` lets calls in progress finish."""
_FORWARD_BACKOFF_S: Final = 0.2
"""The longest wait of a follower's door between two looks for the master (the NameServers'
route, then the master): a send waits in it while the group elects, and the doubling back-off
of the stand-alone proxy (to 1 s) could answer it up to a second after a master was there."""


class GrpcDoor:
    """``await start()`` (binds the port), ``await close()``."""

    def __init__(self, broker: BrokerServer) -> None:
        self._broker = broker
        self._server: grpc.aio.Server | None = None
        self._pool: ConnectionPool | None = None
        self._unifier: PortUnifier | None = None
        self._client: ClientInstance | None = None
        """The cluster's client a follower's door forwards through (``_servicer``)."""
        self.port = -1

    async def start(self) -> None:
        """Bind and serve; whatever was bound is released if it fails (the broker keeps no
        door that did not start, so would never close it)."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        broker = self._broker
        config = broker.config
        services, state = broker.services, broker.state
        assert services is not None
        assert state is not None, "the broker starts its door after its services"
        tls = door_tls(config.tls_server())
        admission = Admission(
            broker.acl,
            state.clock.wall_time_s,
            max_request_bytes=max_request_bytes(config.max_message_size),
        )
        server = grpc.aio.server(
            options=server_options(config.max_message_size), interceptors=[admission]
        )
        where = f"{config.broker_ip1}:{config.grpc_server_port}"
        try:
            if tls.credentials is None:
                port = server.add_insecure_port(where)
            elif not tls.plaintext_too:
                port = server.add_secure_port(where, tls.credentials)
            else:  # permissive: grpcio on loopback, both kinds, behind the port's unifier
                tls_port = server.add_secure_port("127.0.0.1:0", tls.credentials)
                plain_port = server.add_insecure_port("127.0.0.1:0")
                self._unifier = PortUnifier(tls_port, plain_port)
                await self._unifier.bind(config.broker_ip1, config.grpc_server_port)
                port = self._unifier.port
                admission.real_peer = self._unifier.real_peer
        except (RuntimeError, OSError) as exc:
            raise NetworkError(
                f"cannot listen for gRPC on {where} ({exc}): another process may use it; "
                "choose another grpcServerPort (-1 turns the gRPC door off)",
                where,
            ) from exc
        self._pool = ConnectionPool(broker.network)
        sign = None
        if config.acl_access_key:
            access_key, secret_key = config.acl_access_key, config.acl_secret_key

            def sign(fields: dict[str, str]) -> dict[str, str]:
                return sign_request(fields, None, access_key, secret_key)

        routes = RouteFinder(
            self._pool, config.namesrv_addr, lambda: broker.config.address, port, sign
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(
            await self._servicer(routes, port), server
        )
        await server.start()
        self._server = server
        if self._unifier is not None:
            await self._unifier.start()
        self.port = port
        _log.info("broker %s replica %s serves gRPC (RocketMQ 5 clients, %s) on %s:%d",
                  config.broker_name, config.dleger_self_id, tls.kind, config.broker_ip1,
                  port)  # fmt: skip

    async def _servicer(self, routes: RouteFinder, port: int) -> DoorServicer:
        """The door's servicer over the replica's ``LocalBackend``: with NameServers to find
        the master by, one that serves the group in any role (a follower forwards the master's
        writes over a client of the cluster signed with the broker's own account:
        ``proxy.local_backend``, ``proxy.local_send``); without, one that serves what this
        replica's services serve."""
        broker = self._broker
        config = broker.config
        services, state = broker.services, broker.state
        assert services is not None
        assert state is not None
        real_peer = None if self._unifier is None else self._unifier.real_peer
        remote = None
        if config.namesrv_addr:
            credentials = (
                Credentials(config.acl_access_key, config.acl_secret_key)
                if config.acl_access_key
                else None
            )
            self._client = ClientInstance(
                ";".join(config.namesrv_addr),
                instance_name=f"ledgermq-door-{config.broker_name}-{config.dleger_self_id}",
                network=broker.network,
                credentials=credentials,
            )
            await self._client.start()
            forwarder = Forwarder(self._client, max_backoff_s=_FORWARD_BACKOFF_S)
            remote = RemoteBackend(
                forwarder, Door(config.broker_ip1, port),
                check_message_type=config.enable_topic_message_type_check,
                max_body_size=config.max_message_size,
            )  # fmt: skip
        backend = LocalBackend(services, state, routes, broker.acl, remote)
        return DoorServicer(backend, broker.acl, real_peer, state.clock.wall_time_s)

    async def close(self) -> None:
        if self._unifier is not None:
            await self._unifier.close()
            self._unifier = None
        if self._server is not None:
            await self._server.stop(_GRACE_S)
            self._server = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._client is not None:
            await self._client.close()
            self._client = None
