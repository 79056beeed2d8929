"""The console served by uvicorn inside the caller's event loop.

``ledgermq console`` and ``ledgermq quickstart`` both run it beside their other work in one
loop, so the console is a task, not a process. Two things differ from ``uvicorn.run``: the
socket is bound here, so a port in use is our ``NetworkError`` (uvicorn would log it and call
``sys.exit``), and signals are left to the command (``cli/serving.py``), which stops every
server the same way, instead of uvicorn taking over Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from typing import TYPE_CHECKING

import uvicorn

from ledgermq.console.access import AclMode
from ledgermq.console.app import create_app
from ledgermq.console.history import DEFAULT_INTERVAL_S
from ledgermq.errors import LedgerMQError, NetworkError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ledgermq.console.history import Sampler
    from ledgermq.console.link import ClusterLink
    from ledgermq.console.sessions import Sessions

__all__ = ["ConsoleServer", "parse_listen"]


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or a bare ``port`` (on 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise LedgerMQError(f"--listen {text!r}: the port is not a number") from None
    if not 0 <= number <= 65535:
        raise LedgerMQError(f"--listen {text!r}: the port must be 0..65535")
    return host, number


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The command that runs the console handles SIGINT and SIGTERM (``wait_for_stop``)."""
        yield


class ConsoleServer:
    """The console of ``link``'s cluster on ``host:port`` (port 0: any free port); ``acl``:
    whether visitors sign in with an admin account (``console.access``);
    ``history_interval_s``: how often the last hour's strips are sampled
    (``console.history``)."""

    def __init__(
        self,
        link: ClusterLink,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        acl: AclMode = AclMode.AUTO,
        history_interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.link = link
        self.host = host
        self.port = port
        trusted = ["127.0.0.1", "localhost", "::1", "[::1]"] if _loopback(host) else None
        self.app = create_app(
            link, trusted_hosts=trusted, acl=acl, history_interval_s=history_interval_s
        )
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> None:
        """Bind, start the cluster link, serve. NetworkError when the address is taken."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise NetworkError(
                f"the console cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                address=f"{self.host}:{self.port}",
            ) from exc
        self._socket = sock
        self.port = sock.getsockname()[1]
        await self.link.start()
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", server_header=False
        )
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[sock]), name="ledgermq console"
        )
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise LedgerMQError("the console stopped while starting")
            await asyncio.sleep(0.01)
        sampler: Sampler = self.app.state.sampler
        sampler.start()

    async def close(self) -> None:
        sampler: Sampler = self.app.state.sampler
        await sampler.stop()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        sessions: Sessions = self.app.state.sessions
        await sessions.close_all()
        await self.link.close()

    async def __aenter__(self) -> ConsoleServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
