"""An in-process network for tests: real ``Connection`` objects over in-memory transports.

The point is to run the ledger, broker and client together in one event loop without ports and
still exercise everything above the socket: framing, coalescing, back-pressure, close. The pipe
keeps the properties code may rely on with TCP and nothing more:

- delivery is asynchronous (``loop.call_soon``) and in order; ``write`` never calls the peer;
- a graceful ``close`` reaches the peer after the bytes written before it; ``abort`` drops
  what is in flight and the peer sees "connection reset by peer";
- bytes in flight count as the write buffer, with the usual high and low water marks calling
  ``pause_writing`` / ``resume_writing``.

``break_link(address)`` resets every connection to an address and refuses new ones until
``heal(address)``: a crashed or partitioned server, as a test wants it.
"""

from __future__ import annotations

import asyncio
import errno
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import NetworkError
from ledgermq.net.connection import Connection
from ledgermq.net.os_errors import describe_os_error, format_address, map_os_error
from ledgermq.wire import DEFAULT_MAX_FRAME_BYTES, SerializeType

if TYPE_CHECKING:
    from ledgermq.net.connection import Handler

__all__ = ["MemoryListener", "MemoryNetwork"]

_FIRST_PORT: Final = 20000
"""Ports handed out for port 0 and for the client ends, counting up."""
_HIGH_WATER: Final = 64 * 1024
_LOW_WATER: Final = 16 * 1024
_WILDCARD_HOSTS: Final = ("0.0.0.0", "::", "")  # noqa: S104 - listening addresses, not binds


