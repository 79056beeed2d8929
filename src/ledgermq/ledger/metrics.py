"""Prometheus metrics of one replica, in its own registry, served on ``/metrics``.

One registry per server (not the process-global one) so tests can run several replicas in one
process. The HTTP endpoint is prometheus-client's own threaded server: a scrape never runs on
the event loop that drives Raft.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:
    from threading import Thread
    from wsgiref.simple_server import WSGIServer

__all__ = ["LedgerMetrics"]

_LATENCY_BUCKETS: Final = (
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
_ROLES: Final = ("LEADER", "FOLLOWER", "CANDIDATE")


class LedgerMetrics:
    """Append latency, replication lag per follower, commit index, term and role."""

    def __init__(self, group: str, self_id: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"group": group, "id": self_id}
        r = self.registry
        self.append_latency = Histogram(
            "ledgermq_append_latency_seconds",
            "Time from an APPEND arriving at the leader to its answer (committed or failed).",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.appended_entries = Counter(
            "ledgermq_appended_entries", "Entries appended through this replica as leader.",
            registry=r,
        )  # fmt: skip
        self.append_errors = Counter(
            "ledgermq_append_errors", "APPENDs answered with an error.", ["code"], registry=r
        )
        self.commit_index = Gauge("ledgermq_commit_index", "Committed index.", registry=r)
        self.end_index = Gauge("ledgermq_end_index", "Last index in the local log.", registry=r)
        self.term = Gauge("ledgermq_term", "Current term.", registry=r)
        self.role = Gauge(
            "ledgermq_role", "1 for the role this replica has now.", ["role"], registry=r
        )
        self.replication_lag = Gauge(
            "ledgermq_replication_lag_entries",
            "Leader only: entries the follower has not acknowledged.",
            ["follower"],
            registry=r,
        )
        self.syncs = Counter("ledgermq_syncs", "Group-commit fsyncs (flush=sync).", registry=r)
        self.info = Gauge(
            "ledgermq_replica_info", "Constant 1, labelled.", list(labels), registry=r
        )
        self.info.labels(**labels).set(1)
        self._server: WSGIServer | None = None
        self._thread: Thread | None = None

    def set_role(self, role: str) -> None:
        for name in _ROLES:
            self.role.labels(name).set(1 if name == role else 0)

    def serve(self, host: str, port: int) -> int:
        """Start the ``/metrics`` endpoint; returns the port it listens on."""
        self._server, self._thread = start_http_server(port, host, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
