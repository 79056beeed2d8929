"""Transaction state of the broker: which half messages are settled, and how often each open one
was checked -- replicated through the ledger's metadata channel (issue 16 section 3).

Half messages themselves are ordinary records in the commit log, in queue 0 of
``RMQ_SYS_TRANS_HALF_TOPIC`` (``HALF_TOPIC``), so every replica has them. What RocketMQ keeps in
its op topic (``RMQ_SYS_TRANS_OP_HALF_TOPIC``: "this half message is done") and in re-appended
half messages (their ``TRANSACTION_CHECK_TIMES``) is here a ``txn`` op (``ops.TxnOp``), applied
by every replica in log order like a consumer offset. So a new master after a failover knows
exactly which half messages were committed, rolled back or discarded, and how many check-backs
each open one had.

The table is keyed by the half message's offset in the half queue. ``progress`` is the first
offset not known to be settled; settled offsets at and after it are kept in ``settled`` until
``progress`` moves past them, so the table stays as small as the window of open transactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

# The actions are the op format's words (broker.state.ops), named here too for the table's users.
from ledgermq.broker.state.ops import CHECK, COMMIT, DISCARD, ROLLBACK, SETTLING_ACTIONS

if TYPE_CHECKING:
    from ledgermq.broker.state.ops import TxnOp

__all__ = [
    "CHECK",
    "COMMIT",
    "DISCARD",
    "HALF_TOPIC",
    "OP_TOPIC",
    "ROLLBACK",
    "SETTLING_ACTIONS",
    "TransactionTable",
]

HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
"""Where half messages wait (queue 0), invisible to consumers: no consumer subscribes to it and
the broker has no topic config for it, so pulls and receives of it are refused."""
OP_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
"""RocketMQ's op topic; named for reference: the ops live in the metadata channel here."""


class TransactionTable:
    """The applied transaction state; changed only by ``apply`` and ``restore``."""

    def __init__(self) -> None:
        self.progress = 0
        """Every half-queue offset below this is settled."""
        self.settled: dict[int, str] = {}
        """Half-queue offset -> COMMIT / ROLLBACK / DISCARD, for offsets >= ``progress``."""
        self.checks: dict[int, int] = {}
        """Half-queue offset -> check-backs sent so far, for open half messages."""

    def outcome(self, offset: int) -> str | None:
        """How the half message at ``offset`` was settled; None while open. Below ``progress``
        the action is no longer kept: ``"settled"``."""
        if offset < self.progress:
            return "settled"
        return self.settled.get(offset)

    def check_times(self, offset: int) -> int:
        return self.checks.get(offset, 0)

    def apply(self, op: TxnOp) -> None:
        """Apply a ``txn`` op; ValueError for an unknown action (``ops.decode_op`` refuses it
        first). A second settlement of one offset is ignored: the first one counts (a commit
        delivered the message; a later rollback cannot take it back)."""
        items = op.items
        for _, action in items:
            if action not in SETTLING_ACTIONS and action != CHECK:
                raise ValueError(f"unknown transaction action {action!r}")
        for offset, action in items:
            if offset < self.progress or offset in self.settled:
                continue
            if action == CHECK:
                self.checks[offset] = self.checks.get(offset, 0) + 1
                continue
            self.settled[offset] = action
            self.checks.pop(offset, None)
        while self.progress in self.settled:
            del self.settled[self.progress]
            self.progress += 1

    def snapshot(self) -> dict[str, object]:
        return {
            "progress": self.progress,
            "settled": {str(k): v for k, v in sorted(self.settled.items())},
            "checks": {str(k): v for k, v in sorted(self.checks.items())},
        }

    @staticmethod
    def restore(value: Any) -> TransactionTable:
        """The table ``snapshot`` made (None: an older snapshot, no transactions then);
        ValueError / TypeError / KeyError / AttributeError if damaged."""
        table = TransactionTable()
        if value is None:
            return table
        table.progress = int(value["progress"])
        table.settled = {int(k): str(v) for k, v in value["settled"].items()}
        table.checks = {int(k): int(v) for k, v in value["checks"].items()}
        for action in table.settled.values():
            if action not in SETTLING_ACTIONS:
                raise ValueError(f"unknown transaction outcome {action!r}")
        return table
