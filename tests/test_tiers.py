"""The tiers of the test suite (tests/tiers.py): the fast tier of ``scripts/test --fast``
starts no process, and every test stays in the full suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import tiers

ROOT = Path(__file__).resolve().parent.parent

REAL_PROCESS_FILES = (
    "tests/ledger/test_processes.py",  # marked integration in the file
    "tests/broker/test_failover_processes.py",
    "tests/cli/test_consume.py",  # unmarked: made integration by its broker_clusters fixture
    "tests/interop/test_rocketmq_client.py",
)


class _Item(SimpleNamespace):
    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.name)


def _item(nodeid: str, *fixtures: str) -> Any:
    return _Item(nodeid=nodeid, fixturenames=list(fixtures), markers=[])


def test_real_process_fixtures_make_a_test_integration_and_listed_tests_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tiers, "SLOW", frozenset({"tests/a.py", "tests/b.py::test_x"}))
    items = [
        _item("tests/c.py::test_p", "tmp_path", "broker_clusters"),
        _item("tests/c.py::test_q", "replica_groups"),
        _item("tests/a.py::test_any[1]"),
        _item("tests/b.py::test_x[2-3]"),
        _item("tests/b.py::test_xy"),
        _item("tests/c.py::test_plain", "tmp_path"),
    ]
    assert tiers.apply(items) == {"tests/a.py", "tests/b.py::test_x"}
    assert [item.markers for item in items] == [
        ["integration"], ["integration"], ["slow"], ["slow"], [], [],
    ]  # fmt: skip


def test_scripts_test_fast_selects_the_fast_tier() -> None:
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert f'-m "{tiers.FAST}"' in script


@pytest.mark.slow  # collects the whole suite in a child process
@pytest.mark.timeout(300)
def test_the_fast_tier_starts_no_process_and_loses_no_test(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    env = {**os.environ, tiers.REPORT_ENV: os.fspath(report_file)}
    command = [
        sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:randomly",
        "-p", "no:cacheprovider", "--collect-only", "-q", "-m", tiers.FAST, "tests",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(report_file.read_text(encoding="utf-8"))
    selected = {row["nodeid"]: set(row["fixtures"]) for row in report["selected"]}
    deselected = {row["nodeid"]: set(row["fixtures"]) for row in report["deselected"]}
    assert selected
    assert not selected.keys() & deselected.keys()
    for nodeid, fixtures in selected.items():
        assert not fixtures & tiers.REAL_PROCESS_FIXTURES, f"{nodeid} starts processes"
        assert not nodeid.startswith(REAL_PROCESS_FILES), f"{nodeid} starts processes"
    for path in REAL_PROCESS_FILES:
        assert any(nodeid.startswith(path) for nodeid in deselected), path
    every = selected.keys() | deselected.keys()
    named = {entry for nodeid in every for entry in tiers.entries(nodeid)}
    assert sorted(tiers.SLOW - named) == [], "SLOW names tests that no longer exist"
