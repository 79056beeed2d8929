"""Golden interaction tests (etcd style): ``testdata/*.txt`` hold commands and their traces.

``LEDGERMQ_REWRITE_GOLDEN=1 pytest tests/raft/test_golden.py`` rewrites the expected traces
after a deliberate behaviour change; review the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledgermq.testing.interaction import run_script

TESTDATA = Path(__file__).parent / "testdata"
REWRITE = os.environ.get("LEDGERMQ_REWRITE_GOLDEN") == "1"


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.txt")), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    expected = path.read_text()
    actual = run_script(expected)
    if REWRITE:
        path.write_text(actual)
    assert actual == expected


def test_a_changed_trace_fails() -> None:
    """The comparison is real: a wrong expectation is caught."""
    script = "cluster nodes=1\n----\n     0 n0: LEADER term 7\n"
    assert run_script(script) != script
