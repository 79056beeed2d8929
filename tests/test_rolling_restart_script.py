"""deploy/systemd/ledgermq-rolling-restart (issue 27 item 6) with stand-ins for ``ledgermq`` and
``systemctl`` that record what they are asked: the group's readiness before each restart and the
replica's after it, masters last, and a stop (nothing else restarted) at a replica that is not
ready. The commands it runs are the ones tests/cli/test_replica_status_processes.py runs
against real processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "systemd" / "ledgermq-rolling-restart"

FAKE_LEDGERMQ = """#!/usr/bin/env bash
echo "ledgermq $*" >> "$CALLS"
if [[ " $* " == *" --json "* ]]; then
    leader="LEADER_OF_${6//-/_}"
    echo '{'
    echo '  "leader": "'"${!leader}"'",'
    echo '  "ready": true'
    echo '}'
    exit 0
fi
if [[ -n ${NOT_READY:-} && " $* " == *" -b $NOT_READY "* && " $* " != *" --id "* ]]; then
    echo "not ready: $NOT_READY: voter n2 did not answer"
    exit 1
fi
echo "ready"
"""

FAKE_SYSTEMCTL = """#!/usr/bin/env bash
echo "systemctl $*" >> "$CALLS"
"""


def _setup(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("ledgermq", FAKE_LEDGERMQ), ("systemctl", FAKE_SYSTEMCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    conf = tmp_path / "conf"
    conf.mkdir()
    for group in ("broker-a", "broker-b"):
        (conf / f"{group}-n0.conf").write_text(
            f"brokerName={group}\nnamesrvAddr=10.0.0.1:9876;10.0.0.2:9876\ndLegerSelfId=n0\n"
        )
    return {
        **os.environ,
        "LEDGERMQ": str(bin_dir / "ledgermq"),
        "SYSTEMCTL": str(bin_dir / "systemctl"),
        "CONF_DIR": str(conf),
        "WAIT_S": "5",
        "CALLS": str(tmp_path / "calls"),
        "LEADER_OF_broker_a": "n0",  # this machine's replica leads broker-a
        "LEADER_OF_broker_b": "n1",
    }


def _run(env: dict[str, str], *instances: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *instances],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_followers_first_each_between_two_readiness_checks(tmp_path: Path) -> None:
    env = _setup(tmp_path)
    done = _run(env, "broker-a-n0", "broker-b-n0")
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [c for c in Path(env["CALLS"]).read_text().splitlines() if "--json" not in c]
    ns = "10.0.0.1:9876;10.0.0.2:9876"
    assert calls == [
        f"ledgermq admin -n {ns} replica-status -b broker-b --ready --wait 5",
        "systemctl restart ledgermq-broker@broker-b-n0",
        f"ledgermq admin -n {ns} replica-status -b broker-b --id n0 --ready --wait 5",
        f"ledgermq admin -n {ns} replica-status -b broker-a --ready --wait 5",
        "systemctl restart ledgermq-broker@broker-a-n0",
        f"ledgermq admin -n {ns} replica-status -b broker-a --id n0 --ready --wait 5",
    ]


def test_a_group_that_cannot_lose_a_replica_stops_the_roll(tmp_path: Path) -> None:
    env = _setup(tmp_path) | {"NOT_READY": "broker-b"}
    done = _run(env, "broker-a-n0", "broker-b-n0")
    assert done.returncode == 1
    assert "broker-b cannot lose a replica now: broker-b-n0 was NOT restarted" in done.stderr
    assert "systemctl" not in Path(env["CALLS"]).read_text()


def test_an_unknown_instance_is_named(tmp_path: Path) -> None:
    done = _run(_setup(tmp_path), "broker-z-n9")
    assert done.returncode == 1
    assert "broker-z-n9: no readable" in done.stderr
