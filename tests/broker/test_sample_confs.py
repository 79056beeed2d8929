"""RocketMQ's three DLedger sample confs (``conf/broker-n0.conf`` ... ``n2``, unchanged) start
on one host as real ``ledgermq broker`` processes, each serving gRPC on its own port, which its
start-up line prints (issue 25 item 25: every door used to default to 8081, so two of the three
exited with "cannot listen for gRPC on 127.0.0.1:8081").

The samples' ports are fixed (remoting 30911 / 30921 / 30931, ledger 40911 - 40913, gRPC
derived from ``listenPort``); only the store directory is moved to the test's own. When another
process already holds one of those ports the test skips, naming it: it cannot run then.
"""

from __future__ import annotations

import contextlib
import re
import socket
from pathlib import Path

import pytest

from ledgermq.bench.processes import ledgermq_command
from ledgermq.broker.config import BrokerConfig, default_grpc_port
from ledgermq.ledger.config import load_properties
from ledgermq.testing.child_process import ChildProcess, ProcessStartError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CONF = Path(__file__).resolve().parents[2] / "conf"
SAMPLES = [CONF / f"broker-n{i}.conf" for i in range(3)]
_GRPC = re.compile(r"gRPC (\S+):(\d+)\)")


def _busy(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_default_grpc_port_rule() -> None:
    """Unset ``grpcServerPort``: 8081 on RocketMQ's default ``listenPort``, a free port with a
    free remoting port, else the port below ``listenPort``; a set one is kept."""
    base = {"dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0"}
    assert BrokerConfig.from_properties(base).grpc_server_port == 8081
    assert BrokerConfig.from_properties({**base, "listenPort": "10911"}).grpc_server_port == 8081
    assert BrokerConfig.from_properties({**base, "listenPort": "30921"}).grpc_server_port == 30920
    assert BrokerConfig.from_properties({**base, "listenPort": "0"}).grpc_server_port == 0
    assert default_grpc_port(1) == 0
    kept = {**base, "listenPort": "30921", "grpcServerPort": "9000"}
    assert BrokerConfig.from_properties(kept).grpc_server_port == 9000


def test_the_three_dledger_samples_start_on_one_host(tmp_path: Path) -> None:
    configs = [BrokerConfig.from_properties(load_properties(str(p))) for p in SAMPLES]
    ports = {c.listen_port for c in configs} | {c.grpc_server_port for c in configs}
    ports |= {port for _, port in configs[0].dleger_peers.values()}
    if busy := sorted(p for p in ports if _busy(p)):
        pytest.skip(f"ports {busy} of the sample confs are in use by another process")
    children = [
        ChildProcess(f"broker-n{i}", tmp_path / f"n{i}.log", b"Broker RaftNode00 replica")
        for i in range(3)
    ]
    try:
        for i, child in enumerate(children):
            child.spawn(ledgermq_command(
                "broker", "-c", str(SAMPLES[i]), "--store-dir", str(tmp_path / f"node0{i}"),
            ))  # fmt: skip
        grpc = []
        for child in children:
            try:
                child.wait_ready(30)
            except ProcessStartError as exc:
                pytest.fail(f"a sample conf did not start: {exc}")
            match = _GRPC.search(child.ready_line)
            assert match is not None, f"no gRPC port in {child.ready_line!r}"
            grpc.append(int(match.group(2)))
        assert len(set(grpc)) == 3, grpc
        assert grpc == [c.grpc_server_port for c in configs] == [30910, 30920, 30930]
        for child in children:
            assert child.is_running(), child.log_tail()
    finally:
        for child in children:
            with contextlib.suppress(ProcessStartError):
                child.terminate(10)
            child.kill()
