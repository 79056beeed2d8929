"""Benchmark accounting: percentiles on known data, the table, JSON, the progress bar."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.stats import LatencyRecorder, Progress, RunResult, format_table, write_json

if TYPE_CHECKING:
    from pathlib import Path


def _result(system: str, entries_per_s: float, **overrides: object) -> RunResult:
    fields: dict[str, object] = {
        "system": system,
        "mode": "append",
        "clients": 16,
        "batch": 64,
        "body_bytes": 1024,
        "flush": "sync",
        "entries": 1_234_567,
        "seconds": 5.0,
        "entries_per_s": entries_per_s,
        "p50_ms": 1.5,
        "p99_ms": 12.25,
        "max_ms": 40.0,
        "errors": 0,
    }
    fields.update(overrides)
    return RunResult(**fields)  # type: ignore[arg-type]


def test_percentiles_by_nearest_rank_in_ms() -> None:
    recorder = LatencyRecorder(expected=4)  # grows past the reservation
    for ms in range(100, 0, -1):  # 1..100 ms, recorded out of order
        recorder.record(ms / 1000)
    assert len(recorder) == 100
    assert recorder.percentile(50) == pytest.approx(50.0)
    assert recorder.percentile(99) == pytest.approx(99.0)
    assert recorder.percentile(100) == pytest.approx(100.0)
    assert recorder.max_ms() == pytest.approx(100.0)
    small = LatencyRecorder()
    for seconds in (0.001, 0.002, 0.003, 0.004):
        small.record(seconds)
    assert small.percentile(50) == pytest.approx(2.0)  # an observed sample, not 2.5
    assert small.percentile(99) == pytest.approx(4.0)


def test_empty_recorder_and_bad_percentile() -> None:
    recorder = LatencyRecorder()
    assert recorder.percentile(50) == 0.0
    assert recorder.max_ms() == 0.0
    with pytest.raises(ValueError, match="percentile"):
        recorder.percentile(0)


def test_table_aligns_columns_with_thousands_separators() -> None:
    table = format_table([_result("ledgermq", 250_000.0), _result("pysyncobj", 5_000.0)])
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["system", "mode", "flush"]
    assert set(lines[1]) <= {"-", " "}
    assert "1,234,567" in lines[2]
    assert "250,000" in lines[2]
    assert "ratio" not in table
    # Every row has the same length up to its last column: right-aligned numbers line up.
    assert lines[2].index("1,234,567") == lines[3].index("1,234,567")


def test_table_ratio_pairs_rows_of_the_same_workload() -> None:
    results = [
        _result("ledgermq", 250_000.0),
        _result("pysyncobj", 5_000.0),
        _result("ledgermq", 9_000.0, flush="async"),  # no pysyncobj row for async
    ]
    lines = format_table(results, ratio=("ledgermq", "pysyncobj")).splitlines()
    assert lines[0].rstrip().endswith("ratio ledgermq/pysyncobj")
    assert lines[2].endswith("50.00x")
    assert not lines[3].endswith("x")
    assert not lines[4].endswith("x")


def test_table_lists_notes_under_it() -> None:
    rows = [_result("pysyncobj", 1.0, note="journal msynced", clients=c) for c in (1, 16)]
    lines = format_table(rows).splitlines()
    assert lines[-1] == "pysyncobj append: journal msynced"
    assert lines[-2] == ""  # shared notes are listed once


def test_json_round_trip(tmp_path: Path) -> None:
    results = [_result("ledgermq", 250_000.5), _result("pysyncobj", 5_000.0, note="n")]
    path = tmp_path / "out.json"
    write_json(str(path), results, {"cpus": 2})
    document = json.loads(path.read_text())
    assert document["meta"] == {"cpus": 2}
    assert [RunResult.from_json(row) for row in document["results"]] == results


def test_progress_is_silent_when_not_a_tty() -> None:
    stream = io.StringIO()  # isatty() is False
    progress = Progress(stream=stream)
    assert not progress.enabled
    progress.update("append", 1.0, 5.0, 1000)
    progress.finish()
    assert stream.getvalue() == ""


def test_forced_progress_redraws_at_most_five_times_a_second() -> None:
    stream = io.StringIO()
    now = [100.0]
    progress = Progress(stream=stream, force=True, clock=lambda: now[0])
    progress.update("append", 1.0, 5.0, 2000)
    now[0] += 0.1
    progress.update("append", 1.1, 5.0, 2100)  # too soon: skipped
    now[0] += 0.15
    progress.update("append", 1.25, 5.0, 2500)
    text = stream.getvalue()
    assert text.count("\r") == 2
    assert "2,000 entries" in text
    assert "2,100" not in text
    assert "2,000 entries/s" in text  # rate = entries / elapsed
    assert "1.2/5.0 s" in text
    progress.finish()
    assert stream.getvalue().endswith("\r")


def test_table_shows_cpu_per_message_only_when_measured() -> None:
    assert "us/msg" not in format_table([_result("ledgermq", 1.0)])
    rows = [
        _result("ledgermq", 1.0, server_cpu_us=41.04, client_cpu_us=5.6),
        _result("ledgermq", 1.0, mode="consume"),  # not measured: blank cells
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split()[-4:] == ["server", "us/msg", "loadgen", "us/msg"]
    assert lines[2].split()[-2:] == ["41.0", "5.6"]
    assert lines[3].split()[-1] == "0"  # the errors column ends the row
    row = RunResult.from_json(rows[0].to_json())
    assert (row.server_cpu_us, row.client_cpu_us) == (41.04, 5.6)
