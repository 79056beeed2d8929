"""``ledgermq namesrv``: a real process on a free port, its announcement line, its shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import IO

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledgermq.cli.main import main
from ledgermq.errors import ConfigError
from ledgermq.ledger.config import load_properties
from ledgermq.namesrv import NameServerConfig
from ledgermq.net import TcpNetwork
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.route import TopicList

pytestmark = pytest.mark.timeout(20)

SRC = Path(__file__).resolve().parents[2] / "src"


def read_line(stream: IO[str] | None, timeout_s: float) -> str:
    """One line from a child's stdout, or AssertionError after ``timeout_s``."""
    lines: list[str] = []
    assert stream is not None
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert lines, f"no line within {timeout_s} s"
    return lines[0]


async def topic_list(port: int) -> RemotingCommand:
    conn = await TcpNetwork().connect("127.0.0.1", port, lambda c, m: None, timeout_s=2)
    try:
        request = RemotingCommand(MQRequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 0)
        return await conn.request(request, timeout_s=2)
    finally:
        conn.close()
        await conn.wait_closed()


def test_namesrv_process_announces_its_port_serves_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    process = subprocess.Popen(
        [sys.executable, "-m", "ledgermq", "namesrv", "--listen-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = read_line(process.stdout, timeout_s=10)
        match = re.fullmatch(r"NameServer listening on 127\.0\.0\.1:(\d+)\n", line)
        assert match, line
        answer = asyncio.run(topic_list(int(match.group(1))))
        assert answer.code == MQResponseCode.SUCCESS
        assert TopicList.from_json(answer.body).topics == ()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_namesrv_serves_the_process_metrics_when_asked() -> None:
    """Issue 28 item 2: ``--metrics-port`` serves /metrics with the process collectors."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "ledgermq", "namesrv", "--listen-port", "0"]
    process = subprocess.Popen(
        [*command, "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = read_line(process.stdout, timeout_s=10)
        match = re.fullmatch(
            r"NameServer listening on 127\.0\.0\.1:\d+ \(metrics (http://127\.0\.0\.1:\d+/metrics)\)\n",
            line,
        )
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=5) as response:
            text = response.read().decode()
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= names
        assert "process_open_fds" in names
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_metrics_keys_of_namesrv_conf() -> None:
    config = NameServerConfig.from_properties({"metricsPort": "9555", "metricsHost": "0.0.0.0"})
    assert (config.metrics_port, config.metrics_host) == (9555, "0.0.0.0")
    assert NameServerConfig.from_properties({}).metrics_port is None
    with pytest.raises(ConfigError, match="metricsPort must be between 0 and 65535"):
        NameServerConfig.from_properties({"metricsPort": "70000"})


def test_unknown_config_keys_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# RocketMQ style\nlistenPort=0\nlistenPrt=9876\n")
    assert main(["namesrv", "-c", str(conf)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown NameServer setting(s) listenPrt (did you mean listenPort?)" in err


def test_unknown_key_without_a_close_one_is_one_short_line() -> None:
    """No list of every key after it (issue 28 item 5): where the samples are instead."""
    with pytest.raises(ConfigError) as info:
        NameServerConfig.from_properties({"colour": "blue"})
    assert str(info.value) == (
        "unknown NameServer setting(s) colour; it is neither LedgerMQ's nor RocketMQ's "
        "(`ledgermq init-conf DIR` writes commented samples)"
    )


def test_rocketmq_namesrv_keys_are_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    config = NameServerConfig.from_properties(
        {
            "listenPort": "9877",
            "kvConfigPath": "/root/namesrv/kvConfig.json",  # NamesrvConfig
            "orderMessageEnable": "true",
            "serverWorkerThreads": "8",  # NettyServerConfig
        }
    )
    assert config.listen_port == 9877
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    expected = (
        "ignoring RocketMQ setting(s) that mean nothing to a LedgerMQ NameServer: kvConfigPath, "
        "orderMessageEnable, serverWorkerThreads"
    )
    assert warnings == [expected]


def test_shipped_namesrv_conf_loads(caplog: pytest.LogCaptureFixture) -> None:
    conf = Path(__file__).resolve().parents[2] / "conf" / "namesrv.conf"
    config = NameServerConfig.from_properties(load_properties(str(conf)))
    assert config == NameServerConfig("127.0.0.1", 9876, 10_000, 120_000)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_config_from_properties() -> None:
    config = NameServerConfig.from_properties(
        {"listenPort": "9877", "bindAddress": "0.0.0.0", "scanNotActiveBrokerInterval": "5000"}
    )
    assert config == NameServerConfig("0.0.0.0", 9877, 5000, 120_000)
    with pytest.raises(ConfigError, match="listenPort must be an integer, not 'x'"):
        NameServerConfig.from_properties({"listenPort": "x"})
    with pytest.raises(ConfigError, match="listenPort must be between 0 and 65535"):
        NameServerConfig.from_properties({"listenPort": "70000"})
    with pytest.raises(ConfigError, match="brokerTimeoutMillis must be positive"):
        NameServerConfig.from_properties({"brokerTimeoutMillis": "0"})


def test_a_port_in_use_is_one_line_naming_the_flag() -> None:
    """Issue 13 item 14: the error says which flag moves the port, no traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ledgermq", "namesrv", "--listen-port", str(port)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            timeout=20,
            check=False,
        )
    assert result.returncode == 1
    assert "--listen HOST:PORT" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
