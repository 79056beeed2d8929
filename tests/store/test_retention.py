"""Retention: DLedger's time and disk-pressure rules, never deleting uncommitted data."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ledgermq.errors import ConfigError, DiskFullError, IndexCompactedError
from ledgermq.store import LedgerStore, RetentionConfig
from ledgermq.store.entry_format import HEADER_SIZE
from ledgermq.store.retention import segments_to_delete

from .conftest import open_file_store

HOUR = 3600.0


def local_time_at(hour: int) -> float:
    """A wall-clock time (seconds) whose local hour is ``hour``."""
    now = time.localtime()
    return time.mktime((now.tm_year, now.tm_mon, now.tm_mday, hour, 30, 0, 0, 0, -1))


class FakeClock:
    def __init__(self, wall_s: float) -> None:
        self.wall_s = wall_s
        self.mono_ms = 0

    def monotonic_ms(self) -> int:
        return self.mono_ms

    def wall_time_s(self) -> float:
        return self.wall_s


CONFIG = RetentionConfig(file_reserved_hours=72, delete_when="04")
AT_4AM = local_time_at(4)
AT_NOON = local_time_at(12)


def test_nothing_happens_outside_delete_when_on_a_roomy_disk() -> None:
    old = [AT_NOON - 100 * HOUR] * 5
    assert segments_to_delete(old, 4, AT_NOON, 0.10, CONFIG) == 0


def test_expired_segments_go_at_delete_when() -> None:
    mtimes = [AT_4AM - 100 * HOUR, AT_4AM - 80 * HOUR, AT_4AM - 10 * HOUR, AT_4AM - 90 * HOUR]
    # oldest first; stops at the first unexpired one even though a later one is old (no holes)
    assert segments_to_delete(mtimes, 4, AT_4AM, 0.10, CONFIG) == 2


def test_above_check_ratio_expired_segments_go_at_any_hour() -> None:
    mtimes = [AT_NOON - 100 * HOUR] * 3
    assert segments_to_delete(mtimes, 3, AT_NOON, 0.75, CONFIG) == 3


def test_above_force_ratio_age_does_not_matter_but_eligibility_does() -> None:
    fresh = [AT_NOON - 1.0] * 20
    assert segments_to_delete(fresh, 20, AT_NOON, 0.80, CONFIG) == 0
    assert segments_to_delete(fresh, 20, AT_NOON, 0.86, CONFIG) == 10  # at most 10 per pass
    assert segments_to_delete(fresh, 3, AT_NOON, 0.86, CONFIG) == 3
    no_force = RetentionConfig(enable_force_clean=False)
    assert segments_to_delete(fresh, 3, AT_NOON, 0.86, no_force) == 0


def test_config_floors_and_validation() -> None:
    assert RetentionConfig(file_reserved_hours=0.1).reserved_seconds == HOUR
    assert RetentionConfig(disk_ratio_force_clean=0.3).force_clean_ratio == 0.5
    assert RetentionConfig().disk_full_ratio == pytest.approx(0.90)
    assert RetentionConfig(delete_when="01;13; 23").delete_hours() == {1, 13, 23}
    with pytest.raises(ConfigError, match="deleteWhen"):
        RetentionConfig(delete_when="4am")
    with pytest.raises(ConfigError):
        RetentionConfig(disk_ratio_check_expired=1.5)


def open_with(path: Path, clock: FakeClock, usage: list[float]) -> LedgerStore:
    return open_file_store(path, retention=CONFIG, clock=clock, disk_usage=lambda _path: usage[0])


def fill(store: LedgerStore, count: int) -> None:
    store.append_batch(1, [b"x" * (1000 - HEADER_SIZE)] * count)  # four per 4 KiB segment


def age_segments(path: Path, seconds_ago: float, now: float) -> None:
    for file in (path / "data").iterdir():
        os.utime(file, (now - seconds_ago, now - seconds_ago))


def test_store_deletes_expired_committed_segments(tmp_path: Path) -> None:
    clock = FakeClock(AT_4AM)
    usage = [0.10]
    with open_with(tmp_path, clock, usage) as store:
        fill(store, 20)  # segments: 0-3, 4-7, 8-11, 12-15, 16-19
        store.set_committed_index(13)
        age_segments(tmp_path, 100 * HOUR, clock.wall_s)
        assert store.apply_retention() == 3  # 0-3, 4-7, 8-11; 12-15 still has uncommitted 14
        assert store.begin_index == 12
        with pytest.raises(IndexCompactedError):
            store.get(11)
        assert store.get(12).index == 12
    with open_with(tmp_path, clock, usage) as store:  # survives a restart
        assert (store.begin_index, store.end_index) == (12, 19)
        assert store.committed_index >= 12


def test_store_keeps_young_segments_and_respects_the_hour(tmp_path: Path) -> None:
    clock = FakeClock(AT_NOON)
    usage = [0.10]
    with open_with(tmp_path, clock, usage) as store:
        fill(store, 20)
        store.set_committed_index(19)
        age_segments(tmp_path, 100 * HOUR, clock.wall_s)
        assert store.apply_retention() == 0  # not 4 am, disk roomy
        usage[0] = 0.75
        assert store.apply_retention() == 4  # never the last segment
        assert store.begin_index == 16


def test_force_clean_never_touches_uncommitted_data(tmp_path: Path) -> None:
    clock = FakeClock(AT_NOON)
    usage = [0.88]
    with open_with(tmp_path, clock, usage) as store:
        fill(store, 20)
        store.set_committed_index(5)
        assert store.apply_retention() == 1  # only 0-3 is wholly committed (and 4 is kept)
        assert store.begin_index == 4
        assert store.apply_retention() == 0


def test_disk_full_ratio_refuses_appends_until_space_returns(tmp_path: Path) -> None:
    clock = FakeClock(AT_NOON)
    usage = [0.95]
    with open_with(tmp_path, clock, usage) as store:
        fill(store, 2)
        store.apply_retention()
        assert store.disk_full
        with pytest.raises(DiskFullError, match="diskFullRatio"):
            store.append(1, b"x")
        assert store.end_index == 1
        usage[0] = 0.5
        store.apply_retention()
        assert store.append(1, b"x").index == 2


def test_background_thread_runs_retention(tmp_path: Path) -> None:
    clock = FakeClock(AT_NOON)
    usage = [0.95]
    store = LedgerStore.open(
        tmp_path,
        data_segment_bytes=4096,
        index_segment_entries=16,
        clock=clock,
        disk_usage=lambda _p: usage[0],
        clean_interval_ms=1,
    )
    try:
        deadline = time.monotonic() + 10
        while not store.disk_full and time.monotonic() < deadline:
            clock.mono_ms += 10
            time.sleep(0.01)
        assert store.disk_full
    finally:
        store.close()
