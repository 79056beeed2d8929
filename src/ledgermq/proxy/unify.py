"""One port for plaintext and TLS gRPC (``tls.server.mode=permissive``), in front of grpcio.

grpcio binds a port either plaintext or TLS. RocketMQ's proxy serves both on its one gRPC port
by looking at the first bytes of each connection (a TLS record starts with the handshake content
type, 22); the remoting port here does the same (``ledgermq.net.tcp``). For gRPC the door does it
in front of grpcio: ``PortUnifier`` listens on ``grpcServerPort`` and, for each connection, reads
the first bytes, opens a connection to one of the gRPC server's two listeners on loopback (TLS or
plaintext; TLS is still terminated by grpcio, with the same credentials as ``enforcing``), and
copies bytes both ways until either side closes.

What the servicer sees as the peer is then this process's loopback connection, so the unifier
keeps, for each of them, the client's real address (``real_peer``): the ACL's
``whiteRemoteAddress`` and a message's born host see the client, not 127.0.0.1. The mapping is
recorded before the first byte is forwarded, so no call can arrive ahead of it.

The cost is a copy through the event loop for every byte in this mode only; ``enforcing`` and
``disabled`` bind grpcio to the port directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

__all__ = ["PortUnifier"]

_log = logging.getLogger(__name__)

_TLS_HANDSHAKE: Final = 0x16
"""The content type of a TLS handshake record: the first byte a TLS client sends."""
_CHUNK_BYTES: Final = 64 * 1024
_FIRST_BYTES_TIMEOUT_S: Final = 30.0
"""A connection that sends nothing for this long is closed (it would hold a task for ever)."""


class PortUnifier:
    """``await bind(host, port)``, ``await start()`` once grpcio serves, ``await close()``;
    ``real_peer`` for the servicer."""

    def __init__(self, tls_port: int, plaintext_port: int) -> None:
        """``tls_port`` / ``plaintext_port``: grpcio's listeners on 127.0.0.1."""
        self._targets = {True: tls_port, False: plaintext_port}
        self._server: asyncio.Server | None = None
        self._peers: dict[str, str] = {}
        """``127.0.0.1:port`` of our connection to grpcio -> the client's ``host:port``."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = -1

    async def bind(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (0: a free port, then in ``port``) without accepting yet:
        the port is known before the gRPC server starts (its routes name it)."""
        self._server = await asyncio.start_server(
            self._serve, host, port, reuse_address=True, start_serving=False
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        """Accept connections (grpcio's listeners must be serving by now)."""
        assert self._server is not None, "bind() first"
        await self._server.start_serving()

    def real_peer(self, address: str) -> str:
        """The client behind ``address`` (grpcio's peer, ``host:port``), or ``address``
        itself for a connection that did not come through this port."""
        return self._peers.get(address, address)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        inner: asyncio.StreamWriter | None = None
        key = ""
        try:
            first = await asyncio.wait_for(reader.read(_CHUNK_BYTES), _FIRST_BYTES_TIMEOUT_S)
            if not first:
                return
            is_tls = first[0] == _TLS_HANDSHAKE
            inner_reader, inner = await asyncio.open_connection("127.0.0.1", self._targets[is_tls])
            local = inner.get_extra_info("sockname")
            key = f"{local[0]}:{local[1]}"
            self._peers[key] = _address(writer.get_extra_info("peername"))
            inner.write(first)
            await asyncio.gather(_copy(reader, inner), _copy(inner_reader, writer))
        except (OSError, TimeoutError) as exc:
            _log.debug("gRPC connection ended: %s", exc)
        finally:
            self._peers.pop(key, None)
            for end in (inner, writer):
                if end is not None:
                    end.close()
            self._tasks.discard(task)


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Bytes from ``source`` to ``sink`` until ``source`` ends; then half-close ``sink``."""
    try:
        while data := await source.read(_CHUNK_BYTES):
            sink.write(data)
            await sink.drain()
    finally:
        with contextlib.suppress(OSError):
            if sink.can_write_eof() and not sink.is_closing():
                sink.write_eof()


def _address(peer: object) -> str:
    """``host:port`` of a socket's peer name (``[v6]:port`` for IPv6)."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = str(peer[0]), int(peer[1])
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(peer)
