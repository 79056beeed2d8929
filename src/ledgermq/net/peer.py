"""A lasting link to one peer: one connection at a time, re-made with back-off when it drops.

Raft replicas talk to each other in fire-and-forget style: the leader's heartbeats and pushes
carry their own retries (the next heartbeat, the dispatcher's resend), so a frame that cannot go
out *now* is better dropped than queued behind a dead peer. ``send`` therefore never blocks and
never raises for network reasons; it only reports whether the frame went out and makes sure a
reconnect is under way. ``request`` is for callers that do want to wait (a client's append).

Reconnects back off exponentially with jitter, from ``min_backoff_s`` up to ``max_backoff_s``,
so a cluster restarting together does not hammer a peer in lock-step; the back-off starts over
after a connection succeeds. Connect and disconnect are logged once per change of state, not
once per failed attempt.

States (``_conn`` is the connection, ``_connector`` the task making one)::

    idle --send/request--> connecting --ok--> connected --drop--> connecting (after back-off)
                               ^  |fail                                |
                               +--+ (back-off)            close() from any state --> closed
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ledgermq.errors import ConnectError, ConnectionClosedError, NetworkError
from ledgermq.net.os_errors import format_address

if TYPE_CHECKING:
    from ledgermq.net.connection import Connection, Handler
    from ledgermq.net.network import Network
    from ledgermq.wire import RemotingCommand

__all__ = ["PeerLink"]

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


class PeerLink:
    """A lasting, self-healing link to ``host:port`` (see the module docstring).

    ``handler`` receives everything the peer sends that is not the answer to a ``request``,
    including the responses to ``send``. ``rng`` draws the jitter (seed it for repeatable
    tests); ``sleep`` waits out a back-off and exists so tests can record the delays instead.
    Connecting starts on the first ``send`` or ``request``.
    """

    def __init__(
        self,
        network: Network,
        host: str,
        port: int,
        handler: Handler,
        *,
        connect_timeout_s: float = 1.0,
        min_backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
        on_connect: Callable[[Connection], Awaitable[None]] | None = None,
    ) -> None:
        if not 0 < min_backoff_s <= max_backoff_s:
            raise ValueError("need 0 < min_backoff_s <= max_backoff_s")
        self.address = format_address(host, port)
        self._network = network
        self._host = host
        self._port = port
        self._handler = handler
        self._connect_timeout_s = connect_timeout_s
        self._min_backoff_s = min_backoff_s
        self._max_backoff_s = max_backoff_s
        # Jitter only spreads reconnects in time; it needs no cryptographic quality.
        self._rng = rng if rng is not None else random.Random()  # noqa: S311
        self._sleep = sleep
        self._on_connect = on_connect
        """Run on each new connection before it is used (the ledger's peer authentication);
        a ``NetworkError`` from it counts as a failed connect."""

        self._conn: Connection | None = None
        self._connector: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set when connected or closed; wakes ``request``
        self._closed = False
        self._closing_conn: Connection | None = None  # the connection ``close`` closed
        self._last_error: NetworkError | None = None
        self._failing = False  # a failure was logged since the last success

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.connected else "down"
        return f"<PeerLink {self.address} {state}>"

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def backoff_s(self, failures: int) -> float:
        """The wait after ``failures`` consecutive failed attempts: doubling, capped, jittered.

        "Equal jitter": a uniform draw between half and all of the capped exponential value, so
        the wait still grows with every failure but peers spread out.
        """
        ceiling = min(self._max_backoff_s, self._min_backoff_s * (1 << min(failures, 32)))
        return ceiling * self._rng.uniform(0.5, 1.0)

    # ------------------------------------------------------------------ sending

    def send(self, command: RemotingCommand) -> bool:
        """Send with a fresh opaque if connected (True); otherwise drop it, reconnect, False."""
        conn = self._usable()
        if conn is None:
            return False
        conn.send_request_nowait(command)
        return True

    def send_raw(self, command: RemotingCommand) -> bool:
        """Like ``send``, with the command's own opaque (for responses and resends)."""
        conn = self._usable()
        if conn is None:
            return False
        conn.send(command)
        return True

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Wait up to ``timeout_s`` in all for a connection and then for the answer.

        ConnectError if no connection was made in time (nothing was sent), then the errors of
        ``Connection.request``. ConnectionClosedError if the link is closed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self._closed:
                raise ConnectionClosedError(f"the link to {self.address} is closed", self.address)
            conn = self._usable()
            if conn is not None:
                return await conn.request(command, max(0.0, deadline - loop.time()))
            self._changed.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
            except TimeoutError:
                reason = f": {self._last_error}" if self._last_error is not None else ""
                raise ConnectError(
                    f"no connection to {self.address} within {timeout_s:g} s{reason}",
                    self.address,
                ) from None

    def _usable(self) -> Connection | None:
        """The open connection, or None after making sure a reconnect is under way."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        self._start_connecting(after_backoff=False)
        return None

    # ------------------------------------------------------------------ connecting

    def _start_connecting(self, *, after_backoff: bool) -> None:
        if self._closed or self._connector is not None:
            return
        self._connector = asyncio.get_running_loop().create_task(
            self._connect_loop(after_backoff=after_backoff), name=f"connect to {self.address}"
        )
        self._connector.add_done_callback(self._connector_done)

    async def _connect_loop(self, *, after_backoff: bool) -> None:
        # The k-th wait is backoff_s(k); losing a connection counts as the first failure, so a
        # peer that accepts and drops at once is not knocked at in a tight loop.
        failures = 0
        if after_backoff:
            await self._sleep(self.backoff_s(0))
            failures = 1
        while not self._closed:
            try:
                conn = await self._network.connect(
                    self._host, self._port, self._handler, timeout_s=self._connect_timeout_s
                )
            except NetworkError as exc:
                self._last_error = exc
                if not self._failing:
                    self._failing = True
                    logger.warning("%s; retrying with back-off", exc)
                else:
                    logger.debug("%s (attempt %d)", exc, failures + 1)
                await self._sleep(self.backoff_s(failures))
                failures += 1
                continue
            if self._on_connect is not None and not self._is_closed():
                try:
                    await self._on_connect(conn)
                except NetworkError as exc:
                    conn.close()
                    self._last_error = exc
                    if not self._failing:
                        self._failing = True
                        logger.warning("%s; retrying with back-off", exc)
                    await self._sleep(self.backoff_s(failures))
                    failures += 1
                    continue
            if self._is_closed():  # close() ran while we were connecting
                conn.close()
                return
            self._attach(conn)
            return

    def _is_closed(self) -> bool:
        """``_closed`` read through a call, so mypy does not carry narrowing across ``await``."""
        return self._closed

    def _attach(self, conn: Connection) -> None:
        self._conn = conn
        self._last_error = None
        self._failing = False
        logger.info("connected to %s", self.address)
        conn.add_close_callback(self._on_connection_closed)
        self._changed.set()

    def _connector_done(self, task: asyncio.Task[None]) -> None:
        if self._connector is task:
            self._connector = None
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "connecting to %s failed unexpectedly", self.address, exc_info=task.exception()
            )

    def _on_connection_closed(self, conn: Connection) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        if self._closed:
            return
        logger.info("disconnected from %s", self.address)
        self._start_connecting(after_backoff=True)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Stop reconnecting and close the connection; waiting requests fail."""
        if self._closed:
            return
        self._closed = True
        if self._connector is not None:
            self._connector.cancel()
        self._closing_conn = self._conn
        if self._conn is not None:
            self._conn.close()
        self._changed.set()

    async def wait_closed(self) -> None:
        """Return when the connector task has ended and the connection has gone."""
        if self._connector is not None:
            await asyncio.wait([self._connector])
        if self._closing_conn is not None:
            await self._closing_conn.wait_closed()
