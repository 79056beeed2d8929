"""The broker's figures on the replica's ``/metrics``: traffic per topic, consumer lag per
group, request counts and latencies, dispatch lag, disk use, connections.

Names follow RocketMQ's Prometheus exporter where it has one (``rocketmq_producer_tps``,
``rocketmq_producer_put_size``, ``rocketmq_consumer_tps``, ``rocketmq_group_diff``), ours
(``ledgermq_broker_*``) otherwise; every series carries ``cluster``, ``broker`` and ``replica``.
Grafana's dashboard in ``deploy/grafana/`` is built on them.

Why a snapshot: the request path only bumps plain dict counters and bucket lists on the event
loop (no lock, no prometheus-client object per request); once a second the housekeeping task
folds them, with the broker's own counters, into an immutable ``_Snapshot``, and the exporter's
HTTP thread only ever reads the latest snapshot. A scrape is at most a second stale and never
reads a dict the loop is changing.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.clock import Clock

__all__ = ["BrokerMetrics"]

LATENCY_BUCKETS_S: Final = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
"""Upper bounds of the request latency histograms, seconds (the last bucket is +Inf)."""
DISK_EVERY_S: Final = 30.0
"""How often the store directories are measured (a walk of their files)."""

_RETRY: Final = "%RETRY%"
_DLQ: Final = "%DLQ%"


@dataclass
class _Latency:
    """One histogram's buckets, counted on the event loop."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        self.total_s += seconds


@dataclass(frozen=True)
class _Snapshot:
    """Everything a scrape shows, made on the event loop, read by the exporter's thread."""

    put_messages: dict[str, int] = field(default_factory=dict)
    put_bytes: dict[str, int] = field(default_factory=dict)
    get_messages: dict[str, int] = field(default_factory=dict)
    put_tps: dict[str, float] = field(default_factory=dict)
    put_size: dict[str, float] = field(default_factory=dict)
    get_tps: dict[str, float] = field(default_factory=dict)
    group_diff: dict[tuple[str, str], int] = field(default_factory=dict)
    consumer_clients: dict[str, int] = field(default_factory=dict)
    requests: dict[tuple[str, str], int] = field(default_factory=dict)
    latency: dict[tuple[str, str], tuple[list[int], float]] = field(default_factory=dict)
    dispatch_lag: int = 0
    quarantined: int = 0
    scheduler_dropped: dict[str, int] = field(default_factory=dict)
    disk_bytes: dict[str, int] = field(default_factory=dict)
    connections: int = 0
    master: bool = False


