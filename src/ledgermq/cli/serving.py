"""How a long-running command waits: until SIGTERM or Ctrl-C, or until a server stops by itself.

Shared by ``ledgermq namesrv``, ``broker``, ``ledger serve`` and ``quickstart``, so every
server stops the same way: the signal ends the wait, the command closes its servers cleanly.
"""

from __future__ import annotations

import asyncio
import errno
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ledgermq.errors import NetworkError

__all__ = ["EXIT_STORE_FAILED", "address_in_use", "wait_for_stop"]

EXIT_STORE_FAILED = 74
"""Exit status of a replica (``ledgermq broker``, ``ledgermq ledger serve``) that stopped by
itself because its store failed (disk full, I/O error): ``EX_IOERR`` of sysexits.h. A
supervisor (systemd ``Restart=on-failure``, Kubernetes) restarts it; the restart recovers the
store from disk and catches up from the peers (README "Operations")."""


def address_in_use(exc: NetworkError) -> bool:
    """Whether ``exc`` says a port to listen on is taken (EADDRINUSE), so the command can name
    the flag that moves its ports."""
    cause = exc.__cause__
    if isinstance(cause, OSError):
        return cause.errno == errno.EADDRINUSE
    return "address already in use" in str(exc)


async def wait_for_stop(*closed: Awaitable[object], timeout_s: float | None = None) -> None:
    """Return on SIGTERM / SIGINT, when any of ``closed`` completes, or after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waiters = [asyncio.ensure_future(stop.wait()), *(asyncio.ensure_future(c) for c in closed)]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
