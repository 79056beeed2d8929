"""The quarantine file (``broker.storage.quarantine``): nothing recorded twice, one fsync a pass.

Found in review of issue 25 item 1: once more than ``MAX_KEPT`` items were quarantined, the
oldest were forgotten in memory, and a re-dispatch after a restart recorded them again (a second
line in the file, the metric counting them twice); and each quarantined record cost the event
loop its own fsync, so a run of bad records stalled it.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledgermq.broker.storage import quarantine
from ledgermq.broker.storage.quarantine import QuarantineLog

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _lines(path: Path) -> list[tuple[int, int]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(row["index"], row["record"]) for row in rows]


def test_items_forgotten_in_memory_are_not_recorded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quarantine, "MAX_KEPT", 3)
    path = tmp_path / "quarantine.jsonl"
    log = QuarantineLog(str(path))
    for index in range(1, 6):
        assert log.add(index, -1, "", "bad", 0)
    log.flush()
    assert len(log) == 3
    assert log.total == 5
    # a re-dispatch from an older checkpoint quarantines them again, in log order
    assert not any(log.add(index, -1, "", "bad", 0) for index in range(1, 6))
    log.flush()
    assert _lines(path) == [(i, -1) for i in range(1, 6)]
    assert log.total == 5
    # a restart loads the file and, past MAX_KEPT, still records nothing twice
    again = QuarantineLog(str(path))
    assert not again.add(1, -1, "", "bad", 0)
    assert again.add(6, 0, "T", "bad", 0)
    again.flush()
    assert _lines(path)[-1] == (6, 0)
    assert len(_lines(path)) == 6


def test_lines_reach_the_file_at_flush_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "quarantine.jsonl"
    log = QuarantineLog(str(path))
    syncs: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        syncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for record in range(100):
        log.add(7, record, "T", "bad", 0)
    assert not path.exists()
    log.flush()
    log.flush()  # nothing new: no write, no fsync
    assert len(syncs) == 1
    assert len(_lines(path)) == 100
