"""``ledgermq admin replica-status`` refuses a call that names no replica group before it
connects anywhere. The command against real processes (ready, not ready naming the stopped
voter, caught up after the restart, on the replica's own address, an unknown group) is tested
in tests/broker/test_backup_restore_processes.py, on the way of a restore."""

from __future__ import annotations

import pytest

from ledgermq.cli.main import main


def test_a_command_without_a_group_says_what_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "-n", "127.0.0.1:1", "replica-status", "--ready"]) == 1
    assert "replica-status needs --broker GROUP or --address HOST:PORT" in capsys.readouterr().err


def test_wait_goes_with_ready(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "replica-status", "-b", "broker-a", "--wait", "3"]) == 1
    assert "--wait goes with --ready" in capsys.readouterr().err
