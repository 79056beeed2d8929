"""The deployment material in deploy/: systemd units that systemd itself accepts, the example
configuration of three machines that the broker accepts, and logs to a rotated file."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from ledgermq.broker.config import BrokerConfig
from ledgermq.cli.main import log_to_directory
from ledgermq.errors import ConfigError
from ledgermq.ledger.config import load_properties
from ledgermq.namesrv import NameServerConfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


def test_the_units_are_there() -> None:
    assert [u.name for u in UNITS] == ["ledgermq-broker@.service", "ledgermq-namesrv.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_systemd_accepts_the_unit(unit: Path, tmp_path: Path) -> None:
    verify = shutil.which("systemd-analyze")
    if verify is None:
        pytest.skip("systemd-analyze is not installed here")
    # The unit names the installed command; point it at this environment's so that systemd
    # can check it is executable (that check is part of verify).
    ledgermq = Path(sys.executable).parent / "ledgermq"
    text = unit.read_text().replace("/opt/ledgermq/venv/bin/ledgermq", str(ledgermq))
    name = unit.name.replace("@.service", "@broker-a-n0.service")
    copy = tmp_path / name
    copy.write_text(text)
    if "@" in unit.name:  # a template is verified through an instance of it
        (tmp_path / unit.name).write_text(text)
    result = subprocess.run(
        [verify, "verify", str(copy)], capture_output=True, text=True, check=False, timeout=60
    )
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        # the machine running the tests has no ledgermq user, network-online target states
        # or the services' directories: about the host, not the unit
        if line.strip() and "ledgermq" in line and "user" not in line.lower()
    ]
    assert result.returncode == 0 or not problems, result.stdout + result.stderr


def test_the_fail_stop_exit_status_is_not_restarted() -> None:
    broker = (DEPLOY / "systemd" / "ledgermq-broker@.service").read_text()
    assert "RestartPreventExitStatus=74" in broker
    assert "Restart=on-failure" in broker


def test_the_three_machine_example_is_a_valid_cluster() -> None:
    configs = {
        path.stem: BrokerConfig.from_properties(load_properties(str(path)))
        for path in sorted((DEPLOY / "conf").glob("broker-*.conf"))
    }
    NameServerConfig.from_properties(load_properties(str(DEPLOY / "conf" / "namesrv.conf")))
    groups: dict[str, list[BrokerConfig]] = defaultdict(list)
    for config in configs.values():
        groups[config.broker_name].append(config)
    assert sorted(groups) == ["broker-a", "broker-b"]
    masters = set()
    for replicas in groups.values():
        assert len(replicas) == 3
        assert len({tuple(sorted(r.dleger_peers.items())) for r in replicas}) == 1
        assert sorted(r.dleger_self_id for r in replicas) == ["n0", "n1", "n2"]
        preferred = {r.preferred_leader_id for r in replicas}
        assert len(preferred) == 1
        (leader,) = preferred
        masters.add(replicas[0].dleger_peers[leader][0])
    assert len(masters) == len(groups)  # each group's master on another machine
    per_machine: dict[str, set[int]] = defaultdict(set)
    for config in configs.values():
        ports = {config.listen_port, config.dleger_peers[config.dleger_self_id][1]}
        assert not per_machine[config.broker_ip1] & ports, "two replicas share a port"
        per_machine[config.broker_ip1] |= ports


def test_logs_go_to_a_rotated_file(tmp_path: Path) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        log_to_directory(str(tmp_path / "logs"), "broker", 1, 2)
        added = [h for h in root.handlers if h not in before]
        assert len(added) == 1
        for _ in range(12_000):  # about 4.4 MiB
            logging.getLogger("ledgermq.test").info("x" * 300)
        files = sorted(p.name for p in (tmp_path / "logs").iterdir())
        assert files == ["broker.log", "broker.log.1", "broker.log.2"]  # 1 MiB each, 2 kept
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()


def test_a_log_directory_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write logs to"):
        log_to_directory(str(blocker / "logs"), "broker", 1, 1)
