"""The real network: asyncio TCP (or uvloop's, when that loop runs)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ledgermq.errors import NetworkError
from ledgermq.net.connection import Connection
from ledgermq.net.os_errors import describe_os_error, format_address, map_os_error
from ledgermq.wire import DEFAULT_MAX_FRAME_BYTES

if TYPE_CHECKING:
    from ledgermq.net.connection import Handler

__all__ = ["TcpListener", "TcpNetwork"]


class TcpNetwork:
    """``Network`` over TCP; ``max_frame_bytes`` bounds every incoming frame."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes

    async def connect(
        self, host: str, port: int, handler: Handler, *, timeout_s: float
    ) -> Connection:
        address = format_address(host, port)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, connection = await loop.create_connection(
                    lambda: Connection(
                        handler, address=address, max_frame_bytes=self.max_frame_bytes
                    ),
                    host,
                    port,
                )
        except OSError as exc:  # TimeoutError and socket.gaierror are OSErrors too
            raise map_os_error(exc, address, connecting=True) from exc
        return connection

    async def serve(
        self, host: str, port: int, handler: Handler, *, grpc_port: int | None = None
    ) -> TcpListener:
        listener = TcpListener(handler, self.max_frame_bytes, grpc_port)
        try:
            server = await asyncio.get_running_loop().create_server(
                listener.make_connection, host, port
            )
        except OSError as exc:
            address = format_address(host, port)
            raise NetworkError(
                f"cannot listen on {address}: {describe_os_error(exc)}", address
            ) from exc
        listener.attach(server)
        return listener


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
