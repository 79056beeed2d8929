"""The real network: asyncio TCP (or uvloop's, when that loop runs), plain or TLS.

Plain ports (``tls.server.mode=disabled``, the default) are served by ``loop.create_server``,
exactly as before TLS existed: TLS adds nothing to their accept or frame path.

A TLS port (``permissive`` or ``enforcing``, ``net.tls``) accepts its sockets itself, because
the choice between plain and TLS has to be made before any byte is read: it waits until the
first byte arrives and looks at it without taking it (``MSG_PEEK``). ``0x16`` opens every TLS
handshake (a TLS record of type "handshake"); a remoting frame opens with its length, whose
first byte is 0 for any frame under 16 MiB, and an HTTP/2 preface with ``P``. Then the socket
becomes a plain or a TLS transport (``loop.connect_accepted_socket``) carrying the same
``Connection``. An enforcing port serves a plain client one answer, an error that says to use
TLS, and closes; a permissive one serves it. The look costs one wake-up per connection, never
anything per frame. A client always speaks first on these ports (remoting, DLedger, gRPC), so
nothing waits for a byte that will not come from a well-behaved peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from typing import TYPE_CHECKING, Final

from ledgermq.errors import NetworkError
from ledgermq.net.connection import Connection
from ledgermq.net.os_errors import describe_os_error, format_address, map_os_error
from ledgermq.net.tls import TlsMode
from ledgermq.wire import DEFAULT_MAX_FRAME_BYTES, MQResponseCode, SerializeType

if TYPE_CHECKING:
    from ledgermq.net.connection import Handler
    from ledgermq.net.tls import TlsClientConfig, TlsServerConfig
    from ledgermq.wire import RemotingCommand

__all__ = ["TcpListener", "TcpNetwork", "TlsListener"]

logger = logging.getLogger(__name__)

_TLS_HANDSHAKE: Final = 0x16
"""First byte of a TLS record of content type "handshake": every ClientHello starts with it."""
_BACKLOG: Final = 1024


class TcpNetwork:
    """``Network`` over TCP; ``max_frame_bytes`` bounds every incoming frame.

    Args:
        max_frame_bytes: the largest frame accepted (default 16 MiB).
        tls_server: what ``serve`` accepts (None or mode ``disabled``: plain only).
        tls_client: when set, ``connect`` dials with TLS.
        tls_handshake_timeout_s: how long a server waits for a client's TLS handshake.

    Raises:
        ConfigError: a TLS certificate, key or CA file cannot be used (at construction, so a
            server fails at start, not at its first connection).
    """

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        tls_server: TlsServerConfig | None = None,
        tls_client: TlsClientConfig | None = None,
        tls_handshake_timeout_s: float = 10.0,
        dial_serialize_type: SerializeType = SerializeType.ROCKETMQ,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        #: The header type of the requests sent on connections this network dials. Binary:
        #: every RocketMQ server reads it, and it costs a fraction of JSON (``wire/frame.py``).
        #: Requests on accepted connections (a broker asking a client) stay JSON, which every
        #: client reads; responses always take their request's type.
        self.dial_serialize_type = dial_serialize_type
        self.tls_server = tls_server if tls_server is not None and tls_server.enabled else None
        self.tls_client = tls_client
        self._server_context: ssl.SSLContext | None = None
        self._require_client_cert = False
        if self.tls_server is not None:
            self._server_context = self.tls_server.server_context()
            if self._server_context.verify_mode == ssl.CERT_REQUIRED:
                # Only ask, and refuse in _CertifiedConnection with an answer that says why.
                self._server_context.verify_mode = ssl.CERT_OPTIONAL
                self._require_client_cert = True
        self._client_context = tls_client.client_context() if tls_client is not None else None
        self._tls_handshake_timeout_s = tls_handshake_timeout_s

    async def connect(
        self, host: str, port: int, handler: Handler, *, timeout_s: float
    ) -> Connection:
        address = format_address(host, port)
        loop = asyncio.get_running_loop()
        context = self._client_context
        try:
            async with asyncio.timeout(timeout_s):
                if context is None:
                    _, connection = await loop.create_connection(
                        lambda: Connection(
                            handler,
                            address=address,
                            max_frame_bytes=self.max_frame_bytes,
                            request_serialize_type=self.dial_serialize_type,
                        ),
                        host,
                        port,
                    )
                else:
                    _, connection = await loop.create_connection(
                        lambda: Connection(
                            handler,
                            address=address,
                            max_frame_bytes=self.max_frame_bytes,
                            request_serialize_type=self.dial_serialize_type,
                        ),
                        host,
                        port,
                        ssl=context,
                        server_hostname=host,
                        ssl_handshake_timeout=timeout_s,
                    )
        except OSError as exc:  # TimeoutError, socket.gaierror and ssl.SSLError are OSErrors too
            raise map_os_error(exc, address, connecting=True, tls=context is not None) from exc
        return connection

    async def serve(
        self, host: str, port: int, handler: Handler, *, grpc_port: int | None = None
    ) -> TcpListener | TlsListener:
        if self.tls_server is not None:
            assert self._server_context is not None
            tls_listener = TlsListener(
                handler,
                self.max_frame_bytes,
                grpc_port,
                mode=self.tls_server.mode,
                context=self._server_context,
                handshake_timeout_s=self._tls_handshake_timeout_s,
                require_client_cert=self._require_client_cert,
            )
            await tls_listener.listen(host, port)
            return tls_listener
        listener = TcpListener(handler, self.max_frame_bytes, grpc_port)
        try:
            server = await asyncio.get_running_loop().create_server(
                listener.make_connection, host, port
            )
        except OSError as exc:
            raise _listen_error(host, port, exc) from exc
        listener.attach(server)
        return listener


def _listen_error(host: str, port: int, exc: OSError) -> NetworkError:
    address = format_address(host, port)
    return NetworkError(f"cannot listen on {address}: {describe_os_error(exc)}", address)


class TcpListener:
    """An asyncio server plus the connections it accepted (asyncio does not track those)."""

    def __init__(
        self, handler: Handler, max_frame_bytes: int, grpc_port: int | None = None
    ) -> None:
        self._handler = handler
        self._max_frame_bytes = max_frame_bytes
        self._grpc_port = grpc_port
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._closing: list[Connection] = []

    @property
    def connection_count(self) -> int:
        """Accepted connections still open (a metric)."""
        return len(self._connections)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def attach(self, server: asyncio.Server) -> None:
        """Called once by ``TcpNetwork.serve`` with the server this listener runs on."""
        self._server = server

    def make_connection(self) -> Connection:
        """The protocol factory of the server: one ``Connection`` per accepted socket."""
        connection = Connection(
            self._handler, max_frame_bytes=self._max_frame_bytes, grpc_port=self._grpc_port
        )
        self._connections.add(connection)
        connection.add_close_callback(self._connections.discard)
        return connection

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._closing = list(self._connections)
        for connection in self._closing:
            connection.close()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()
        await asyncio.gather(*(c.wait_closed() for c in self._closing))


class TlsListener:
    """A port in ``permissive`` or ``enforcing`` mode (see the module docstring).

    Owns its listening socket and accept loop; every accepted socket gets an admission task
    that looks at the first byte and hands the socket to a plain or a TLS transport.
    """

    def __init__(
        self,
        handler: Handler,
        max_frame_bytes: int,
        grpc_port: int | None,
        *,
        mode: TlsMode,
        context: ssl.SSLContext,
        handshake_timeout_s: float,
        require_client_cert: bool = False,
    ) -> None:
        assert mode is not TlsMode.DISABLED
        self._handler = handler
        self._max_frame_bytes = max_frame_bytes
        self._grpc_port = grpc_port
        self.mode = mode
        self._require_client_cert = require_client_cert
        self._context = context
        self._handshake_timeout_s = handshake_timeout_s
        self._sock: socket.socket | None = None
        self._port: int | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._admitting: set[asyncio.Task[None]] = set()
        self._connections: set[Connection] = set()
        self._closing: list[Connection] = []
        self._closed = False
        self.refused_plain = 0
        """Plain connections an enforcing port refused (a metric)."""
        self.refused_uncertified = 0
        """TLS clients without a certificate a ``require`` port refused (a metric)."""
        self.failed_handshakes = 0
        """TLS handshakes that failed (bad or missing client certificate, timeouts)."""

    @property
    def connection_count(self) -> int:
        """Accepted connections still open (a metric)."""
        return len(self._connections)

    @property
    def port(self) -> int:
        assert self._port is not None, "listen() first"
        return self._port

    async def listen(self, host: str, port: int) -> None:
        """Bind, listen and start accepting. NetworkError if the address cannot be bound."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family, kind, proto, _, sockaddr = infos[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise _listen_error(host, port, exc) from exc
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise _listen_error(host, port, exc) from exc
        self._sock = sock
        self._port = int(sock.getsockname()[1])
        self._accepting = loop.create_task(self._accept_loop(sock), name=f"accept tls :{port}")

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                accepted, _ = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE and friends: wait, as asyncio's own server does
                logger.warning("accept failed on port %d: %s", self.port, describe_os_error(exc))
                await asyncio.sleep(0.1)
                continue
            accepted.setblocking(False)
            task = loop.create_task(self._admit(accepted))
            self._admitting.add(task)
            task.add_done_callback(self._admitting.discard)

    async def _admit(self, sock: socket.socket) -> None:
        """Look at the first byte, then serve the socket as TLS, plain, or refused plain."""
        loop = asyncio.get_running_loop()
        try:
            first = await _peek_first_byte(sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except OSError:  # reset before saying anything
            sock.close()
            return
        if not first:  # closed before saying anything
            sock.close()
            return
        peer = _peer_name(sock)
        tls = first[0] == _TLS_HANDSHAKE
        refuse = not tls and self.mode is TlsMode.ENFORCING
        connection: Connection
        if tls and self._require_client_cert:
            connection = _CertifiedConnection(
                self._handler,
                self._refuse_uncertified,
                max_frame_bytes=self._max_frame_bytes,
                grpc_port=self._grpc_port,
            )
        else:
            connection = self._new_connection(self._refuse_plain if refuse else self._handler)
        try:
            if tls:
                await loop.connect_accepted_socket(
                    lambda: connection,
                    sock,
                    ssl=self._context,
                    ssl_handshake_timeout=self._handshake_timeout_s,
                )
            else:
                await loop.connect_accepted_socket(lambda: connection, sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except OSError as exc:  # ssl.SSLError, resets and handshake timeouts
            self.failed_handshakes += 1
            logger.warning(
                "TLS handshake with %s failed: %s", peer, describe_os_error(exc, server=True)
            )
            sock.close()
            return
        self._connections.add(connection)
        connection.add_close_callback(self._connections.discard)
        if self._closed:
            connection.close()

    def _new_connection(self, handler: Handler) -> Connection:
        return Connection(handler, max_frame_bytes=self._max_frame_bytes, grpc_port=self._grpc_port)

    def _refuse_plain(self, conn: Connection, command: RemotingCommand) -> None:
        """An enforcing port's answer to a plain client: one error saying to use TLS, then close."""
        self.refused_plain += 1
        _refuse(
            conn,
            command,
            "this port accepts only TLS connections (tls.server.mode=enforcing): connect with "
            "TLS (the CLI's --tls, a client's tls=TlsClientConfig(...), tls.enable=true)",
        )

    def _refuse_uncertified(self, conn: Connection, command: RemotingCommand) -> None:
        """The answer to a TLS client without a certificate where one is required."""
        self.refused_uncertified += 1
        _refuse(
            conn,
            command,
            "this port requires a client certificate (tls.server.need.client.auth=require): "
            "give one signed by a CA the server trusts (the CLI's --tls-cert and --tls-key, "
            "tls.client.certPath and tls.client.keyPath)",
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._admitting:
            task.cancel()
        if self._sock is not None:
            self._sock.close()
        self._closing = list(self._connections)
        for connection in self._closing:
            connection.close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._admitting) if t is not None]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.gather(*(c.wait_closed() for c in self._closing))


def _refuse(conn: Connection, command: RemotingCommand, reason: str) -> None:
    """Answer ``command`` (if it wants an answer) with NO_PERMISSION and ``reason``, then close.

    NO_PERMISSION (16): every RocketMQ client reports it with its remark and does not retry it
    at the same address.
    """
    if conn.closed:
        return
    logger.warning("refused the connection from %s: %s", conn.address, reason)
    if not command.is_response and not command.is_oneway:
        conn.send(command.response(MQResponseCode.NO_PERMISSION, remark=reason))
    conn.close()


class _CertifiedConnection(Connection):
    """A TLS connection to a port that requires client certificates.

    The port's context only *asks* for a certificate (``CERT_OPTIONAL``: one that is shown is
    still verified), so that a client without one completes the handshake and can be told
    why it is refused, instead of seeing a reset. The decision is made in ``connection_made``,
    which asyncio calls after the handshake and before any data is delivered: no frame of an
    uncertified client ever reaches the real handler.
    """

    def __init__(
        self, handler: Handler, refuse: Handler, *, max_frame_bytes: int, grpc_port: int | None
    ) -> None:
        super().__init__(handler, max_frame_bytes=max_frame_bytes, grpc_port=grpc_port)
        self._refuse = refuse

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if not transport.get_extra_info("peercert"):
            self._handler = self._refuse


async def _peek_first_byte(sock: socket.socket) -> bytes:
    """The first byte ``sock`` will deliver, left in the socket; b"" if the peer closed first.

    Raises OSError (a reset) like ``recv``.
    """
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    fd = sock.fileno()
    loop.add_reader(fd, wake)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return sock.recv(1, socket.MSG_PEEK)


def _peer_name(sock: socket.socket) -> str:
    try:
        peer = sock.getpeername()
    except OSError:
        return "a client"
    return format_address(str(peer[0]), int(peer[1]))
