"""PySyncObj as a 3-node replicated log: one short real run, and argument checks."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

pytest.importorskip("pysyncobj")

from benchmarks.peers.pysyncobj_log import SYSTEM, main, run_pysyncobj


def _children() -> set[int]:
    """PIDs of this process's live (not zombie) children, from /proc."""
    me = str(os.getpid())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, parent = fields[0], fields[1]
        if parent == me and state != "Z":
            found.add(int(entry))
    return found


@pytest.mark.timeout(60)
def test_short_run_measures_and_leaves_no_process(tmp_path: Path) -> None:
    before = _children()
    result = run_pysyncobj(
        mode="append",
        clients=4,
        batch=1,
        body_bytes=256,
        duration_s=1.5,
        flush="async",
        workdir=str(tmp_path),
        warmup_s=0.5,
    )
    assert result.system == SYSTEM
    assert (result.clients, result.batch, result.body_bytes, result.flush) == (4, 1, 256, "async")
    assert result.entries > 0
    assert result.entries_per_s == pytest.approx(result.entries / 1.5)
    assert 0 < result.p50_ms <= result.p99_ms <= result.max_ms
    assert "leader" in result.note
    assert _children() <= before  # both node processes were killed and reaped
    assert list(tmp_path.iterdir()) == []  # the journals were deleted


def test_bad_arguments_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flush"):
        run_pysyncobj(
            mode="m", clients=1, batch=1, body_bytes=1, duration_s=1, flush="x",
            workdir=str(tmp_path),
        )  # fmt: skip
    with pytest.raises(ConfigError, match="clients"):
        run_pysyncobj(
            mode="m", clients=0, batch=1, body_bytes=1, duration_s=1, flush="sync",
            workdir=str(tmp_path),
        )  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_cli_rejects_unknown_flush() -> None:
    with pytest.raises(SystemExit):
        main(["run", "--flush", "fast"])
