"""A Raft group's membership and its history in the log: single-server changes (pure).

Why single-server changes and not joint consensus
-------------------------------------------------
The Raft dissertation (section 4.1) shows that when a configuration differs from the one before
it by exactly one server, every majority of the old configuration and every majority of the new
one share a server, so the two can never elect two leaders of one term or commit two different
entries: no intermediate joint configuration is needed. Joint consensus (section 4.3) changes
several servers at once but needs a second entry per change, two quorums for every commit and
election while it is in flight, and more states to get wrong. An operator replaces, adds or
removes one replica at a time anyway (``replica-add``, then ``replica-remove``), as etcd does, so
LedgerMQ takes the simpler rule; growing 3 -> 5 is two changes, replacing a replica is "add a
learner, let it be promoted, remove the old one".

The rules that make it safe (each enforced by ``RaftCore``):

- a configuration takes effect on a server as soon as its CONFIG_CHANGE entry is in that
  server's log, committed or not (section 4.1); a truncated entry's configuration is undone and
  the previous one is in effect again (``MembershipLog.truncate``);
- a leader proposes a change only after it has committed an entry of its own term (the fix to
  the single-server algorithm published on raft-dev in 2015: without it, two leaders of
  successive terms each with an uncommitted change can lose a committed entry), and only one
  uncommitted change at a time;
- every CONFIG_CHANGE entry carries the *whole* membership, never a delta, so the latest one in
  a log is the configuration, whatever the entries before it were (a replica that joins late, or
  was rebuilt from a leader whose older entries were deleted, needs no history).

Learners (etcd's, Kafka's observers) receive the log but neither vote nor count for commit or
election; a leader promotes a learner that has caught up on its own (``RaftCore``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CONFIG_CHANGE_TYPE",
    "Membership",
    "MembershipError",
    "MembershipLog",
    "MembershipRecord",
    "MembershipState",
]

CONFIG_CHANGE_TYPE: Final = 3
"""The store's ``EntryType.CONFIG_CHANGE`` (reserved by DLedger G2), repeated here because the
core imports nothing of the store."""


class MembershipError(ValueError):
    """A membership is malformed, or a change to it breaks a rule (the message names the rule)."""


@dataclass(frozen=True, slots=True)
class Membership:
    """Who is in the group: voters, learners, and the address each member is reached at.

    ``addresses`` is opaque to the core (it never opens a connection); the ledger server uses it
    to reach members that were added after it started.
    """

    voters: tuple[str, ...]
    learners: tuple[str, ...] = ()
    addresses: tuple[tuple[str, str], ...] = field(default=())
    """(id, "host:port") pairs, sorted by id; a member without an address is absent."""

    def __post_init__(self) -> None:
        if not self.voters:
            raise MembershipError("a group needs at least one voter")
        members = self.voters + self.learners
        if len(set(members)) != len(members):
            raise MembershipError(f"a member is listed twice: {members}")
        if list(self.voters) != sorted(self.voters) or list(self.learners) != sorted(self.learners):
            raise MembershipError("voters and learners must be sorted")
        for member in members:
            if not member or "-" in member or ";" in member:
                raise MembershipError(
                    f"member id {member!r} must be non-empty without '-' or ';' (DLedger peers)"
                )
        known = set(members)
        ids = [a[0] for a in self.addresses]
        if ids != sorted(set(ids)) or not set(ids) <= known:
            raise MembershipError("addresses must be sorted, unique and of members")

    # ------------------------------------------------------------------ queries
    @property
    def members(self) -> tuple[str, ...]:
        """Voters and learners, sorted."""
        return tuple(sorted(self.voters + self.learners))

    @property
    def quorum(self) -> int:
        """Votes or acknowledgements needed: a strict majority of the voters."""
        return len(self.voters) // 2 + 1

    def is_quorum(self, n: int) -> bool:
        return n >= self.quorum

    def is_voter(self, member: str) -> bool:
        return member in self.voters

    def is_member(self, member: str) -> bool:
        return member in self.voters or member in self.learners

    def address_of(self, member: str) -> str | None:
        return dict(self.addresses).get(member)

    # ------------------------------------------------------------------ changes (one at a time)
    def with_learner(self, member: str, address: str = "") -> Membership:
        """Add ``member`` as a learner (it votes only once promoted)."""
        if self.is_member(member):
            raise MembershipError(f"{member} is already a member of the group")
        addresses = dict(self.addresses)
        if address:
            addresses[member] = address
        return Membership(
            self.voters,
            tuple(sorted((*self.learners, member))),
            tuple(sorted(addresses.items())),
        )

    def promoted(self, member: str) -> Membership:
        """Make the learner ``member`` a voter."""
        if member not in self.learners:
            raise MembershipError(f"{member} is not a learner of the group")
        return Membership(
            tuple(sorted((*self.voters, member))),
            tuple(m for m in self.learners if m != member),
            self.addresses,
        )

    def without(self, member: str) -> Membership:
        """Remove ``member`` (a voter or a learner); the last voter cannot be removed."""
        if not self.is_member(member):
            raise MembershipError(f"{member} is not a member of the group")
        if self.voters == (member,):
            raise MembershipError(f"{member} is the group's only voter; it cannot be removed")
        return Membership(
            tuple(m for m in self.voters if m != member),
            tuple(m for m in self.learners if m != member),
            tuple(a for a in self.addresses if a[0] != member),
        )

    # ------------------------------------------------------------------ the entry body
    def encode(self) -> bytes:
        """The body of a CONFIG_CHANGE entry: JSON, keys sorted (the same bytes everywhere)."""
        return json.dumps(
            {
                "voters": list(self.voters),
                "learners": list(self.learners),
                "addresses": dict(self.addresses),
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, body: bytes) -> Membership:
        """The membership in a CONFIG_CHANGE entry's body, or ``MembershipError`` for anything
        else (never another exception): a committed entry is applied on every replica, so an
        unreadable one must be refused the same way everywhere (``RaftCore`` logs and ignores
        it), never raise on all of them. The shape is exact: lists of strings, a dict of
        strings (a string where a list belongs is not read as its characters)."""
        try:
            data = json.loads(bytes(body))
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise MembershipError(f"not a membership entry: {type(exc).__name__}") from None
        if not isinstance(data, dict):
            raise MembershipError("not a membership entry: not a JSON object")
        addresses = data.get("addresses", {})
        if not isinstance(addresses, dict) or not all(
            isinstance(v, str) for v in addresses.values()
        ):
            raise MembershipError("not a membership entry: addresses is not an object of strings")
        return cls(
            _ids(data.get("voters"), "voters"),
            _ids(data.get("learners", []), "learners"),
            tuple(sorted((str(k), v) for k, v in addresses.items())),
        )

    def describe(self) -> str:
        learners = f" learners {','.join(self.learners)}" if self.learners else ""
        return f"voters {','.join(self.voters)}{learners}"


def _ids(value: object, name: str) -> tuple[str, ...]:
    """A CONFIG_CHANGE body's list of member ids, sorted; ``MembershipError`` for anything
    else (``Membership.decode``)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MembershipError(f"not a membership entry: {name} is not a list of ids")
    return tuple(sorted(value))


