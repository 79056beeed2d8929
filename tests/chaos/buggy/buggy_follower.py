"""``python -m tests.chaos.buggy.buggy_follower broker ...``: a broker whose ledger replica,
as a follower, acknowledges an append before it stores it: the second bug put in on purpose to
show that the chaos checker catches what it is meant to catch (issue 15).

The bug, "follower acknowledges before it stores": a push of entries (APPEND) is answered
SUCCESS, in the term the push carries, the moment its frame arrives; the follower hands it to
its Raft core, which checks and stores it, ``STORE_DELAY_S`` later (a write-behind queue). The
core's own answer follows as usual, so while nothing fails the leader sees nothing wrong. But
the leader counts the early answers in its quorum and commits entries that no follower holds
yet. If it then dies, pauses or is cut off, its followers elect a new leader before their
queued appends reach their cores, which refuse them (an expired term): entries the old leader
acknowledged to its producers are on no other replica, and the new leader gives their queue
offsets to other messages. The checker reports acknowledged sends that the healed cluster does
not hold. The patch lives only in this module, which the chaos harness runs instead of
``python -m ledgermq`` (``--inject-bug follower-ack-before-store``); the ledger's own code has
no switch for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import TYPE_CHECKING, Final

from ledgermq.cli.main import main
from ledgermq.errors import NetworkError
from ledgermq.ledger.codec import decode_message, encode_message
from ledgermq.ledger.server import LedgerServer
from ledgermq.raft import PushEntryRequest, PushEntryResponse, PushKind, ResponseCode

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.net import Connection
    from ledgermq.wire import RemotingCommand

__all__ = ["STORE_DELAY_S", "install"]

STORE_DELAY_S: Final = 1.0
"""How long an acknowledged append waits before the core checks and stores it: longer than a
follower's election timeout (3 x 200 ms), so that a leader's last acknowledged appends can
still be waiting when its followers have moved to a new term."""


def install() -> None:
    """Wrap ``LedgerServer._on_peer_message`` so that an APPEND push is acknowledged on
    receipt and stored later."""
    correct: Callable[[LedgerServer, Connection, RemotingCommand], None]
    correct = LedgerServer._on_peer_message

    def acknowledge_on_receipt(self: LedgerServer, conn: Connection, cmd: RemotingCommand) -> None:
        if not cmd.is_response:
            push = decode_message(cmd)
            if isinstance(push, PushEntryRequest) and push.kind is PushKind.APPEND and push.entries:
                ack = PushEntryResponse(  # THE BUG: "stored", before anything checked or stored it
                    push.group,
                    self.config.self_id,
                    push.local_id,
                    push.rid,
                    push.term,
                    ResponseCode.SUCCESS,
                    PushKind.APPEND,
                    push.index,
                    count=len(push.entries),
                    end_index=push.index + len(push.entries) - 1,
                )
                with contextlib.suppress(NetworkError):
                    conn.send(encode_message(ack, cmd.opaque))
                asyncio.get_running_loop().call_later(STORE_DELAY_S, store_later, self, conn, cmd)
                return
        correct(self, conn, cmd)

    def store_later(self: LedgerServer, conn: Connection, cmd: RemotingCommand) -> None:
        if not self._closing and self._core is not None:
            correct(self, conn, cmd)

    LedgerServer._on_peer_message = acknowledge_on_receipt  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(main())
