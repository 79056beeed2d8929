"""deploy/grafana/ledgermq.json names only metrics LedgerMQ exports (issue 18 section 2), and
only labels those metrics carry (issue 28 item 3): a panel grouping by a label its metric lacks
shows one unlabelled series, and a ``$cluster`` matcher on it would match nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ledgermq.broker.metrics import BrokerMetrics
from ledgermq.clock import SystemClock
from ledgermq.ledger.metrics import LedgerMetrics

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "ledgermq.json"
_PROMQL_WORDS = frozenset({"sum", "by", "rate", "max", "histogram_quantile"})
_SCRAPE_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus adds to every series it scrapes."""


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query reads: its identifiers once label matchers (``{...}``),
    ranges (``[1m]``), ``by (...)`` lists and function names are taken out."""
    values = re.fullmatch(r"label_values\((\w+)(\{[^}]*\})?,\s*\w+\)", query)
    if values:
        return {values.group(1)}
    stripped = re.sub(r"\bby\s*\([^)]*\)|\{[^}]*\}|\[[^\]]*\]", " ", query)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped))
    return words - _PROMQL_WORDS


def label_uses(query: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """The labels a PromQL query relies on: per selector ``name{a="..", b=~".."}`` the matched
    label names, and the labels of its ``by (...)`` lists and of ``label_values(m, label)``."""
    values = re.fullmatch(r"label_values\((\w+)(?:\{([^}]*)\})?,\s*(\w+)\)", query)
    if values:
        matched = set(re.findall(r"(\w+)\s*[=!]~?", values.group(2) or ""))
        return [(values.group(1), matched | {values.group(3)})], set()
    selectors = [
        (name, set(re.findall(r"(\w+)\s*[=!]~?", matchers)))
        for name, matchers in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", query)
    ]
    grouped = {
        label.strip()
        for group in re.findall(r"\bby\s*\(([^)]*)\)", query)
        for label in group.split(",")
        if label.strip()
    }
    return selectors, grouped


def _exported_labels() -> dict[str, set[str]]:
    """Every sample name a replica's /metrics can show (a broker's and its ledger's, and the
    process collectors'), with the label names it carries."""
    text = _exposition()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


def _exported() -> set[str]:
    """Every sample name a replica's /metrics can show (a broker's and its ledger's)."""
    return set(_exported_labels())


def _exposition() -> str:
    ledger = LedgerMetrics("DefaultCluster", "broker-a", "n0")
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
    ledger.set_replication_lag("n1", 1)
    ledger.append_error("EXPIRED")
    ledger.append_latency.observe(0.001)
    return generate_latest(registry).decode()


def test_every_query_names_an_exported_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    exported = _exported()
    names = {name for query in queries for name in metric_names(query)}
    assert names, "no metric name found in the dashboard"
    missing = sorted(names - exported)
    assert missing == [], f"the dashboard asks for metrics nobody exports: {missing}"


def test_every_query_uses_labels_its_metrics_carry() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = _exported_labels()
    queries = [
        (p["title"], t["expr"], t.get("legendFormat", "")) for p in dashboard["panels"]
        for t in p["targets"]
    ]  # fmt: skip
    queries += [
        (v["name"], v["query"], "") for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    wrong = []
    for title, query, legend in queries:
        selectors, grouped = label_uses(query)
        carried: set[str] = set(_SCRAPE_LABELS)
        for name in metric_names(query):
            carried |= exported.get(name, set())
        for name, matched in selectors:
            missing = matched - exported.get(name, set()) - _SCRAPE_LABELS
            if missing:
                wrong.append(f"{title}: {name} has no label {sorted(missing)}")
        legend_labels = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
        wrong.extend(
            f"{title}: no metric of {query!r} has the label {label!r}"
            for label in sorted((grouped | legend_labels) - carried)
        )
    assert wrong == []


def test_the_ledger_and_broker_panels_follow_cluster_and_broker() -> None:
    """Every panel on a LedgerMQ series (not the process figures, which carry only the scrape's
    labels) filters by ``$cluster`` and ``$broker``."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"cluster", "broker"} <= variables
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            if any(name.startswith("process_") for name in metric_names(expr)):
                continue
            assert 'cluster=~"$cluster"' in expr, (panel["title"], expr)
            assert 'broker=~"$broker"' in expr, (panel["title"], expr)


def test_every_ledger_series_carries_cluster_broker_and_replica() -> None:
    exported = _exported_labels()
    ledger = {name: labels for name, labels in exported.items() if name.startswith("ledgermq_")}
    assert "ledgermq_append_latency_seconds_bucket" in ledger
    for name, labels in ledger.items():
        assert {"cluster", "broker", "replica"} <= labels, (name, labels)
    assert "process_resident_memory_bytes" in exported  # the process collectors are there too


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
    assert metric_names('label_values(m{cluster=~"$cluster"}, broker)') == {"m"}
    assert label_uses('label_values(m{cluster=~"$c"}, broker)') == ([("m", {"cluster", "broker"})],
                                                                     set())  # fmt: skip
    assert label_uses('sum by (le, topic) (rate(x_bucket{a="b", c!~"d"}[1m]))') == (
        [("x_bucket", {"a", "c"})], {"le", "topic"},
    )  # fmt: skip