@dataclass(frozen=True, slots=True)
class MembershipRecord:
    """A membership and the index of the CONFIG_CHANGE entry that made it (-1: the seed)."""

    index: int
    membership: Membership
    term: int = -1
    """Term of that entry (-1: the seed). No node campaigns in a term at or below it (see
    ``RaftCore._maintain_as_candidate``)."""


@dataclass(frozen=True, slots=True)
class MembershipState:
    """What a ``Ready`` tells the driver when the membership changed: the configuration in effect
    (possibly uncommitted) and the latest committed one, which the driver persists (before it
    records a commit index past it) so a restart knows it without reading the whole log."""

    effective: MembershipRecord
    committed: MembershipRecord


class MembershipLog:
    """The configurations a log holds: a committed base and the CONFIG_CHANGE entries after it.

    The configuration in effect is the last one. Entries at or below the base index are ignored
    (the base already reflects them).
    """

    def __init__(self, base: MembershipRecord) -> None:
        self._history: list[MembershipRecord] = [base]

    @property
    def effective(self) -> MembershipRecord:
        return self._history[-1]

    @property
    def committed(self) -> MembershipRecord:
        return self._history[0]

    @property
    def pending(self) -> MembershipRecord | None:
        """The newest configuration that is not committed yet (None: all are)."""
        return self._history[-1] if len(self._history) > 1 else None

    def configurations(self) -> tuple[MembershipRecord, ...]:
        """The committed base, then every uncommitted configuration in log order."""
        return tuple(self._history)

    def append(self, index: int, term: int, membership: Membership) -> bool:
        """A CONFIG_CHANGE entry at ``index`` is now in the log; False if the base covers it."""
        if index <= self._history[-1].index:
            return False
        self._history.append(MembershipRecord(index, membership, term))
        return True

    def truncate(self, from_index: int) -> bool:
        """Entries from ``from_index`` are gone: their configurations are undone.

        Never the committed base (a committed entry is never truncated). True if anything was
        undone, so the previous configuration is in effect again.
        """
        keep = [r for r in self._history[1:] if r.index < from_index]
        changed = len(keep) != len(self._history) - 1
        self._history[1:] = keep
        return changed

    def commit(self, committed_index: int) -> bool:
        """The log is committed up to ``committed_index``: the newest configuration at or below
        it becomes the base. True if the base moved."""
        moved = False
        while len(self._history) > 1 and self._history[1].index <= committed_index:
            del self._history[0]
            moved = True
        return moved

    def reset(self, base: MembershipRecord) -> None:
        """The log began again (rebuilt from a leader's oldest entry): ``base`` is all it knows."""
        self._history = [base]
