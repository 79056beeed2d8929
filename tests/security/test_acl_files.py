"""ACL files on disk: RocketMQ's places, reload on change, a bad change keeps the ACL in force."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import ConfigError
from ledgermq.security.acl_files import AclFiles, default_acl_paths

if TYPE_CHECKING:
    from pathlib import Path

ALICE = "accounts: [{accessKey: alice-key, secretKey: alice-secret}]\n"
BOB = "accounts: [{accessKey: bobby-key, secretKey: bobby-secret}]\n"


class StepClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_time_s(self) -> float:
        return self.now_ms / 1000


def _write(path: Path, text: str, mtime_ns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_rocketmq_places_both_files_and_the_acl_directory(tmp_path: Path) -> None:
    _write(tmp_path / "conf" / "plain_acl.yml", ALICE, 10**18)
    _write(tmp_path / "conf" / "acl" / "team" / "bob.yml", BOB, 10**18)
    files = AclFiles(default_acl_paths(str(tmp_path)), StepClock())
    assert set(files.current().accounts) == {"alice-key", "bobby-key"}


def test_no_file_is_a_clear_start_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no ACL file at"):
        AclFiles(default_acl_paths(str(tmp_path)), StepClock())


def test_a_bad_file_at_start_is_a_clear_error(tmp_path: Path) -> None:
    _write(tmp_path / "plain_acl.yml", "accounts: [{accessKey: x}]", 10**18)
    with pytest.raises(ConfigError, match="longer than 6"):
        AclFiles([str(tmp_path / "plain_acl.yml")], StepClock())


def test_a_change_is_picked_up_after_the_interval(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    _write(path, ALICE, 10**18)
    clock = StepClock()
    files = AclFiles([str(path)], clock, check_interval_ms=1000)
    _write(path, BOB, 2 * 10**18)
    clock.now_ms = 999
    assert set(files.current().accounts) == {"alice-key"}  # not looked at yet
    clock.now_ms = 1000
    assert set(files.current().accounts) == {"bobby-key"}


def test_a_bad_change_keeps_the_acl_in_force(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain_acl.yml"
    _write(path, ALICE, 10**18)
    clock = StepClock()
    files = AclFiles([str(path)], clock, check_interval_ms=1)
    _write(path, "accounts: [", 2 * 10**18)
    clock.now_ms = 5
    with caplog.at_level(logging.ERROR, "ledgermq.security"):
        assert set(files.current().accounts) == {"alice-key"}
    assert "ACL change not applied" in caplog.text
    _write(path, BOB, 3 * 10**18)  # fixed: applied
    clock.now_ms = 10
    assert set(files.current().accounts) == {"bobby-key"}


def test_every_file_removed_keeps_the_acl(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    _write(path, ALICE, 10**18)
    clock = StepClock()
    files = AclFiles([str(path)], clock, check_interval_ms=1)
    path.unlink()
    clock.now_ms = 5
    assert set(files.current().accounts) == {"alice-key"}
