"""``python -m tests.chaos.buggy.buggy_pop broker ...``: a broker whose POP service answers
an ack before its op is committed: the third bug put in on purpose to show that the chaos
checker catches what it is meant to catch, here for POP (checker rule 8).

The bug, "POP ack before commit": ``PopService.ack`` checks the handle and plans the ack as
usual, then answers SUCCESS at once and proposes the ack's op in the background. While the
master can commit, the op lands a few milliseconds later and nothing shows. A master cut off
from its followers (``partition-master``: clients still reach it) goes on answering acks that
can never commit; the new master's POP table has those messages still in flight, and hands
them out again, attempt + 1, once their invisible time ends: messages whose ack was answered
OK are delivered again. The patch lives only in this module, which the chaos harness runs
instead of ``python -m ledgermq`` (``--inject-bug pop-ack-before-commit``); the broker's own
code has no switch for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from ledgermq.broker.pop import Outcome
from ledgermq.broker.service import pop
from ledgermq.cli.main import main

__all__ = ["install"]

_background: set[asyncio.Task[None]] = set()
"""The acks' commits in flight (a task nobody references may be collected before it ends)."""


def install() -> None:
    """Replace ``PopService.ack`` by one that answers before its op is committed."""

    async def ack_before_commit(
        self: pop.PopService, group: str, topic: str, handle_text: str
    ) -> None:
        handle, key = self._handle(group, topic, handle_text)
        async with self._lock(key):
            if self._check(key, handle) is Outcome.ALREADY_DONE:
                return
            queue = self._queue(key)
            record = queue.plan_ack(pop._model(handle))
        # THE BUG: answered now; the op commits later, or never (a master cut off)
        task = asyncio.ensure_future(self._commit(key, queue.settings, [record]))
        _background.add(task)
        task.add_done_callback(_forget)

    pop.PopService.ack = ack_before_commit  # type: ignore[method-assign]


def _forget(task: asyncio.Task[None]) -> None:
    _background.discard(task)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()  # a commit that failed: the ack is lost, which is the bug


if __name__ == "__main__":
    install()
    sys.exit(main())
