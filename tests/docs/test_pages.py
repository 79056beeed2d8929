"""What the pages say is true for a user of a clone (issue 13 item 18, issue 28): the front page's
links resolve, every repository path a page quotes exists, the examples do not collide, and CI's
test command is still where ``.ci/run`` reads it. (Links between the site's pages are checked by
``mkdocs build --strict``, tests/docs/test_site.py.)"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.docs.pages import DOCS, ROOT, pages

README = ROOT / "README.md"
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_PATH = re.compile(r"`((?:src|tests|docs|examples|benchmarks|scripts|conf|deploy)/[^`\s]*)`")
QUICKSTART_PORTS = {9876, 30911, 30921, 30931, 40911, 40912, 40913, 8080, 8081, 8082, 8083}
"""``ledgermq quickstart``'s ports (ledgermq.cli.quickstart: RocketMQ's DLedger samples)."""


def _relative_links(path: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(path.read_text())
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_the_front_page_links_resolve_inside_the_repository() -> None:
    links = _relative_links(README)
    assert any(link.startswith("docs/") for link in links)
    bad = [
        target
        for target in links
        if not (README.parent / target.split("#")[0]).resolve().is_relative_to(ROOT)
        or not (README.parent / target.split("#")[0]).exists()
    ]
    assert bad == []


OURS = [README, *(p for p in pages() if "specs" not in p.parts)]
"""The pages that speak of this repository (docs/specs/ quotes RocketMQ's and DLedger's paths)."""


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_repository_path_exists(path: Path) -> None:
    quoted = [
        p.split("::", 1)[0]  # a test's node id: its file
        for p in _CODE_PATH.findall(path.read_text())
        if not any(c in p for c in "<*$")  # placeholders, globs, variables
    ]
    missing = [p for p in quoted if not (ROOT / p.rstrip("/")).exists()]
    assert missing == []
    assert "../shared" not in path.read_text()


def test_ledger_example_ports_do_not_collide_with_the_quickstart() -> None:
    text = (DOCS / "guides" / "ledger.md").read_text()
    ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", text)}
    assert ports, "the ledger example names its ports"
    assert ports & QUICKSTART_PORTS == set()


def test_spark_setup_installs_from_a_clone() -> None:
    assert "pip install -e '.[spark]'" in (DOCS / "guides" / "spark.md").read_text()


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def ci_command() -> str:
    """The command ``.ci/run`` runs, read as it reads it (its awk line)."""
    script = (ROOT / ".ci" / "run").read_text()
    awk = re.search(r"awk '([^']+)' README\.md", script)
    assert awk is not None, ".ci/run reads the README with awk"
    done = subprocess.run(
        ["awk", awk.group(1), str(README)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_ci_runs_the_checks_with_the_docs_tools() -> None:
    """The README's test command installs the dev extra, which brings mkdocs-material, so the
    site's strict build (tests/docs/test_site.py) runs in CI and fails there without it."""
    command = ci_command()
    assert "scripts/test" in command
    extras = re.search(r"pip install -e '\.\[([\w,]+)\]'", command)
    assert extras is not None
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    installed = [d for extra in extras.group(1).split(",") for d in optional[extra]]
    assert any(d.startswith("mkdocs-material") for d in installed)
    assert any(d.startswith("mkdocs-material") for d in optional["docs"])


NEWCOMER_TOPICS: dict[str, tuple[str, str]] = {
    "install": ("getting-started/install.md", "pip install -e"),
    "quickstart": ("getting-started/quickstart.md", "ledgermq quickstart"),
    "a first cluster on three machines": ("getting-started/first-cluster.md", "three machines"),
    "producing": ("guides/producing.md", "ledgermq produce"),
    "consuming": ("guides/consuming.md", "ledgermq consume"),
    "POP from Python": ("guides/pop.md", "PopConsumer"),
    "FIFO": ("guides/fifo.md", "message_group"),
    "transactions": ("guides/transactions.md", "TransactionProducer"),
    "timers and delays": ("guides/timers.md", "TIMER_DELIVER_MS"),
    "SQL92 filters": ("guides/sql92.md", "MessageSelector.by_sql"),
    "v5 clients": ("guides/v5-clients.md", "rocketmq-python-client"),
    "the standalone proxy": ("guides/proxy.md", "ledgermq proxy"),
    "Spark": ("guides/spark.md", 'format("ledgermq")'),
    "the console": ("guides/console.md", "ledgermq console"),
    "mqadmin names": ("guides/cli.md", "updateTopic"),
    "deployment with systemd": ("operations/deployment.md", "systemctl enable"),
    "configuration": ("operations/configuration.md", "broker.conf"),
    "what flushDiskType does": ("operations/durability.md", "flushDiskType"),
    "security": ("operations/security.md", "aclEnable"),
    "monitoring with Prometheus and Grafana": ("operations/monitoring.md", "grafana"),
    "durability and failover": ("operations/durability.md", "Failover"),
    "chaos testing": ("operations/chaos-testing.md", "ledgermq chaos run"),
    "how to upgrade": ("operations/upgrades.md", "compatib"),
    "how to back up": ("operations/backup-and-restore.md", "ledgermq store backup"),
    "rolling restarts": ("operations/rolling-restarts.md", "replica-status"),
    "adding a broker group": ("operations/scaling-out.md", "topic-update"),
    "leader balance": ("operations/leader-balance.md", "balance-leaders"),
    "replacing a dead replica": ("operations/membership.md", "replica-add"),
    "every CLI command": ("reference/cli.md", ""),
    "every config key": ("reference/configuration.md", ""),
    "every metric": ("reference/metrics.md", ""),
    "request codes and RPCs": ("reference/protocol.md", ""),
    "errors": ("reference/errors.md", ""),
    "architecture": ("architecture.md", "layer"),
    "Raft rules": ("raft-rules.md", "spec"),
    "storage format": ("design/storage.md", "48-byte header"),
    "performance budget": ("performance-budget.md", "µs"),
    "C extensions": ("c-extensions.md", "LEDGERMQ_PURE_PYTHON"),
    "the latest benchmark table and chart": ("benchmarks/index.md", "peers-2026-11-26.png"),
}
"""Issue 28's list of what a newcomer looks for, and the page of the site that answers each (a
phrase it must contain; the generated Reference pages are checked by test_reference.py).
"""


def _nav_files(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [f for item in node for f in _nav_files(item)]
    if isinstance(node, dict):
        return [f for value in node.values() for f in _nav_files(value)]
    return []


@pytest.mark.parametrize("topic", sorted(NEWCOMER_TOPICS))
def test_a_newcomer_finds_the_topic_in_the_navigation(topic: str) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    page, phrase = NEWCOMER_TOPICS[topic]
    assert page in _nav_files(config["nav"])
    if phrase:
        assert phrase.lower() in (DOCS / page).read_text().lower()
