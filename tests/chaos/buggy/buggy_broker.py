"""``python -m tests.chaos.buggy.buggy_broker broker ...``: a broker with a bug put in on
purpose, to show that the chaos checker catches what it is meant to catch.

The bug, "acknowledge before commit": when an append was not acknowledged by a quorum (the
master is cut off from its followers, or lost its leadership), the master answers the producer
SEND_OK anyway, with the queue offset it had assigned. Those messages are never committed; the
next master truncates them and gives their queue offsets to other messages, which the checker
reports as lost acknowledged sends. The patch lives only in this module, which the chaos
harness runs instead of ``python -m ledgermq`` (``--inject-bug ack-before-commit``); the
broker's own code has no switch for it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ledgermq.broker.storage import append_group
from ledgermq.cli.main import main

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Sequence

    from ledgermq.ledger.server import AppendResult

__all__ = ["install"]


def install() -> None:
    """Replace ``append_group._settle`` by one that turns "not acknowledged" into success."""
    correct: Callable[[Sequence[append_group._Put], asyncio.Future[AppendResult]], None]
    correct = append_group._settle

    def acknowledge_anyway(
        puts: Sequence[append_group._Put], appended: asyncio.Future[AppendResult]
    ) -> None:
        if appended.cancelled() or appended.exception() is None:
            correct(puts, appended)
            return
        for put in puts:  # THE BUG: an outcome-unknown append reported as stored
            append_group._call(put, [0] * len(put.starts))

    append_group._settle = acknowledge_anyway


if __name__ == "__main__":
    install()
    sys.exit(main())
