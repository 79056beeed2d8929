"""The send answers of one commit, written by the door before the dispatcher's pass runs.

Why: the commit that completes a group of sends queues their answers (from the append's
completion callbacks) and schedules the dispatcher's pass in the same loop pass; each
connection's own flush (``Connection.send`` schedules one) comes after that pass, which delayed
every answer by its length (20-30 µs on a 2-vCPU VM). So the door subscribes to the replica's
commits (``broker.events.CommitListener``), which the ledger tells it before it tells the
dispatcher: while sends of the fast path await their commit, a commit schedules ``_write``,
which runs after the completion callbacks (scheduled earlier, by the ledger) and before the
pass. It writes each answered connection once: one socket write per connection per commit, as
the connection's own flush would. A message is still dispatched before anything that follows
its answer can be served.

The storage layer used to call back into the door for this (``Dispatcher.before_pass``); now the
door schedules its own writes and storage knows no door.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledgermq.net import Connection

__all__ = ["AnswerWriter"]


class AnswerWriter:
    """``awaiting``: sends of the fast path started and not yet answered (the door counts
    them); ``answered``: connections with answers queued since the last write."""

    __slots__ = ("_scheduled", "answered", "awaiting")

    def __init__(self) -> None:
        self.awaiting = 0
        self.answered: set[Connection] = set()
        self._scheduled = False

    def on_commit(self, committed_index: int) -> None:
        """``CommitListener``: if sends await a commit, write the answers this one completes
        once their callbacks have run."""
        if self.awaiting and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write)

    def _write(self) -> None:
        self._scheduled = False
        conns, self.answered = self.answered, set()
        for conn in conns:
            if not conn.closed:
                conn.flush()
