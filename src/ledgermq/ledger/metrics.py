"""Prometheus metrics of one replica, in its own registry, served on ``/metrics``.

One registry per server (not the process-global one) so tests can run several replicas in one
process; it holds the process collectors too (``net.metrics_http``). The HTTP endpoint is
prometheus-client's own threaded server: a scrape never runs on the event loop that drives Raft.

Every series carries ``cluster``, ``broker`` and ``replica``, as the broker's do
(``broker.metrics``): on a Grafana dashboard "append latency p99 by group" is one series per
group and replica, and two groups' ``n0`` are told apart by more than the scrape's ``instance``.
Why the children are bound here, once: ``Histogram.labels(...)`` hashes its values and takes a
lock on every call; the append path (``LedgerServer._complete_appends``) touches these once per
answered APPEND, so it gets the bound child (a plain ``Histogram``/``Counter``), never a lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import Counter, Gauge, Histogram

from ledgermq.net.metrics_http import MetricsEndpoint

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from prometheus_client import CollectorRegistry

__all__ = ["LABELS", "LedgerMetrics"]

LABELS: Final = ("cluster", "broker", "replica")
"""The labels every ledger series carries (the broker's series carry the same)."""
_LATENCY_BUCKETS: Final = (
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
_ROLES: Final = ("LEADER", "FOLLOWER", "CANDIDATE")
_MEMBERS: Final = ("voter", "learner")


class LedgerMetrics:
    """Append latency, replication lag per follower, commit index, term and role, and the
    membership (members by role, learners' catch-up lag, changes committed).

    ``cluster`` is the broker cluster (``brokerClusterName``; empty for a standalone ledger
    group), ``broker`` the broker name (the group's name for a standalone group), ``replica``
    the replica's id (``n0``). ``group`` is the ledger group (``dLegerGroup``), shown on
    ``ledgermq_replica_info`` only.
    """

    def __init__(self, cluster: str, broker: str, replica: str, group: str | None = None) -> None:
        self.endpoint = MetricsEndpoint()
        self.registry: CollectorRegistry = self.endpoint.registry
        r = self.registry
        self._values = (cluster, broker, replica)
        values = self._values
        self.append_latency = Histogram(
            "ledgermq_append_latency_seconds",
            "Time from an APPEND arriving at the leader to its answer (committed or failed).",
            LABELS,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        ).labels(*values)
        self.appended_entries = Counter(
            "ledgermq_appended_entries", "Entries appended through this replica as leader.",
            LABELS, registry=r,
        ).labels(*values)  # fmt: skip
        self._append_errors = Counter(
            "ledgermq_append_errors", "APPENDs answered with an error.", [*LABELS, "code"],
            registry=r,
        )  # fmt: skip
        self._error_children: dict[str, Counter] = {}
        self.commit_index = Gauge(
            "ledgermq_commit_index", "Committed index.", LABELS, registry=r
        ).labels(*values)
        self.end_index = Gauge(
            "ledgermq_end_index", "Last index in the local log.", LABELS, registry=r
        ).labels(*values)
        self.term = Gauge("ledgermq_term", "Current term.", LABELS, registry=r).labels(*values)
        role = Gauge(
            "ledgermq_role", "1 for the role this replica has now.", [*LABELS, "role"], registry=r
        )
        self._roles = {name: role.labels(*values, name) for name in _ROLES}
        self._replication_lag = Gauge(
            "ledgermq_replication_lag_entries",
            "Leader only: entries the follower has not acknowledged.",
            [*LABELS, "follower"],
            registry=r,
        )
        self._lag_children: dict[str, Gauge] = {}
        self._members = Gauge(
            "ledgermq_raft_members",
            "Members of the group's configuration in effect, by role (voter, learner).",
            [*LABELS, "role"],
            registry=r,
        )
        self._member_children = {name: self._members.labels(*values, name) for name in _MEMBERS}
        self._learner_lag = Gauge(
            "ledgermq_raft_learner_lag_entries",
            "Leader only: entries a learner has not acknowledged yet (its catch-up before it "
            "is promoted to voter).",
            [*LABELS, "learner"],
            registry=r,
        )
        self._learner_children: dict[str, Gauge] = {}
        self.membership_changes = Counter(
            "ledgermq_raft_membership_changes",
            "Membership changes (CONFIG_CHANGE entries) this replica saw committed since it "
            "started: adds, promotions, removals.",
            LABELS,
            registry=r,
        ).labels(*values)
        self.syncs = Counter(
            "ledgermq_syncs", "Group-commit fsyncs (flush=sync).", LABELS, registry=r
        ).labels(*values)
        info = Gauge(
            "ledgermq_replica_info", "Constant 1, labelled.", [*LABELS, "group"], registry=r
        )
        info.labels(*values, group if group is not None else broker).set(1)

    def set_role(self, role: str) -> None:
        for name, child in self._roles.items():
            child.set(1 if name == role else 0)

    def append_error(self, code: str) -> None:
        """One APPEND answered with the error ``code`` (its child bound on first use)."""
        child = self._error_children.get(code)
        if child is None:
            child = self._error_children[code] = self._append_errors.labels(*self._values, code)
        child.inc()

    def set_replication_lag(self, follower: str, entries: int) -> None:
        """The leader's view of how far ``follower`` trails (sampled, not per entry)."""
        child = self._lag_children.get(follower)
        if child is None:
            child = self._replication_lag.labels(*self._values, follower)
            self._lag_children[follower] = child
        child.set(entries)

    def set_replication_lags(self, lags: Mapping[str, int], learners: Collection[str]) -> None:
        """The leader's view of every follower and learner (``lags``; empty on a follower).
        A member that left the group loses its series, so dashboards follow the membership."""
        for follower, entries in lags.items():
            self.set_replication_lag(follower, entries)
        for gone in set(self._lag_children) - set(lags):
            self._replication_lag.remove(*self._values, gone)
            del self._lag_children[gone]
        for learner in learners:
            child = self._learner_children.get(learner)
            if child is None:
                child = self._learner_lag.labels(*self._values, learner)
                self._learner_children[learner] = child
            child.set(lags.get(learner, 0))
        for gone in set(self._learner_children) - set(learners):
            self._learner_lag.remove(*self._values, gone)
            del self._learner_children[gone]

    def set_members(self, voters: int, learners: int) -> None:
        self._member_children["voter"].set(voters)
        self._member_children["learner"].set(learners)

    def serve(self, host: str, port: int) -> int:
        """Start the ``/metrics`` endpoint; returns the port it listens on."""
        return self.endpoint.serve(host, port)

    def close(self) -> None:
        self.endpoint.close()
