"""Raft's safety properties, checked against a running simulation after every event.

The checks lean on the store's chain CRC: it covers an entry and every entry before it, so two
entries with the same chain CRC at the same index have identical logs up to there. That turns
"log matching" and "a committed entry never changes" into O(1) checks per entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["InvariantViolationError", "SafetyLedger"]


class InvariantViolationError(AssertionError):
    """A Raft safety property failed: a bug, reported with the seed that found it."""


@dataclass
class SafetyLedger:
    """Everything ever observed that later observations must agree with."""

    leaders: dict[int, str] = field(default_factory=dict)
    """term -> the node that led it (at most one leader per term)."""
    entries: dict[tuple[int, int], int] = field(default_factory=dict)
    """(index, term) -> chain CRC of the entry ever stored with that index and term."""
    committed: dict[int, int] = field(default_factory=dict)
    """index -> chain CRC of the committed entry at that index."""
    max_committed_index: int = -1
    committed_by_term: dict[int, int] = field(default_factory=dict)
    """term -> highest index a node in that term knew as committed. Raft's leader completeness
    says every leader of a later term holds it (a stale leader of an older term need not)."""

    def leader_elected(self, term: int, node: str) -> None:
        other = self.leaders.setdefault(term, node)
        if other != node:
            raise InvariantViolationError(f"two leaders in term {term}: {other} and {node}")

    def entry_stored(self, node: str, index: int, term: int, chain: int) -> None:
        known = self.entries.setdefault((index, term), chain)
        if known != chain:
            raise InvariantViolationError(
                f"log matching: {node} stores entry {index} of term {term} with a different "
                "history than another node had"
            )

    def entry_committed(self, node: str, index: int, chain: int, term: int) -> None:
        known = self.committed.setdefault(index, chain)
        if known != chain:
            raise InvariantViolationError(f"committed entry {index} changed on {node}")
        self.max_committed_index = max(self.max_committed_index, index)
        self.committed_by_term[term] = max(self.committed_by_term.get(term, -1), index)

    def committed_before_term(self, term: int) -> int:
        """Highest index committed in a term before ``term`` (-1 if none)."""
        return max((i for t, i in self.committed_by_term.items() if t < term), default=-1)
