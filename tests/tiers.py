"""The test suite's tiers: which tests the fast tier (``scripts/test --fast``) leaves to CI.

The fast tier is ``-m "not (slow or integration or interop or chaos or spark)"``: unit, rule
and in-process tests: 149-184 s on two cores at load average 9-10 (2026-11-29).
``tests/conftest.py`` applies two rules at collection, so that tests need not be marked by
hand, file by file:

- a test that uses a fixture starting real processes (``REAL_PROCESS_FIXTURES``) is
  ``integration``, wherever it lives;
- a test named in ``tests/slow_tests.txt`` (measured at more than a second, or half a second
  in a run of the whole fast tier, on the 2-core machine under load: property tests with
  many examples, model checks, simulations, C-against-Python references, in-process
  clusters that wait in real time, commands run as processes) is ``slow``.

A line of ``slow_tests.txt`` is a test file (every test in it) or a test (every parametrisation
of it), as a node id from the repository root, then ``#`` and the seconds measured.
``tests/test_tiers.py`` checks that every line still names a test and that the fast tier starts
no process. Measure again with
``python -m pytest --durations=0 -q -p no:randomly -m "not (slow or ...)" <dir>``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterable

FAST = "not (slow or integration or interop or chaos or spark)"
"""The marker expression of the fast tier."""

REAL_PROCESS_FIXTURES = frozenset({"replica_groups", "broker_clusters"})
"""Fixtures of ``tests/conftest.py`` that start replicas, NameServers or brokers as processes."""

SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def _read_slow(path: Path) -> frozenset[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return frozenset(line for line in lines if line)


SLOW = _read_slow(SLOW_LIST)
"""Node ids (files or tests) of the slow tests that carry no marker of their own."""


def entries(nodeid: str) -> Iterable[str]:
    """The ``SLOW`` entries that could name ``nodeid``: its file and its test without the
    parameters (``tests/x.py::test_y[1]`` -> ``tests/x.py``, ``tests/x.py::test_y``)."""
    path, _, rest = nodeid.partition("::")
    yield path
    if rest:
        yield f"{path}::{rest.split('[', 1)[0]}"


def apply(items: Iterable[pytest.Item]) -> set[str]:
    """Mark ``items`` by the two rules; returns the ``SLOW`` entries that named some item."""
    used: set[str] = set()
    for item in items:
        if REAL_PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        for entry in entries(item.nodeid):
            if entry in SLOW:
                item.add_marker(pytest.mark.slow)
                used.add(entry)
    return used


# ---------------------------------------------------------------- the selection, for its test
# ``python -m pytest -p tests.tiers --collect-only -m ...`` with ``LEDGERMQ_TIER_REPORT=<file>``
# writes what the run selected and deselected, with each test's fixtures (tests/test_tiers.py).

REPORT_ENV = "LEDGERMQ_TIER_REPORT"
_deselected: list[pytest.Item] = []


def _row(item: pytest.Item) -> dict[str, object]:
    return {"nodeid": item.nodeid, "fixtures": sorted(getattr(item, "fixturenames", ()))}


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get(REPORT_ENV)
    if target:
        report = {
            "selected": [_row(item) for item in session.items],
            "deselected": [_row(item) for item in _deselected],
        }
        Path(target).write_text(json.dumps(report), encoding="utf-8")
