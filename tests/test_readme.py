"""The README and docs/ say what is true for a user of a clone (issue 13 item 18): links resolve
inside the repository, the examples do not collide, the Python client snippet runs as a script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledgermq.bench.processes import child_env
from ledgermq.testing.broker_cluster import BrokerCluster

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_PATH = re.compile(r"`((?:src|tests|docs|examples|benchmarks|scripts|conf)/[^`\s]*)`")
QUICKSTART_PORTS = {9876, 30911, 30921, 30931, 40911, 40912, 40913, 8080}
"""``ledgermq quickstart``'s ports (ledgermq.cli.quickstart: RocketMQ's DLedger samples)."""


def _relative_links(path: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(path.read_text())
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(path: Path) -> None:
    bad = []
    for target in _relative_links(path):
        resolved = (path.parent / target.split("#")[0]).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            bad.append(target)
    assert bad == []
    assert "../shared" not in path.read_text()


def test_docs_are_linked_and_linked_files_exist() -> None:
    """The README links to docs/, and every repository path it quotes exists."""
    assert _relative_links(README)
    quoted = [
        p
        for p in _CODE_PATH.findall(README.read_text())
        if not any(c in p for c in "<*$")  # placeholders, globs, variables
    ]
    missing = [p for p in quoted if not (ROOT / p.rstrip("/")).exists()]
    assert missing == []


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_ledger_example_ports_do_not_collide_with_the_quickstart() -> None:
    ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", _section("The ledger server"))}
    assert ports, "the ledger example names its ports"
    assert ports & QUICKSTART_PORTS == set()


def test_spark_setup_installs_from_a_clone() -> None:
    assert "pip install -e '.[spark]'" in _section("Spark")


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def client_script() -> str:
    """The Python client block that follows the ``python-client-script`` marker."""
    text = README.read_text()
    start = text.index("<!-- python-client-script -->\n```python\n")
    body = text[start:].split("```python\n", 1)[1]
    return body.split("\n```", 1)[0] + "\n"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_python_client_snippet_runs_as_a_script(tmp_path: Path) -> None:
    script = client_script()
    assert 'NAMESRV = "127.0.0.1:9876"' in script
    cluster = BrokerCluster(tmp_path / "cluster", replicas=3)
    try:
        cluster.wait_routable()
        path = tmp_path / "client_example.py"
        path.write_text(script.replace("127.0.0.1:9876", cluster.namesrv_addr))
        done = subprocess.run(
            [sys.executable, str(path)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        cluster.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("sent SEND_OK ")
    assert "received created b'hello'" in lines
