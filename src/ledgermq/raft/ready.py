"""What the core hands its driver after inputs: the etcd ``Ready`` contract.

The driver must, in this order: persist ``hard_state``; apply ``truncate_from`` (or, when
``restart_from`` is set, discard the whole log) then append ``entries`` to the log; send
``messages``; send ``messages_after_persist`` only once the first two steps are durable (a vote
must be on disk before it is granted, spec-election section 1.5; a follower acknowledges entries
only after storing them); record ``committed_index``; report
``completed`` proposals and ``transfers`` to their callers; persist ``membership.committed`` when
``membership`` is set (before recording a commit index past it); then call ``advance(ready)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ledgermq.raft.membership import MembershipState
    from ledgermq.raft.messages import LogEntry, Message, ResponseCode, Role

__all__ = ["HardState", "NewEntry", "ProposalResult", "Ready", "RoleChange", "TransferResult"]


@dataclass(frozen=True, slots=True)
class HardState:
    """What must survive a restart: DLedger's ``currterm`` file (``currTerm``, ``voteLeader``)."""

    term: int = 0
    voted_for: str | None = None
    rebuilding: bool = False
    """The node started with no log and no hard state (a new node, or a replaced disk) and has
    not yet caught up with a leader: it may have forgotten votes and acknowledgements it gave, so
    it neither votes for a candidate that has entries nor campaigns with a partial log."""


class NewEntry(NamedTuple):
    """An entry the leader creates (a proposal or its NOOP); the store assigns its position.

    A ``NamedTuple``: the leader builds one per proposed body, and a frozen dataclass cost
    12 % of a busy leader's time in its ``__init__`` alone.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index(): the spec's name wins
    term: int
    body: bytes
    entry_type: int = 1
    """1 NORMAL, 2 NOOP (the store's ``EntryType`` values)."""
    channel: int = 0
    """Stored in the entry's ``channel`` field; the broker tells metadata from messages by it."""

    @property
    def size(self) -> int:
        return 48 + len(self.body)


@dataclass(frozen=True, slots=True)
class RoleChange:
    term: int
    role: Role
    leader_id: str | None


@dataclass(frozen=True, slots=True)
class ProposalResult:
    """The outcome of ``propose``: SUCCESS once committed, else why it was given up.

    A failed proposal's entries may still be committed later (TERM_CHANGED, WAIT_QUORUM_ACK_
    TIMEOUT mean "unknown outcome"), exactly as with a DLedger client future.
    """

    proposal_id: int
    first_index: int
    last_index: int
    term: int
    code: ResponseCode


@dataclass(frozen=True, slots=True)
class TransferResult:
    """The outcome of ``transfer_leadership`` (spec-election sections 6.2 and 6.3).

    SUCCESS once the transferee reports it leads; otherwise the DLedger code: UNKNOWN_MEMBER,
    INCONSISTENT_TERM, NOT_LEADER, LEADER_TRANSFERRING, FALL_BEHIND_TOO_MUCH (refused at once),
    TAKE_LEADERSHIP_FAILED, EXPIRED_TERM, INCONSISTENT_LEADER (from the transferee) or TIMEOUT.
    """

    transfer_id: int
    transferee: str
    term: int
    code: ResponseCode


@dataclass(slots=True)
class Ready:
    hard_state: HardState | None = None
    truncate_from: int | None = None
    restart_from: int | None = None
    """Discard the whole stored log, committed entries too; ``entries`` begin the new log at this
    index, at the leader's positions (a follower rebuilt from a leader whose older entries were
    deleted by retention)."""
    entries: list[NewEntry | LogEntry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    messages_after_persist: list[Message] = field(default_factory=list)
    committed_index: int | None = None
    role_changes: list[RoleChange] = field(default_factory=list)
    completed: list[ProposalResult] = field(default_factory=list)
    transfers: list[TransferResult] = field(default_factory=list)
    membership: MembershipState | None = None
    """Set when the configuration in effect or the committed one changed: the driver persists
    ``membership.committed`` before it records a commit index past it, and (re)connects to the
    members of ``membership.effective``."""

    def is_empty(self) -> bool:
        return not (
            self.hard_state
            or self.truncate_from is not None
            or self.restart_from is not None
            or self.entries
            or self.messages
            or self.messages_after_persist
            or self.committed_index is not None
            or self.role_changes
            or self.completed
            or self.transfers
            or self.membership is not None
        )
