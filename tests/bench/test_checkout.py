"""The clone's tools out of the package (issue 26 item 7): ``benchmarks/`` and ``tests/`` are found
beside ``src/`` in a clone, and an installed package says in one line that those commands run
from a clone (``ledgermq.bench.checkout``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledgermq.bench import checkout, ledger, processes
from ledgermq.bench.checkout import CloneOnlyError
from ledgermq.cli.main import main
from ledgermq.testing.chaos.runner import RunOptions, run_chaos

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """This ``ledgermq`` as an installed wheel sees it: no clone around it."""
    monkeypatch.setattr(checkout, "clone_root", lambda: None)
    monkeypatch.setattr(processes, "clone_root", lambda: None)


def test_a_clone_is_found_beside_src() -> None:
    assert checkout.clone_root() == ROOT
    assert checkout.clone_has("benchmarks.peers.run")
    assert checkout.clone_has("tests.chaos.buggy.buggy_broker")
    assert not checkout.clone_has("benchmarks.peers.no_such_module")


def test_children_import_the_clones_modules(tmp_path: Path) -> None:
    """``python -m tests.chaos.buggy.<bug>`` (the chaos brokers) and ``python -m
    benchmarks.peers.pysyncobj_log`` (PySyncObj's nodes) resolve from any directory."""
    code = "import benchmarks.peers.pysyncobj_log, tests.chaos.buggy.poison_broker"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=processes.child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_bench_peers_from_an_installed_package_is_one_line(
    installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "peers", "--systems", "ledgermq", "--rounds", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Peer benchmarks (ledgermq bench peers) run from a clone" in err
    assert "benchmarks/peers/" in err


def test_ledger_bench_from_an_installed_package_measures_ledgermq_alone(
    installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The comparisons' drivers are the clone's: without it, one line and no comparison (the
    LedgerMQ rows are ``run_ledger``'s, not needed to show the choice)."""
    options = ledger.BenchOptions(workloads=[], failover_trials=0)
    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.extend(line for line in text.splitlines() if line)

    ledger.run_bench(options, out=Out())
    clone_lines = [line for line in lines if "clone" in line]
    expected = (
        "The PySyncObj and etcd comparisons run from a clone of the LedgerMQ repository "
        "(benchmarks/peers/ is not part of the installed package): clone it, pip install -e . "
        "there, and run the command again; measuring LedgerMQ alone"
    )
    assert clone_lines == [expected]


@pytest.mark.parametrize(
    ("bug", "faults"), [("ack-before-commit", ("kill9",)), (None, ("kill9", "poison"))]
)
def test_injected_bugs_from_an_installed_package_start_nothing(
    installed: None, tmp_path: Path, bug: str | None, faults: tuple[str, ...]
) -> None:
    options = RunOptions(
        seed=1, duration_s=1, faults=faults, loopback=True, inject_bug=bug, base_dir=str(tmp_path)
    )
    refusal = r"^Injected bugs and the poison fault run from a clone .*\(tests/chaos/buggy/ is not"
    with pytest.raises(CloneOnlyError, match=refusal):
        run_chaos(options, lambda line: None)
    assert list(tmp_path.iterdir()) == []  # no cluster, no logs: refused before anything started