class MemoryNetwork:
    """``Network`` in one process (see the module docstring).

    ``writes`` counts ``transport.write`` calls over all connections, so tests can see batching.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.writes = 0
        self._listeners: dict[tuple[str, int], MemoryListener] = {}
        self._broken: set[str] = set()
        self._next_port = _FIRST_PORT

    def _allocate_port(self) -> int:
        in_use = {port for _, port in self._listeners}
        while self._next_port in in_use:
            self._next_port += 1
        port = self._next_port
        self._next_port += 1
        return port

    def _find(self, host: str, port: int) -> MemoryListener | None:
        for candidate in (host, *_WILDCARD_HOSTS):
            listener = self._listeners.get((candidate, port))
            if listener is not None:
                return listener
        return None

    async def connect(
        self, host: str, port: int, handler: Handler, *, timeout_s: float
    ) -> Connection:
        """Connect to a listener of this network; ``timeout_s`` is unused (no connect waits)."""
        del timeout_s
        await asyncio.sleep(0)  # a connect is never synchronous, as with TCP
        address = format_address(host, port)
        listener = self._find(host, port)
        if listener is None or address in self._broken:
            refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
            raise map_os_error(refused, address, connecting=True)
        loop = asyncio.get_running_loop()
        client_port = self._allocate_port()
        client = Connection(
            handler,
            address=address,
            max_frame_bytes=self.max_frame_bytes,
            request_serialize_type=SerializeType.ROCKETMQ,  # as TcpNetwork dials
        )
        server = Connection(
            listener.handler,
            address=format_address("memory", client_port),
            max_frame_bytes=self.max_frame_bytes,
            grpc_port=listener.grpc_port,
        )
        client_end = MemoryTransport(
            loop, self, client, sockname=("memory", client_port), peername=(host, port)
        )
        server_end = MemoryTransport(
            loop, self, server, sockname=(host, port), peername=("memory", client_port)
        )
        client_end.peer, server_end.peer = server_end, client_end
        server.connection_made(server_end)
        listener.accepted(server, server_end, address)
        client.connection_made(client_end)
        return client

    async def serve(
        self, host: str, port: int, handler: Handler, *, grpc_port: int | None = None
    ) -> MemoryListener:
        if port == 0:
            port = self._allocate_port()
        elif (host, port) in self._listeners:
            address = format_address(host, port)
            in_use = OSError(errno.EADDRINUSE, "Address already in use")
            raise NetworkError(f"cannot listen on {address}: {describe_os_error(in_use)}", address)
        listener = MemoryListener(self, host, port, handler, grpc_port)
        self._listeners[(host, port)] = listener
        await asyncio.sleep(0)
        return listener

    def break_link(self, address: str) -> None:
        """Reset every connection to ``address`` ("host:port") and refuse new ones until healed."""
        self._broken.add(address)
        for listener in list(self._listeners.values()):
            listener.reset_connections_to(address)

    def heal(self, address: str) -> None:
        """Accept connections to ``address`` again (if something listens there)."""
        self._broken.discard(address)

    def unregister(self, listener: MemoryListener) -> None:
        """Called by a closing listener: its address refuses connections from now on."""
        if self._listeners.get((listener.host, listener.port)) is listener:
            del self._listeners[(listener.host, listener.port)]


class MemoryListener:
    """A listener of a ``MemoryNetwork``; tracks its accepted connections to close them."""

    def __init__(
        self,
        network: MemoryNetwork,
        host: str,
        port: int,
        handler: Handler,
        grpc_port: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.grpc_port = grpc_port
        self._network = network
        # Accepted connections with their transports and the address the client dialled.
        self._accepted: dict[Connection, tuple[MemoryTransport, str]] = {}
        self._closing: list[Connection] = []

    def accepted(self, connection: Connection, transport: MemoryTransport, address: str) -> None:
        """Track a connection accepted for the client that dialled ``address``."""
        self._accepted[connection] = (transport, address)
        connection.add_close_callback(self._forget)

    def _forget(self, connection: Connection) -> None:
        self._accepted.pop(connection, None)

    @property
    def connection_count(self) -> int:
        return len(self._accepted)

    def reset_connections_to(self, address: str) -> None:
        for transport, dialled in list(self._accepted.values()):
            if dialled == address:
                transport.abort()

    def close(self) -> None:
        self._network.unregister(self)
        self._closing = list(self._accepted)
        for connection in self._closing:
            connection.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*(c.wait_closed() for c in self._closing))


class MemoryTransport(asyncio.Transport):
    """One end of an in-memory pipe; ``peer`` is the other end."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        network: MemoryNetwork,
        protocol: Connection,
        *,
        sockname: tuple[str, int],
        peername: tuple[str, int],
    ) -> None:
        super().__init__({"sockname": sockname, "peername": peername})
        self.peer: MemoryTransport | None = None
        self._loop = loop
        self._network = network
        self._protocol = protocol
        self._closing = False  # close() or abort() was called, or the peer went away
        self._lost = False  # connection_lost was delivered to our protocol
        self._aborted = False  # abort() was called: bytes in flight are dropped
        self._in_flight = 0  # bytes written and not yet delivered to the peer
        self._paused = False
        self._high_water = _HIGH_WATER
        self._low_water = _LOW_WATER

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, Connection)
        self._protocol = protocol

    def is_closing(self) -> bool:
        return self._closing

    def is_reading(self) -> bool:
        return not self._closing

    def pause_reading(self) -> None:  # pragma: no cover - Connection never pauses reading
        raise NotImplementedError

    def resume_reading(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def get_write_buffer_size(self) -> int:
        return self._in_flight

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (self._low_water, self._high_water)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high_water = _HIGH_WATER if high is None else high
        self._low_water = self._high_water // 4 if low is None else low

    def can_write_eof(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview[Any]) -> None:
        if self._closing or not data:
            return
        self._network.writes += 1
        chunk = bytes(data)
        self._in_flight += len(chunk)
        self._loop.call_soon(self._deliver, chunk)
        if not self._paused and self._in_flight > self._high_water:
            self._paused = True
            self._protocol.pause_writing()

    def _deliver(self, chunk: bytes) -> None:
        if self._aborted:
            return
        self._in_flight -= len(chunk)
        if self._paused and self._in_flight <= self._low_water:
            self._paused = False
            if not self._lost:
                self._protocol.resume_writing()
        peer = self.peer
        if peer is not None and not peer._lost and not peer._closing:
            peer._protocol.data_received(chunk)

    def close(self) -> None:
        """Close after the bytes already written reach the peer (call_soon keeps the order)."""
        if self._closing:
            return
        self._closing = True
        self._loop.call_soon(self._shut_down, None)

    def abort(self) -> None:
        """Close now; bytes in flight are lost and the peer sees a reset."""
        if self._lost:
            return
        self._closing = True
        self._aborted = True
        self._in_flight = 0
        self._loop.call_soon(
            self._shut_down, ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
        )

    def _shut_down(self, peer_error: Exception | None) -> None:
        self._lose(None)
        if self.peer is not None:
            self.peer._lose(peer_error)

    def _lose(self, exc: Exception | None) -> None:
        if self._lost:
            return
        self._closing = True
        self._lost = True
        self._protocol.connection_lost(exc)
