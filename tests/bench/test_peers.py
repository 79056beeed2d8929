"""``ledgermq bench peers``: skipping what is not installed, the table and JSON, process cleanup,
and smoke runs (LedgerMQ always; NATS when it is installed on the machine)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from benchmarks.peers import run as peers_run
from benchmarks.peers.nats_peer import NatsSystem, build_go_loader
from benchmarks.peers.report import SystemInfo, format_peers_table, summarize, write_json
from benchmarks.peers.servers import (
    INSTALL_HINT,
    PeerUnavailableError,
    ServerProcess,
    session_pids,
)
from benchmarks.peers.workloads import WORKLOADS
from ledgermq.bench.stats import RunResult

if TYPE_CHECKING:
    from pathlib import Path

SYSTEMS = [
    SystemInfo("LedgerMQ ASYNC_FLUSH", "ours", "majority in memory", None),
    SystemInfo("NATS", "nats-py", "stored on a majority", "LedgerMQ ASYNC_FLUSH"),
]


def _row(system: str, mode: str, rate: float, p99: float = 2.0, cpu: float = 40.0) -> RunResult:
    return RunResult(
        system=system, mode=mode, clients=4, batch=64, body_bytes=1024, flush="",
        entries=int(rate), seconds=1.0, entries_per_s=rate, p50_ms=1.0, p99_ms=p99,
        max_ms=p99, errors=0, server_cpu_us=cpu, client_cpu_us=cpu / 8,
    )  # fmt: skip


def test_no_peer_installed_is_one_line_each_and_no_traceback(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    code = peers_run.main(
        ["--systems", "nats-go", "nats-py", "--peer-path", str(empty), "--rounds", "1",
         "--results-dir", str(tmp_path / "results")]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0
    assert "Traceback" not in out.out + out.err
    skip_lines = [line for line in out.out.splitlines() if "skipped" in line]
    assert skip_lines[0] == (
        f"NATS JetStream: skipped, nats-server is not installed ({INSTALL_HINT})"
    )
    assert f"no peer ran: install them with `{INSTALL_HINT}`" in out.out
    document = json.loads((tmp_path / "results" / "peers.json").read_text())
    assert document["summary"] == []
    assert any("nats-server is not installed" in line for line in document["skipped"])


def test_rabbitmq_and_etcd_not_installed_are_one_line_each(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    code = peers_run.main(
        ["--systems", "rabbitmq", "etcd", "--peer-path", str(empty), "--rounds", "1",
         "--results-dir", str(tmp_path / "results")]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0
    assert "Traceback" not in out.out + out.err
    assert [line for line in out.out.splitlines() if ": skipped, " in line] == [
        (
            "RabbitMQ quorum: skipped, rabbitmq-server is not installed "
            "(apt-get install rabbitmq-server)"
        ),
        "etcd: skipped, etcd is not installed (apt-get install etcd-server)",
    ] * 2  # as it happens, then under the table
    assert f"no peer ran: install them with `{INSTALL_HINT}`" in out.out


def test_systems_run_in_order_and_sync_consumes_only_beside_its_peers() -> None:
    systems = peers_run.build_systems(list(peers_run.SYSTEM_NAMES), None)
    assert [s.key for s in systems] == [
        "LedgerMQ ASYNC_FLUSH",
        "NATS JetStream R3 (go)",
        "NATS JetStream R3 (nats-py)",
        "LedgerMQ SYNC_FLUSH",
        "RabbitMQ quorum (aio-pika)",
        "etcd",
    ]
    assert [s.baseline for s in systems[4:]] == ["LedgerMQ SYNC_FLUSH"] * 2
    sync, rabbit = systems[3], systems[4]
    assert peers_run._applies(sync, "consume", [sync, rabbit])
    assert not peers_run._applies(sync, "consume", [systems[0], sync])
    assert peers_run._applies(sync, "sequential", [sync])
    assert peers_run._applies(rabbit, "consume", [sync, rabbit])


def test_go_loader_without_a_go_toolchain_is_skipped_with_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(PeerUnavailableError, match="apt-get install golang-go"):
        build_go_loader(tmp_path, path=str(tmp_path))


def test_summary_takes_medians_and_ratios_against_the_baseline(tmp_path: Path) -> None:
    results = [
        _row("LedgerMQ ASYNC_FLUSH", "produce batched", 30_000),
        _row("LedgerMQ ASYNC_FLUSH", "produce batched", 40_000),
        _row("LedgerMQ ASYNC_FLUSH", "produce batched", 50_000),
        _row("NATS", "produce batched", 20_000),
        _row("LedgerMQ ASYNC_FLUSH", "latency @10k/s", 10_000, p99=3.0),
        _row("NATS", "latency @10k/s", 10_000, p99=12.0),
        _row("LedgerMQ ASYNC_FLUSH", "consume", 200_000, cpu=2.0),
        _row("NATS", "consume", 100_000, cpu=11.0),
    ]
    rows = summarize(results, SYSTEMS)
    assert [(r.workload, r.system) for r in rows] == [
        ("produce batched", "LedgerMQ ASYNC_FLUSH"),
        ("produce batched", "NATS"),
        ("latency @10k/s", "LedgerMQ ASYNC_FLUSH"),
        ("latency @10k/s", "NATS"),
        ("consume", "LedgerMQ ASYNC_FLUSH"),
        ("consume", "NATS"),
    ]
    assert rows[0].msgs_per_s == 40_000  # median of three rounds
    assert rows[0].rounds == 3
    assert rows[0].ratio is None
    assert rows[1].ratio == pytest.approx(2.0)
    assert rows[3].ratio == pytest.approx(0.25)  # latency: LedgerMQ p99 / peer p99
    assert rows[5].p99_ms is None  # no per-send latency for consume
    table = format_peers_table(rows, SYSTEMS, ["RabbitMQ: skipped, not installed"])
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["workload", "system", "client", "msgs/s"]
    assert "server us/msg" in lines[0]
    assert "LedgerMQ/peer" in lines[0]
    nats_batched = lines[3]
    assert "20,000" in nats_batched
    assert "2.00x" in nats_batched
    assert nats_batched.endswith("stored on a majority")
    assert "0.25x p99" in lines[5]
    assert lines[-1] == "RabbitMQ: skipped, not installed"
    write_json(tmp_path / "p.json", {"rounds": 3}, SYSTEMS, list(enumerate(results)), rows, [])
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["meta"] == {"rounds": 3}
    assert document["systems"][1]["baseline"] == "LedgerMQ ASYNC_FLUSH"
    assert document["summary"][1]["ratio"] == pytest.approx(2.0)
    assert RunResult.from_json(document["runs"][3]) == results[3]
    assert document["runs"][3]["round"] == 3


def test_killing_a_server_kills_what_it_forked(tmp_path: Path) -> None:
    server = ServerProcess("forks", tmp_path / "forks.log")
    server.spawn(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    deadline = time.monotonic() + 5
    while len(server.pids()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.pids()) == 3  # the shell and its two children
    server.kill()
    assert session_pids(server.pid) == []
    assert not server.is_running()


def test_smoke_ledgermq_only_with_cpu_columns(tmp_path: Path, capsys) -> None:
    code = peers_run.main(
        ["--systems", "ledgermq", "--workloads", "sequential", "--duration", "0.5",
         "--rounds", "1", "--results-dir", str(tmp_path)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    document = json.loads((tmp_path / "peers.json").read_text())
    rows = {row["system"]: row for row in document["summary"]}
    assert set(rows) == {"LedgerMQ ASYNC_FLUSH", "LedgerMQ SYNC_FLUSH"}
    for row in rows.values():
        assert row["workload"] == "sequential"
        assert row["msgs_per_s"] > 0
        assert row["server_cpu_us"] > 0
        assert row["client_cpu_us"] > 0
    assert "sequential  LedgerMQ ASYNC_FLUSH" in out
    assert not list(tmp_path.glob("ledgermq-peers-*"))


@pytest.mark.skipif(
    shutil.which("nats-server", path="/usr/sbin:/usr/local/sbin:/usr/bin") is None
    or importlib.util.find_spec("nats") is None,
    reason="NATS not installed (apt-get install nats-server; pip install nats-py)",
)
def test_smoke_nats_sequential(tmp_path: Path) -> None:
    system = NatsSystem("nats-py")
    try:
        system.start(tmp_path)
        pids = system.server_pids()
        assert len(pids) == 3
        workload = next(w for w in WORKLOADS if w.name == "sequential")
        result = asyncio.run(system.run(workload, 0.5))
    finally:
        system.close()
    assert result is not None
    assert result.entries > 0
    assert result.server_cpu_us is not None
    assert subprocess.run(["ps", "-p", str(pids[0])], check=False).returncode != 0
