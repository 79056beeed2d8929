"""Is a replica caught up, and may its group lose another one now? (``admin replica-status``)

A rolling restart stops one replica at a time. Stopping the next one is safe only when the
one restarted before it is back *and* caught up: otherwise the group runs on a bare majority
that a second stop breaks (writes stop until the first one has caught up), or, worse, the
leader is the only replica holding the newest entries. The rule judged here, from each
replica's GET_BROKER_RUNTIME_INFO table (``ledger.replica_view`` adds the leader's view):

- the group has one leader, the master, and every other replica follows it in its term;
- every voter answers and is *caught up*: its log end, its committed index and its
  dispatched index (what consumers can see) are each at most ``max_lag`` entries behind the
  leader's committed index, and, for a follower, the leader has it live (it answered the last
  heartbeat round) and at most ``max_lag`` entries behind the leader's log end;
- the target replica (``--id``), a voter or not, is caught up by the same measure.

"Every voter" and not "a majority": the next replica stopped may be any one of them, and a
group of three with one replica behind is one stop away from a lost majority. ``max_lag``
(``DEFAULT_MAX_LAG``) absorbs what a group under load always has in flight between the moment
the leader is asked and the moment the others are; a replica that is restarting, streaming a
backlog or rebuilding is far beyond it.

The assessment is pure (``assess``); ``replica_status`` asks the replicas through an ``Admin``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.client.admin import Admin

__all__ = ["DEFAULT_MAX_LAG", "Readiness", "ReplicaState", "assess", "replica_status"]

DEFAULT_MAX_LAG: Final = 1000
"""Entries a caught-up replica may be behind the leader (module docstring)."""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica as the assessment saw it; ``behind`` is against the leader's committed
    index (None when unknown), ``problem`` None when it is caught up."""

    replica: str
    address: str
    role: str
    end_index: int | None
    committed_index: int | None
    dispatched_index: int | None
    behind: int | None
    problem: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.replica,
            "address": self.address,
            "role": self.role,
            "endIndex": self.end_index,
            "committedIndex": self.committed_index,
            "dispatchedIndex": self.dispatched_index,
            "behind": self.behind,
            "caughtUp": self.problem is None,
            "problem": self.problem,
        }


@dataclass(slots=True)
class Readiness:
    """The verdict: ``ready`` when ``reasons`` is empty, which then says what is missing."""

    broker_name: str
    target: str | None
    leader: str | None
    commit_index: int | None
    max_lag: int
    replicas: list[ReplicaState] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.reasons

    def sentence(self) -> str:
        """One line for an operator."""
        who = f"replica {self.target} of {self.broker_name}" if self.target else self.broker_name
        if self.ready:
            tail = (
                f" and {self.broker_name} can lose another replica"
                if self.target
                else (" can lose a replica")
            )
            caught = " has caught up" if self.target else ""
            return f"ready: {who}{caught}{tail} (every voter within {self.max_lag} entries)"
        return f"not ready: {who}: " + "; ".join(self.reasons)

    def as_json(self) -> dict[str, object]:
        return {
            "brokerName": self.broker_name,
            "target": self.target,
            "ready": self.ready,
            "reasons": self.reasons,
            "leader": self.leader,
            "commitIndex": self.commit_index,
            "maxLag": self.max_lag,
            "replicas": [r.as_json() for r in self.replicas],
        }


def _int(table: Mapping[str, str], key: str) -> int | None:
    try:
        return int(table[key])
    except (KeyError, ValueError):
        return None


def _items(text: str) -> dict[str, str]:
    """``"n1=0,n2=3"`` -> ``{"n1": "0", "n2": "3"}``; a bare ``"n1"`` maps to ``""``."""
    items: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        items[key] = value
    return items


