"""``ledgermq admin topic-create -a``: a malformed or unsupported attribute change is refused by
the command line itself (exit 2, the reason on stderr), before any broker is asked."""

from __future__ import annotations

import subprocess

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("+message.type=ORDERED", "message.type may be DELAY, FIFO, MIXED, NORMAL, TRANSACTION"),
        ("message.type=FIFO", "'+key=value' or '-key'"),
        ("+queue.type=BatchCQ", "unsupported topic attribute 'queue.type'"),
    ],
)
def test_bad_attribute_changes_are_refused_before_any_request(change: str, reason: str) -> None:
    done = subprocess.run(
        ledgermq_command("admin", "-n", "127.0.0.1:1", "topic-create", "-t", "T", "-a", change),
        env=child_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr
