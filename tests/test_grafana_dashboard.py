"""deploy/grafana/ledgermq.json names only metrics LedgerMQ exports (issue 18 section 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from ledgermq.broker.metrics import BrokerMetrics
from ledgermq.clock import SystemClock
from ledgermq.ledger.metrics import LedgerMetrics

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "ledgermq.json"
_PROMQL_WORDS = frozenset({"sum", "by", "rate", "max", "histogram_quantile"})


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query reads: its identifiers once label matchers (``{...}``),
    ranges (``[1m]``), ``by (...)`` lists and function names are taken out."""
    values = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query)
    if values:
        return {values.group(1)}
    stripped = re.sub(r"\bby\s*\([^)]*\)|\{[^}]*\}|\[[^\]]*\]", " ", query)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped))
    return words - _PROMQL_WORDS


def _exported() -> set[str]:
    """Every sample name a replica's /metrics can show (a broker's and its ledger's)."""
    ledger = LedgerMetrics("broker-a", "n0")
    broker = BrokerMetrics("DefaultCluster", "broker-a", "n0", SystemClock())
    for code, kind in ((310, "send"), (11, "pull")):
        broker.record(code, 0, kind, "T", 0.001)
    registry: CollectorRegistry = ledger.registry
    broker.register(registry)
    # every family appears once it has a sample: give the snapshot one of each
    from ledgermq.broker import metrics as module

    broker._snapshot = module._Snapshot(
        put_messages={"%RETRY%g": 1, "%DLQ%g": 1, "T": 1},
        put_bytes={"T": 1},
        get_messages={"T": 1},
        put_tps={"T": 1.0},
        put_size={"T": 1.0},
        get_tps={"T": 1.0},
        group_diff={("g", "T"): 1},
        consumer_clients={"g": 1},
        requests={("SEND_MESSAGE_V2", "0"): 1},
        latency={("send", "T"): ([1] * (len(module.LATENCY_BUCKETS_S) + 1), 0.1)},
        disk_bytes={"commitlog": 1},
    )
    ledger.replication_lag.labels("n1").set(1)
    ledger.append_latency.observe(0.001)
    text = generate_latest(registry).decode()
    return {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"
    }


def test_every_query_names_an_exported_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    exported = _exported()
    names = {name for query in queries for name in metric_names(query)}
    assert names, "no metric name found in the dashboard"
    missing = sorted(names - exported)
    assert missing == [], f"the dashboard asks for metrics nobody exports: {missing}"


def test_the_dashboard_covers_the_issue_list() -> None:
    text = DASHBOARD.read_text()
    for name in ("rocketmq_producer_tps", "rocketmq_consumer_tps", "rocketmq_group_diff",
                 "ledgermq_broker_request_latency_seconds_bucket", "ledgermq_broker_requests_total",
                 "ledgermq_broker_dispatch_lag_entries", "ledgermq_broker_disk_bytes",
                 "ledgermq_broker_connections", "ledgermq_broker_retry_messages_total",
                 "ledgermq_broker_dlq_messages_total"):  # fmt: skip
        assert name in text, name


def test_the_name_reader_itself() -> None:
    query = 'histogram_quantile(0.99, sum by (le, topic) (rate(x_bucket{a="b"}[1m])))'
    assert metric_names(query) == {"x_bucket"}
    assert metric_names("label_values(m, cluster)") == {"m"}