def assess(
    broker_name: str,
    tables: Mapping[str, Mapping[str, str] | str],
    *,
    target: str | None = None,
    max_lag: int = DEFAULT_MAX_LAG,
) -> Readiness:
    """Judge the group from ``tables``: address -> the replica's runtime-info table, or the
    sentence saying why it did not answer (the module docstring's rule)."""
    answered = {a: t for a, t in tables.items() if not isinstance(t, str)}
    by_id = {t.get("dLegerSelfId", ""): (a, t) for a, t in answered.items()}
    leaders = [(a, t) for a, t in answered.items() if t.get("dLegerRole") == "LEADER"]
    terms = {_int(t, "dLegerTerm") or -1 for _, t in leaders}
    result = Readiness(broker_name, target, None, None, max_lag)
    if not leaders:
        result.reasons.append("no replica that answered is the leader (an election may be on)")
        leader_table: Mapping[str, str] = {}
    else:
        # Two replicas may both say LEADER for a moment (an old one not yet told): the
        # higher term is the leader.
        _, leader_table = max(leaders, key=lambda at: _int(at[1], "dLegerTerm") or -1)
        result.leader = leader_table.get("dLegerSelfId")
        result.commit_index = _int(leader_table, "committedIndex")
        if len(terms) < len(leaders):
            result.reasons.append("two replicas say they lead in the same term")
        if leader_table.get("brokerRole") != "SYNC_MASTER":
            result.reasons.append(
                f"leader {result.leader} is not master yet (it is still applying its log)"
            )
    voters = sorted(_items(leader_table.get("dLegerPeerIds", "")))
    lags = _items(leader_table.get("dLegerFollowerLags", ""))
    live = _items(leader_table.get("dLegerFollowersLive", ""))
    commit = result.commit_index
    term = leader_table.get("dLegerTerm")
    wanted = sorted({*voters, *by_id, *([target] if target else [])} - {""})
    for replica in wanted:
        address, table = by_id.get(replica, ("", {}))
        problem = (
            _problem(replica, table, voters, lags, live, result.leader, term, commit, max_lag)
            if table
            else _silence(replica, tables, voters)
            if replica in voters or not voters
            else f"no replica {replica} answered and the leader knows none"
        )
        end, committed = _int(table, "ledgerEndIndex"), _int(table, "committedIndex")
        dispatched = _int(table, "dispatchedIndex")
        known = [i for i in (end, committed, dispatched) if i is not None]
        behind = max(0, commit - min(known)) if commit is not None and known else None
        role = table.get("dLegerRole", "?").lower() if table else "unreachable"
        if table and voters and replica not in voters:
            role = "learner" if role == "follower" else role
        result.replicas.append(
            ReplicaState(replica, address, role, end, committed, dispatched, behind, problem)
        )
        if problem is not None and (replica in voters or replica == target):
            result.reasons.append(problem)
    return result


def _silence(replica: str, tables: Mapping[str, Mapping[str, str] | str], voters: list[str]) -> str:
    """Why ``replica`` has no table: down, not registered, or not answering."""
    errors = sorted(t for t in tables.values() if isinstance(t, str))
    what = "voter" if replica in voters else "replica"
    detail = f" ({'; '.join(errors)})" if errors else ""
    return f"{what} {replica} did not answer: it is down or not registered yet{detail}"


def _problem(
    replica: str,
    table: Mapping[str, str],
    voters: list[str],
    lags: Mapping[str, str],
    live: Mapping[str, str],
    leader: str | None,
    term: str | None,
    commit: int | None,
    max_lag: int,
) -> str | None:
    """Why ``replica`` is not caught up, or None (module docstring)."""
    if leader is None or commit is None:
        return None  # the verdict already says there is no leader
    if replica != leader:
        if table.get("dLegerLeader") != leader or table.get("dLegerTerm") != term:
            return f"{replica} does not follow leader {leader} in term {term} yet"
        if replica in voters:
            if replica not in live:
                return f"leader {leader} did not hear from {replica} in its last heartbeat round"
            lag = int(lags.get(replica) or 0)
            if lag > max_lag:
                return f"{replica} has not acknowledged the leader's last {lag} entries"
    for key, what in (
        ("ledgerEndIndex", "log end"),
        ("committedIndex", "committed index"),
        ("dispatchedIndex", "dispatched index"),
    ):
        value = _int(table, key)
        if value is None or commit - value > max_lag:
            shown = "unknown" if value is None else f"{commit - value} entries"
            return f"{replica}'s {what} is {shown} behind the leader's commit {commit}"
    return None


async def replica_status(
    admin: Admin,
    broker_name: str,
    *,
    target: str | None = None,
    extra_addresses: tuple[str, ...] = (),
    max_lag: int = DEFAULT_MAX_LAG,
) -> Readiness:
    """Ask every replica of ``broker_name`` the NameServer lists (and ``extra_addresses``,
    e.g. a replica not registered yet) for its runtime info, then ``assess``."""
    addresses = set(extra_addresses)
    try:
        groups = await admin.broker_addresses()
    except LedgerMQError:
        if not addresses:
            raise
        groups = {}  # no NameServer: the replicas named on the command line only
    if broker_name not in groups and not addresses:
        raise LedgerMQError(
            f"broker group {broker_name!r} is not registered; known: {', '.join(groups) or 'none'}"
        )
    addresses |= set(groups.get(broker_name, {}).values())
    tables: dict[str, Mapping[str, str] | str] = {}
    for address in sorted(addresses):
        try:
            table = await admin.broker_runtime_info(address)
        except LedgerMQError as exc:
            tables[address] = f"{address}: {exc}"
            continue
        if table.get("brokerName", broker_name) != broker_name:
            tables[address] = f"{address} serves {table.get('brokerName')}, not {broker_name}"
            continue
        tables[address] = table
    return assess(broker_name, tables, target=target, max_lag=max_lag)
