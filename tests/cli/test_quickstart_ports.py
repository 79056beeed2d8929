"""``quickstart --port-offset`` keeps every port within 1..65535, and a port in use names the
server it was for and the flag that moves the ports (issue 13, item 14)."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import free_ports
from ledgermq.cli import quickstart
from ledgermq.cli.main import main
from tests.test_cli import _free_port_offset

if TYPE_CHECKING:
    from pathlib import Path


def test_the_offset_range_is_the_one_that_keeps_every_port_valid() -> None:
    low, high = quickstart.MIN_PORT_OFFSET, quickstart.MAX_PORT_OFFSET
    assert (low, high) == (1 - 5557, 65535 - 40913)  # the first metrics port is the lowest
    assert quickstart.port_offset(str(high)) == high
    assert quickstart.port_offset(str(low)) == low


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        ("30000", "30000 would move the ports (5557..40913) to 35557..70913, outside 1..65535"),
        ("24623", "outside 1..65535; use an offset between -5556 and 24622"),
        ("-5557", "to 0..35356, outside 1..65535"),
        ("ten", "argument --port-offset: 'ten' is not an integer"),
    ],
)
def test_an_offset_that_would_leave_the_port_range_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], offset: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["quickstart", "--dir", str(tmp_path), "--port-offset", offset, "--run-for", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not any(tmp_path.iterdir())  # refused before anything started


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("taken", "owner"),
    [(9876, "the NameServer's port"), (40912, "the ledger port of broker-a n1")],
)
def test_a_port_in_use_names_its_server_and_the_flag_that_moves_the_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], taken: int, owner: str
) -> None:
    offset = _free_port_offset()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", taken + offset))
        blocker.listen()
        args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset)]
        assert main([*args, "--run-for", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ledgermq: error: cannot listen on 127.0.0.1:{taken + offset}: ")
    assert f"address already in use ({owner})" in err
    assert f"move every quickstart port with --port-offset N (now {offset})" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("taken", ["remoting", "ledger"])
def test_a_broker_port_in_use_names_the_flag_that_moves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], taken: str
) -> None:
    remoting, ledger = free_ports(2)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", remoting if taken == "remoting" else ledger))
        blocker.listen()
        code = main(  # gRPC on a free port: by default it is derived from listenPort, a port
            # another process of the machine may hold (then the error names grpcServerPort)
            ["broker", "--listen-port", str(remoting), "--self-id", "n0",
             "--peers", f"n0-127.0.0.1:{ledger}", "--store-dir", str(tmp_path),
             "--namesrv-addr", "127.0.0.1:9", "--set", "grpcServerPort=0"]
        )  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "address already in use; another process uses it: stop it, or " in err
    if taken == "remoting":
        assert "choose another remoting port with --listen-port (listenPort)" in err
    else:
        assert "give this replica another ledger port in --peers (dLegerPeers)" in err
    assert "Traceback" not in err


@pytest.mark.timeout(60)
def test_a_metrics_port_in_use_leaves_the_metrics_out_not_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28 item 2: like the console, the metrics ports are not what the quickstart is for:
    a taken one (a RocketMQ exporter on 5557?) is one line naming the flags, not a failed start."""
    offset = _free_port_offset()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", quickstart.METRICS_PORTS[1] + offset))
        blocker.listen()
        args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset), "--no-console"]
        assert main([*args, "--run-for", "0"]) == 0
    out = capsys.readouterr().out
    assert (
        "Metrics         not served: cannot serve /metrics on "
        f"127.0.0.1:{quickstart.METRICS_PORTS[1] + offset}: address already in use "
        "(--port-offset moves it; --no-metrics leaves them out)"
    ) in out
    assert "self-check: 100 messages sent" in out


@pytest.mark.timeout(60)
def test_a_console_port_in_use_leaves_the_console_out_not_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The brokers are what the quickstart is for: a taken console port is one line, not a
    failed start."""
    pytest.importorskip("uvicorn", reason="the console extra is not installed")
    offset = _free_port_offset()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", quickstart.CONSOLE_PORT + offset))
        blocker.listen()
        args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset)]
        assert main([*args, "--run-for", "0"]) == 0
    out = capsys.readouterr().out
    assert (
        f"Console         not started: the console cannot listen on 127.0.0.1:{8080 + offset}"
        in out
    )
    assert "--no-console leaves it out" in out
    assert "self-check: 100 messages sent" in out
