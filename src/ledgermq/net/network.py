"""What a network backend offers: connect and serve. Two implementations swap in tests.

``TcpNetwork`` is the real thing; ``MemoryNetwork`` runs whole clusters in one process without
ports (httpcore's mock backend, trio's memory streams). Code above ``net`` takes a ``Network``
and never knows which one it has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ledgermq.net.connection import Connection, Handler

__all__ = ["Listener", "Network"]


class Listener(Protocol):
    """A listening endpoint; closing it also closes every connection it accepted."""

    @property
    def port(self) -> int:
        """The port really listened on (the one allocated when 0 was asked)."""
        ...

    @property
    def connection_count(self) -> int:
        """Accepted connections still open (a metric)."""
        ...

    def close(self) -> None:
        """Stop accepting and close the accepted connections."""
        ...

    async def wait_closed(self) -> None:
        """Return when the listener and its connections have gone."""
        ...


class Network(Protocol):
    """A way to make and accept framed connections."""

    async def connect(
        self, host: str, port: int, handler: Handler, *, timeout_s: float
    ) -> Connection:
        """A new connection to ``host:port``; ConnectError if none is made within ``timeout_s``."""
        ...

    async def serve(
        self, host: str, port: int, handler: Handler, *, grpc_port: int | None = None
    ) -> Listener:
        """Listen on ``host:port`` (port 0: any free one); ``handler`` serves every connection.

        ``grpc_port``: where this process serves gRPC, named to a gRPC client that dials this
        (remoting) listener by mistake; None says it serves none.
        """
        ...
