"""Connections to many servers, one per address, made on first use: the requester's side.

Clients talk to NameServers and brokers, brokers talk to NameServers; each asks a request and
waits for its answer. RocketMQ clients keep one connection per address and open a new one after
it breaks (protocol-remoting-and-grpc.md section 2.11); so does this pool. Concurrent first uses
of an address share one connect, a connection that closes leaves the pool at once, and the next
request makes a new one. Requests are not retried here: whether repeating one is safe depends on
what it asks, so the caller decides (the errors say how far the request got).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ledgermq.errors import ConnectError

if TYPE_CHECKING:
    from ledgermq.net.connection import Connection, Handler
    from ledgermq.net.network import Network
    from ledgermq.wire import RemotingCommand

__all__ = ["ConnectionPool", "split_address"]

logger = logging.getLogger(__name__)


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port); ConnectError for anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConnectError(f"{address!r} is not a host:port address", address)
    return host, int(port)


class ConnectionPool:
    """One connection per ``host:port``, made on demand (see the module docstring).

    ``handler`` receives what servers send that is not an answer (their own requests, such as a
    broker telling consumers that their group changed).
    """

    def __init__(
        self, network: Network, handler: Handler | None = None, *, connect_timeout_s: float = 3.0
    ) -> None:
        self._network = network
        self._handler: Handler = handler or _ignore
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Future[Connection]] = {}
        self._closed = False

    async def connection(self, address: str) -> Connection:
        """The open connection to ``address``, made now if there is none."""
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise ConnectError("the connection pool is closed", address)
        pending = self._connecting.get(address)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(address))
            self._connecting[address] = pending
            pending.add_done_callback(lambda _: self._connecting.pop(address, None))
        return await asyncio.shield(pending)

    async def _connect(self, address: str) -> Connection:
        host, port = split_address(address)
        conn = await self._network.connect(
            host, port, self._handler, timeout_s=self._connect_timeout_s
        )
        if self._closed:
            conn.close()
            raise ConnectError("the connection pool is closed", address)
        self._connections[address] = conn
        conn.add_close_callback(lambda c: self._forget(address, c))
        return conn

    def _forget(self, address: str, conn: Connection) -> None:
        if self._connections.get(address) is conn:
            del self._connections[address]

    async def request(
        self, address: str, command: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """Send ``command`` to ``address`` and return the answer.

        Raises ConnectError (nothing sent), ConnectionClosedError or RequestTimeoutError (the
        server may have acted on it).
        """
        conn = await self.connection(address)
        return await conn.request(command, timeout_s)

    async def oneway(self, address: str, command: RemotingCommand) -> None:
        """Send ``command`` with no answer expected."""
        conn = await self.connection(address)
        conn.send_oneway(command)

    def close_connection(self, address: str) -> None:
        """Drop the connection to ``address`` (the next request makes a new one)."""
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        self._closed = True
        for pending in list(self._connecting.values()):
            pending.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            conn.close()
        for conn in connections:
            with contextlib.suppress(Exception):
                await conn.wait_closed()


def _ignore(conn: Connection, command: RemotingCommand) -> None:
    logger.debug("ignored %s from %s", command, conn.address)