def _directory_bytes(path: str) -> int:
    """Bytes allocated to the files under ``path`` (sparse files count what they hold)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue  # deleted while we walked
    return total


class BrokerMetrics:
    """Collects the broker's figures (see the module docstring); a prometheus collector."""

    def __init__(self, cluster: str, broker: str, replica: str, clock: Clock) -> None:
        self._clock = clock
        self._labels = {"cluster": cluster, "broker": broker, "replica": replica}
        self._requests: dict[tuple[int, int], int] = {}
        self._latency: dict[tuple[str, str], _Latency] = {}
        self._snapshot = _Snapshot()
        self._last_refresh = clock.monotonic_ms() / 1000
        self._last_disk = float("-inf")
        self._disk: dict[str, int] = {}
        self._codes: dict[int, str] = {}

    def register(self, registry: CollectorRegistry) -> None:
        registry.register(self)

    # ------------------------------------------------------------------ event loop
    def record(self, code: int, response: int, request: str, topic: str, seconds: float) -> None:
        """One answered request: its code, answer code, kind (``send``, ``pull``, ...), topic
        (empty when it names none) and time from arrival to answer."""
        key = (code, response)
        self._requests[key] = self._requests.get(key, 0) + 1
        if request:
            hist = self._latency.get((request, topic))
            if hist is None:
                hist = self._latency[request, topic] = _Latency()
            hist.observe(seconds)

    def refresh(
        self,
        state: BrokerState,
        committed_index: int,
        consumer_clients: dict[str, int],
        connections: int,
    ) -> None:
        """Fold the counters into a new snapshot (the housekeeping task, once a second)."""
        now = self._clock.monotonic_ms() / 1000
        elapsed = max(now - self._last_refresh, 1e-3)
        self._last_refresh = now
        old = self._snapshot
        stats = state.stats
        put_messages = dict(stats.put_messages)
        put_bytes = dict(stats.put_bytes)
        get_messages = dict(stats.get_messages)

        def rate(new: dict[str, int], before: dict[str, int]) -> dict[str, float]:
            return {k: (v - before.get(k, 0)) / elapsed for k, v in new.items()}

        master = state.role.value.endswith("MASTER")
        group_diff: dict[tuple[str, str], int] = {}
        if master:  # the offsets a master holds are the group's; a slave's may trail
            for (topic, group), committed in list(state.metadata.offsets.items()):
                diff = 0
                for queue_id, offset in committed.items():
                    queue = state.queues.find(topic, queue_id)
                    if queue is not None:
                        diff += max(queue.max_offset - offset, 0)
                group_diff[group, topic] = diff
        if now - self._last_disk >= DISK_EVERY_S:
            self._last_disk = now
            root = state.config.store_path_root_dir
            self._disk = {
                kind: _directory_bytes(os.path.join(root, sub))
                for kind, sub in (
                    ("consumequeue", "consumequeue"),
                    ("index", "index"),
                    ("commitlog", f"dledger-{state.config.dleger_self_id}"),
                )
            }
        self._snapshot = _Snapshot(
            put_messages=put_messages,
            put_bytes=put_bytes,
            get_messages=get_messages,
            put_tps=rate(put_messages, old.put_messages),
            put_size=rate(put_bytes, old.put_bytes),
            get_tps=rate(get_messages, old.get_messages),
            group_diff=group_diff,
            consumer_clients=dict(consumer_clients),
            requests={
                (self._code_name(code), str(response)): n
                for (code, response), n in self._requests.items()
            },
            latency={k: (list(h.counts), h.total_s) for k, h in self._latency.items()},
            dispatch_lag=max(committed_index - state.dispatcher.dispatched_index, 0),
            quarantined=state.dispatcher.quarantine.total,
            scheduler_dropped=dict(stats.scheduler_dropped),
            disk_bytes=dict(self._disk),
            connections=connections,
            master=master,
        )

    def _code_name(self, code: int) -> str:
        name = self._codes.get(code)
        if name is None:
            from ledgermq.wire import MQRequestCode  # noqa: PLC0415 - once per code

            try:
                name = MQRequestCode(code).name
            except ValueError:
                name = str(code)
            self._codes[code] = name
        return name

    # ------------------------------------------------------------------ exporter thread
    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot
        base = list(self._labels)
        values = list(self._labels.values())

        def gauge(name: str, doc: str, extra: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=[*base, *extra])

        def counter(name: str, doc: str, extra: list[str]) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, labels=[*base, *extra])

        tps = gauge("rocketmq_producer_tps", "Messages stored per second, last second.", ["topic"])
        size = gauge("rocketmq_producer_put_size", "Bytes stored per second.", ["topic"])
        consumer_tps = gauge(
            "rocketmq_consumer_tps", "Messages pulled per second, last second.", ["topic"]
        )
        messages_in = counter(
            "ledgermq_broker_messages_in", "Messages stored through this replica.", ["topic"]
        )
        bytes_in = counter("ledgermq_broker_bytes_in", "Bytes stored.", ["topic"])
        messages_out = counter("ledgermq_broker_messages_out", "Messages pulled.", ["topic"])
        retries = counter(
            "ledgermq_broker_retry_messages", "Messages sent back for a retry.", ["group"]
        )
        dead = counter("ledgermq_broker_dlq_messages", "Messages moved to a DLQ.", ["group"])
        for topic, n in sorted(snap.put_tps.items()):
            tps.add_metric([*values, topic], n)
        for topic, n in sorted(snap.put_size.items()):
            size.add_metric([*values, topic], n)
        for topic, n in sorted(snap.get_tps.items()):
            consumer_tps.add_metric([*values, topic], n)
        for topic, n in sorted(snap.put_messages.items()):
            messages_in.add_metric([*values, topic], n)
            if topic.startswith(_RETRY):
                retries.add_metric([*values, topic[len(_RETRY) :]], n)
            elif topic.startswith(_DLQ):
                dead.add_metric([*values, topic[len(_DLQ) :]], n)
        for topic, n in sorted(snap.put_bytes.items()):
            bytes_in.add_metric([*values, topic], n)
        for topic, n in sorted(snap.get_messages.items()):
            messages_out.add_metric([*values, topic], n)
        yield from (tps, size, consumer_tps, messages_in, bytes_in, messages_out, retries, dead)

        diff = gauge(
            "rocketmq_group_diff",
            "Messages a consumer group has not committed yet, per topic (master only).",
            ["group", "topic"],
        )
        for (group, topic), n in sorted(snap.group_diff.items()):
            diff.add_metric([*values, group, topic], n)
        clients = gauge(
            "ledgermq_broker_consumer_clients", "Clients of a consumer group online.", ["group"]
        )
        for group, n in sorted(snap.consumer_clients.items()):
            clients.add_metric([*values, group], n)
        yield from (diff, clients)

        requests = counter(
            "ledgermq_broker_requests", "Requests answered, by code and answer code.",
            ["code", "response"],
        )  # fmt: skip
        for (code, response), n in sorted(snap.requests.items()):
            requests.add_metric([*values, code, response], n)
        yield requests
        latency = HistogramMetricFamily(
            "ledgermq_broker_request_latency_seconds",
            "Time from a request's arrival to its answer, by kind and topic.",
            labels=[*base, "request", "topic"],
        )
        bounds = [*(str(b) for b in LATENCY_BUCKETS_S), "+Inf"]
        for (request, topic), (counts, total) in sorted(snap.latency.items()):
            cumulative, running = [], 0
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                cumulative.append((bound, running))
            latency.add_metric([*values, request, topic], cumulative, total)
        yield latency

        lag = gauge(
            "ledgermq_broker_dispatch_lag_entries",
            "Committed ledger entries not yet in the ConsumeQueues.",
            [],
        )
        lag.add_metric(values, snap.dispatch_lag)
        yield from self._skipped(snap, base, values)
        disk = gauge("ledgermq_broker_disk_bytes", "Bytes on disk, by store part.", ["kind"])
        for kind, n in sorted(snap.disk_bytes.items()):
            disk.add_metric([*values, kind], n)
        connections = gauge("ledgermq_broker_connections", "Open remoting connections.", [])
        connections.add_metric(values, snap.connections)
        role = gauge("ledgermq_broker_master", "1 while this replica is its group's master.", [])
        role.add_metric(values, 1 if snap.master else 0)
        yield from (lag, disk, connections, role)

    @staticmethod
    def _skipped(snap: _Snapshot, base: list[str], values: list[str]) -> Iterator[Metric]:
        """What was skipped so the rest could go on (issue 25): entries the dispatcher
        quarantined, heads the schedulers could never deliver."""
        quarantined = CounterMetricFamily(
            "ledgermq_broker_quarantined_entries",
            "Committed records or entries skipped because they cannot be applied on any "
            "replica (ledgermq admin quarantined-entries lists them).",
            labels=base,
        )
        quarantined.add_metric(values, snap.quarantined)
        dropped = CounterMetricFamily(
            "ledgermq_broker_scheduler_dropped",
            "Heads of a scheduler (delay levels, timers, POP revive, transaction checks) that "
            "can never be delivered, dead-lettered or dropped so the rest go on.",
            labels=[*base, "scheduler"],
        )
        for scheduler, n in sorted(snap.scheduler_dropped.items()):
            dropped.add_metric([*values, scheduler], n)
        yield from (quarantined, dropped)
