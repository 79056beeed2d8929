"""The simulator's replicated state machine: what every replica does with committed entries.

Raft promises every replica the same committed log; the state machine must then give every
replica the same state, and must never stop. The broker's dispatcher once broke the second
rule (issue 25 item 1): an entry whose *content* could not be applied (a message for the topic
``%DLQ%orders.v1``) made every replica fail on it, exit and refuse to start again, so a single
committed entry took the whole group down for good. The fix (``broker.storage.dispatcher``) is
the rule modelled here: a deterministic rejection *quarantines* the entry (skipped, recorded,
the same on every replica) and apply goes on.

``ApplyModel`` is a small deterministic state machine with a poison rule: a body that starts
with ``POISON_MARK`` is rejected (``PoisonEntryError``) by its apply function, on every replica
alike, as an invalid topic name is. ``Applier`` is one replica's apply loop over its committed
log, with the quarantine; ``ApplyLedger`` holds, for the whole run, the state digest after each
applied index, so the invariants are checked after every step:

- **same state**: every replica that has applied index *i* has the same state digest there
  (quarantine decisions included);
- **apply never stops**: a replica has applied everything its log has committed (a rejection
  that escaped the loop, the old fail-stop, leaves it behind and is reported).

A replica whose log begins after what it has applied (retention, a rebuild from the leader's
oldest entry, a replaced disk) takes the state at ``begin - 1`` from the ledger, as a broker
would take a snapshot: some replica applied that index, since only committed entries are
deleted or sent as a rebuild's base.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.testing.invariants import InvariantViolationError

if TYPE_CHECKING:
    from ledgermq.store import MemoryLedgerStore

__all__ = ["POISON_MARK", "Applier", "ApplyLedger", "ApplyModel", "PoisonEntryError", "poison"]

POISON_MARK: Final = b"!"
"""First byte of a body the model's apply function rejects (an entry no replica can apply)."""


class PoisonEntryError(ValueError):
    """The model rejects this entry for its content: the same on every replica."""


def poison(body: bytes) -> bytes:
    """``body`` made into a poison entry of the same length (so a seed's run keeps its sizes)."""
    return POISON_MARK + body[1:] if body else POISON_MARK


@dataclass
class ApplyModel:
    """The state: a digest chained over every applied entry, the count, the quarantine."""

    digest: int = 0
    applied: int = 0
    quarantined: list[int] = field(default_factory=list)

    def apply(self, index: int, body: bytes) -> None:
        """Apply one entry; ``PoisonEntryError`` (nothing changed) for a poison body."""
        if body.startswith(POISON_MARK):
            raise PoisonEntryError(f"entry {index} is poison: its apply is refused")
        self.digest = zlib.crc32(b"A%d:" % index + body, self.digest)
        self.applied += 1

    def quarantine(self, index: int) -> None:
        self.digest = zlib.crc32(b"Q%d" % index, self.digest)
        self.quarantined.append(index)


@dataclass
class ApplyLedger:
    """The run-wide record of the state after each applied index (the checker's side)."""

    digests: dict[int, int] = field(default_factory=dict)
    quarantined: set[int] = field(default_factory=set)

    def applied(self, node_id: str, index: int, digest: int) -> None:
        known = self.digests.setdefault(index, digest)
        if known != digest:
            raise InvariantViolationError(
                f"{node_id}: state after applying entry {index} differs from another replica's "
                f"({digest:#x} != {known:#x})"
            )


@dataclass
class Applier:
    """One replica's apply loop: committed entries in order into its ``ApplyModel``.

    ``quarantine_poison`` False is the old behaviour (a rejected entry stops apply, as the
    dispatcher's fail-stop did); it exists so that a test can show the invariant catches it.
    """

    node_id: str
    ledger: ApplyLedger
    quarantine_poison: bool = True
    model: ApplyModel = field(default_factory=ApplyModel)
    applied_index: int = -1
    stopped: str | None = None
    """Why apply stopped on this replica, if it did (an invariant violation)."""

    def catch_up(self, store: MemoryLedgerStore, committed_index: int) -> None:
        """Apply every committed entry not applied yet, in log order."""
        if self.stopped is not None:
            return
        if self.applied_index + 1 < store.begin_index:
            self._install(store.begin_index - 1)
        start = self.applied_index + 1
        if start > committed_index:
            return
        for entry in store.read_range(start, 1 << 40):
            if entry.index > committed_index:
                break
            try:
                self.model.apply(entry.index, entry.body)
            except PoisonEntryError as exc:
                if not self.quarantine_poison:
                    self.stopped = f"apply stopped at entry {entry.index}: {exc}"
                    return
                self.model.quarantine(entry.index)
                self.ledger.quarantined.add(entry.index)
            self.applied_index = entry.index
            self.ledger.applied(self.node_id, entry.index, self.model.digest)

    def _install(self, index: int) -> None:
        """Take the state at ``index`` (a snapshot from a replica that applied it)."""
        digest = self.ledger.digests.get(index)
        if digest is None:
            raise InvariantViolationError(
                f"{self.node_id}: its log begins after entry {index}, which no replica applied"
            )
        self.model = ApplyModel(digest=digest)
        self.applied_index = index

    def check(self, committed_index: int) -> None:
        """Apply never stops: everything committed here has been applied."""
        if self.stopped is not None:
            raise InvariantViolationError(f"{self.node_id}: {self.stopped}")
        if self.applied_index < committed_index:
            raise InvariantViolationError(
                f"{self.node_id}: applied up to {self.applied_index} of {committed_index} "
                "committed entries"
            )
