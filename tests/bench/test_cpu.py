"""The /proc CPU reading behind the benchmarks' "us per message" columns."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ledgermq.bench.cpu import CpuMeter, CpuUsage, process_cpu_s
from ledgermq.errors import LedgerMQError


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_process_cpu_s_follows_the_cpu_a_process_burns() -> None:
    before = process_cpu_s(os.getpid())
    _burn(0.3)
    spent = process_cpu_s(os.getpid()) - before
    assert 0.2 <= spent <= 1.0


def test_process_cpu_s_reads_a_command_name_with_spaces_and_parentheses(tmp_path) -> None:
    # field 2 is "(name)" and the name may hold ") ": the fields are counted after the last ")"
    (tmp_path / "42").mkdir()
    line = "42 (a) b (c) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 1 1 1"
    (tmp_path / "42" / "stat").write_text(line)
    assert process_cpu_s(42, proc_root=str(tmp_path)) == pytest.approx(
        300 / os.sysconf("SC_CLK_TCK")
    )


def test_a_process_that_is_gone_is_a_clear_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(LedgerMQError, match=f"process {child.pid}"):
        process_cpu_s(child.pid)


def test_meter_sums_the_servers_and_keeps_the_load_generator_apart() -> None:
    cpu = {1: 10.0, 2: 20.0, 9: 5.0}
    clock = iter([100.0, 102.0])
    meter = CpuMeter([1, 2], [9], clock=lambda: next(clock), reader=lambda pid: cpu[pid])
    meter.start()
    cpu[1] += 0.5
    cpu[2] += 1.5
    cpu[9] += 0.25
    meter.add_client_s(0.25)  # e.g. what a Go loader reported for itself
    usage = meter.stop()
    assert usage == CpuUsage(server_s=2.0, client_s=0.5, wall_s=2.0)
    assert usage.per_message_us(1000) == (2000.0, 500.0)
    assert CpuUsage(1.0, 1.0, 1.0).per_message_us(0) == (None, None)


def test_meter_stop_without_start_is_refused() -> None:
    with pytest.raises(LedgerMQError, match="before start"):
        CpuMeter([os.getpid()]).stop()
