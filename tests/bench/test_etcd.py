"""etcd in the benchmarks: the hand-written protobuf, the one-line skips, and (when etcd is
installed) a short run of each side: ``bench peers``' EtcdSystem and ``ledger bench``'s run_etcd."""

from __future__ import annotations

import asyncio
import io
import shutil
from typing import TYPE_CHECKING

import pytest

from benchmarks.peers import etcd_cluster, etcd_log
from benchmarks.peers.etcd_client import (
    client_unavailable,
    decode_fields,
    encode_put,
    encode_range,
    encode_txn_of_puts,
)
from benchmarks.peers.etcd_peer import EtcdSystem, key_prefix
from benchmarks.peers.servers import session_pids
from benchmarks.peers.workloads import WORKLOADS
from ledgermq.bench import ledger
from ledgermq.bench.stats import RunResult, format_table
from ledgermq.errors import BenchmarkError

if TYPE_CHECKING:
    from pathlib import Path

ETCD_MISSING = (
    shutil.which("etcd", path="/usr/bin:/usr/sbin:/usr/local/bin") is None
    or client_unavailable() is not None
)


def test_put_and_txn_are_protobuf_that_reads_back() -> None:
    value = b"v" * 300  # a length that needs a two-byte varint
    put = decode_fields(encode_put(b"key", value))
    assert put == {1: [b"key"], 2: [value]}
    txn = decode_fields(encode_txn_of_puts([(b"a", b"1"), (b"b", b"2")]))
    ops = [decode_fields(op) for op in txn[2]]  # type: ignore[arg-type]
    assert [decode_fields(op[2][0]) for op in ops] == [  # type: ignore[arg-type]
        {1: [b"a"], 2: [b"1"]},
        {1: [b"b"], 2: [b"2"]},
    ]
    assert decode_fields(encode_range(b"a", b"b", 256)) == {1: [b"a"], 2: [b"b"], 3: [256]}


def test_key_prefix_keeps_only_letters_and_digits() -> None:
    assert key_prefix("latency @10k/s") == b"bench/latency10ks/"


def test_not_installed_is_one_line_with_how_to_install(tmp_path: Path) -> None:
    assert EtcdSystem(str(tmp_path)).unavailable() == (
        "etcd: skipped, etcd is not installed (apt-get install etcd-server)"
    )
    assert etcd_cluster.etcd_unavailable("etcd comparison", str(tmp_path)) == (
        "etcd comparison: skipped, etcd is not installed (apt-get install etcd-server)"
    )


def test_missing_grpcio_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "etcd"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(
        etcd_cluster, "client_unavailable", lambda: "grpcio is not installed (pip install grpcio)"
    )
    assert EtcdSystem(str(tmp_path)).unavailable() == (
        "etcd: skipped, grpcio is not installed (pip install grpcio)"
    )


def test_only_sync_workloads_that_fit_a_txn_are_compared() -> None:
    assert etcd_log.applies("sync", 1)
    assert etcd_log.applies("sync", 1024)
    assert not etcd_log.applies("sync", 1025)
    assert not etcd_log.applies("async", 1)
    with pytest.raises(BenchmarkError):
        etcd_log.run_etcd(
            mode="single", clients=1, batch=1, body_bytes=8, duration_s=1.0, flush="async"
        )


def _result(system: str, rate: float) -> RunResult:
    return RunResult(
        system=system, mode="single", clients=1, batch=1, body_bytes=1024, flush="sync",
        entries=int(rate), seconds=1.0, entries_per_s=rate, p50_ms=1.0, p99_ms=2.0, max_ms=2.0,
        errors=0,
    )  # fmt: skip


def test_table_has_a_ratio_column_per_peer() -> None:
    rows = [_result("ledgermq", 600), _result("pysyncobj", 300), _result("etcd", 400)]
    table = format_table(rows, ratios=[("ledgermq", "pysyncobj"), ("ledgermq", "etcd")])
    header, _, ours, *_ = table.splitlines()
    assert header.endswith("ratio ledgermq/pysyncobj  ratio ledgermq/etcd")
    assert ours.endswith("2.00x                1.50x")


def test_ledger_bench_without_etcd_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(etcd_cluster, "etcd_binary", lambda path=None: None)
    out = io.StringIO()
    ledger.run_bench(
        ledger.BenchOptions(
            workloads=[ledger.Workload("single", 1, 1, "sync")],
            duration_s=0.3,
            warmup_s=0.1,
            pysyncobj=False,
            failover_trials=0,
        ),
        out=out,
    )
    text = out.getvalue()
    assert "etcd comparison: skipped, etcd is not installed (apt-get install etcd-server)" in text
    assert "Traceback" not in text
    assert "ratio ledgermq/etcd" not in text


@pytest.mark.skipif(ETCD_MISSING, reason="etcd not installed (apt-get install etcd-server)")
def test_smoke_etcd_peer_rows_and_no_process_left(tmp_path: Path) -> None:
    system = EtcdSystem()
    results = []
    try:
        system.start(tmp_path)
        pids = system.server_pids()
        assert len(pids) == 3
        for name in ("produce batched", "sequential", "consume"):
            workload = next(w for w in WORKLOADS if w.name == name)
            results.append(asyncio.run(system.run(workload, 1.0)))
    finally:
        system.close()
    for result in results:
        assert result is not None
        assert result.entries_per_s > 0, result
        assert result.errors == 0
        assert result.server_cpu_us is not None
    assert results[0] is not None
    assert results[0].batch == 64
    for pid in pids:
        assert session_pids(pid) == []


@pytest.mark.skipif(ETCD_MISSING, reason="etcd not installed (apt-get install etcd-server)")
def test_smoke_ledger_bench_etcd_side(tmp_path: Path) -> None:
    result = etcd_log.run_etcd(
        mode="batched", clients=2, batch=64, body_bytes=1024, duration_s=1.0, flush="sync",
        warmup_s=0.2, workdir=str(tmp_path),
    )  # fmt: skip
    assert result.system == "etcd"
    assert result.entries_per_s > 0
    assert result.entries % 64 == 0
    assert list(tmp_path.iterdir()) == []  # the members' directory is gone
