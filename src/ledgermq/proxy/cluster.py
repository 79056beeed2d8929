"""The stand-alone proxy (``ledgermq proxy -n NAMESRV``, RocketMQ's "cluster" mode).

A process that serves ``MessagingService`` on one address that never moves, and forwards to
whatever master each broker group has now, over remoting (``proxy.forward``: the brokers may
run with ``grpcServerPort=-1``). For clients that do not follow route changes (the official
Node.js client 1.0.8 keeps its first route's queues for good) and for any client that should
not wait for its next route refresh after a failover.

It is a client of the cluster: NameServer route look-ups, the connection pool and the remoting
codes come from ``ledgermq.client`` (one ``ClientInstance``, with the ACL credentials to sign
with when the brokers check ACL); it reads nothing of a broker's internals.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Final

import grpc.aio

from ledgermq.client import ClientInstance
from ledgermq.errors import ConfigError, NetworkError
from ledgermq.messaging import Door
from ledgermq.net.tls import TlsServerConfig
from ledgermq.proxy.admission import Admission
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.forward import Forwarder
from ledgermq.proxy.protocol import service_pb2_grpc
from ledgermq.proxy.remote_backend import RemoteBackend
from ledgermq.proxy.server_options import max_request_bytes, server_options
from ledgermq.proxy.tls import door_tls
from ledgermq.proxy.unify import PortUnifier
from ledgermq.wire.message import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from ledgermq.client.credentials import Credentials
    from ledgermq.net import TlsClientConfig
    from ledgermq.security.gate import AclGate

__all__ = ["DEFAULT_LISTEN", "ClusterProxy", "parse_listen"]

_log = logging.getLogger(__name__)

DEFAULT_LISTEN: Final = "127.0.0.1:8081"
"""RocketMQ's proxy port (``grpcServerPort`` 8081), on loopback unless told otherwise."""
_GRACE_S: Final = 0.5
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", "[::]", ""})  # noqa: S104 - names, not binds


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); ``ConfigError`` saying what is wrong otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen {text!r} is not HOST:PORT (a port 0..65535; 0: any free)")
    return host, int(port)


class ClusterProxy:
    """``await start()`` (binds, and ``port`` is the real one), ``await close()``.

    Args:
        namesrv_addr: ``"host:port;host:port"``.
        listen: ``HOST:PORT`` to serve gRPC on (port 0: any free one).
        advertise: the host the routes name (default the listen host; this host's address
            when listening on a wildcard).
        credentials: sign requests to NameServers and brokers (clusters with ACL on).
        tls: dial the brokers and NameServers with TLS.
        tls_server: TLS on the proxy's own gRPC port (the ``tls.server.*`` keys, as a
            broker's gRPC door takes them: ``proxy.tls``); default plaintext.
        acl: check each call's ``authorization`` metadata (``aclEnable``): the same accounts
            and permissions as the brokers', from the same ``plain_acl.yml``.
        check_message_type: a send must match its topic's ``message.type``, and routes say
            which types a topic takes (``enableTopicMessageTypeCheck``, default true).
        max_message_size: the largest body a send may carry (``maxMessageSize``, RocketMQ's
            4 MiB by default; set it as the brokers have it), told to clients in their settings.
    """

    def __init__(
        self,
        namesrv_addr: str,
        listen: str = DEFAULT_LISTEN,
        *,
        advertise: str | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
        tls_server: TlsServerConfig | None = None,
        acl: AclGate | None = None,
        check_message_type: bool = True,
        max_message_size: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._acl = acl
        self._max_message_size = max_message_size
        self._check_type = check_message_type
        self._host, self._port = parse_listen(listen)
        self._tls = door_tls(tls_server or TlsServerConfig())
        self._unifier: PortUnifier | None = None
        self._advertise = advertise
        # one client id per process: brokers keep a producer connection per client id, so two
        # proxies on one host must not share one (each would take the other's check-backs)
        self._client = ClientInstance(
            namesrv_addr,
            instance_name=f"ledgermq-proxy-{os.getpid()}",
            credentials=credentials,
            tls=tls,
        )
        self._server: grpc.aio.Server | None = None
        self.port = -1
        self.endpoint = Door("", -1)

    async def start(self) -> None:
        """Bind and serve; whatever was bound is released if it fails."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        await self._client.start()
        admission = Admission(
            self._acl,
            self._client.clock.wall_time_s,
            max_request_bytes=max_request_bytes(self._max_message_size),
        )
        server = grpc.aio.server(
            options=server_options(self._max_message_size), interceptors=[admission]
        )
        port = await self._bind(server)
        host = self._advertise or (self._client.ip if self._host in _WILDCARDS else self._host)
        self.endpoint = Door(host, port)
        real_peer = None if self._unifier is None else self._unifier.real_peer
        if real_peer is not None:
            admission.real_peer = real_peer
        backend = RemoteBackend(
            Forwarder(self._client), self.endpoint,
            check_message_type=self._check_type, max_body_size=self._max_message_size,
        )  # fmt: skip
        wall_time_s = self._client.clock.wall_time_s
        servicer = DoorServicer(backend, self._acl, real_peer, wall_time_s)
        service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server)
        await server.start()
        self._server = server
        if self._unifier is not None:
            await self._unifier.start()
        self.port = port
        namesrv = ";".join(self._client.namesrv_addrs)
        _log.info("proxy serves gRPC (%s) on %s:%d (routes name %s:%d), forwarding to the "
                  "masters of %s", self._tls.kind, self._host, port, host, port,
                  namesrv)  # fmt: skip

    async def _bind(self, server: grpc.aio.Server) -> int:
        """The port, plaintext, TLS, or both behind the unifier (``permissive``), as the
        in-replica door binds (``proxy.local``)."""
        tls, where = self._tls, f"{self._host}:{self._port}"
        try:
            if tls.credentials is None:
                return server.add_insecure_port(where)
            if not tls.plaintext_too:
                return server.add_secure_port(where, tls.credentials)
            tls_port = server.add_secure_port("127.0.0.1:0", tls.credentials)
            plain_port = server.add_insecure_port("127.0.0.1:0")
            self._unifier = PortUnifier(tls_port, plain_port)
            await self._unifier.bind(self._host, self._port)
        except (RuntimeError, OSError) as exc:
            raise NetworkError(
                f"cannot listen for gRPC on {where} ({exc}): another process may use it; "
                "choose another --listen",
                where,
            ) from exc
        return self._unifier.port

    async def close(self) -> None:
        if self._unifier is not None:
            await self._unifier.close()
            self._unifier = None
        if self._server is not None:
            await self._server.stop(_GRACE_S)
            self._server = None
        await self._client.close()
