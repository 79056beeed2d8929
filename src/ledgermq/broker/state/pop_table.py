"""POP state of the broker: one ``broker.pop.PopQueue`` per (group, topic, queue), replicated.

Every change is a ``pop`` op on the ledger's metadata channel (``ops.PopOp``), applied by every
replica in log order like consumer offsets (``metadata.BrokerMetadata.apply`` hands it here), and
the whole table is part of the metadata snapshot. So a new master after a failover, or a replica
rebuilt from a snapshot, holds exactly the deliveries, acks and handle numbers the old master had
committed: an acknowledged message is not handed out again, an unacknowledged one comes back
after its invisible time (issue 16 section 2).

The queue's settings (FIFO, max attempts) travel in every op, so replicas never read them from
anywhere else: an op creates the queue with them, and an op whose settings differ from the
queue's changes them first (``PopQueue.reconfigure``): a group made FIFO
(``consumeMessageOrderly``) or given other max attempts has them from its next receive on, in
the middle of a backlog too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ledgermq.broker.pop import PopQueue
from ledgermq.broker.state.ops import PopKey

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledgermq.broker.pop import Outcome
    from ledgermq.broker.state.ops import PopOp

__all__ = ["PopKey", "PopTable"]

_log = logging.getLogger(__name__)


class PopTable:
    """The applied POP queues; changed only by ``apply`` and ``restore``."""

    def __init__(self) -> None:
        self.queues: dict[PopKey, PopQueue] = {}

    def find(self, key: PopKey) -> PopQueue | None:
        return self.queues.get(key)

    def apply(self, op: PopOp) -> list[Outcome]:
        """Apply a ``pop`` op (``ops.decode_op`` checked it: this does not fail)."""
        settings = op.settings
        queue = self.queues.get(op.key)
        if queue is None:
            queue = self.queues[op.key] = PopQueue(settings)
        elif queue.settings != settings:
            queue.reconfigure(settings)
        return queue.apply_all(op.records)

    def drop(self, *, topic: str | None = None, group: str | None = None) -> None:
        """Forget the queues of a deleted topic or group."""
        for key in [k for k in self.queues if k[1] == topic or k[0] == group]:
            del self.queues[key]

    def snapshot(self) -> list[object]:
        return [[g, t, q, self.queues[(g, t, q)].snapshot()] for g, t, q in sorted(self.queues)]

    @staticmethod
    def restore(entries: Iterable[Any]) -> PopTable:
        """The table ``snapshot`` made; ValueError / TypeError if damaged."""
        table = PopTable()
        for group, topic, queue_id, state in entries:
            if not isinstance(state, dict):
                raise TypeError(f"a POP queue snapshot is an object, got {state!r:.80}")
            table.queues[(str(group), str(topic), int(queue_id))] = PopQueue.from_snapshot(state)
        return table
