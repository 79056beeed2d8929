"""Every server serves its process figures on /metrics when asked (issue 28 item 2): the
standalone proxy and the console with ``--metrics-listen HOST:PORT`` (the NameServer's
``--metrics-port`` is in tests/namesrv/test_cli.py, the replicas' in
tests/broker/test_metrics.py)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledgermq.cli.main import main
from ledgermq.cli.metrics_args import start_metrics
from ledgermq.errors import ConfigError, LedgerMQError

pytestmark = pytest.mark.timeout(40)

SRC = Path(__file__).resolve().parents[2] / "src"
_URL = re.compile(r"http://127\.0\.0\.1:\d+/metrics")


def _first_url(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The first /metrics URL the process prints (AssertionError after ``timeout_s``)."""
    found: list[str] = []
    seen: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            match = _URL.search(line)
            if match:
                found.append(match.group(0))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert found, f"no /metrics URL printed within {timeout_s} s: {seen}"
    return found[0]


@pytest.mark.parametrize("command", ["proxy", "console"])
def test_proxy_and_console_serve_the_process_metrics(command: str) -> None:
    if command == "console":
        pytest.importorskip("uvicorn", reason="the console extra is not installed")
    process = subprocess.Popen(
        [sys.executable, "-m", "ledgermq", command, "-n", "127.0.0.1:1",
         "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        url = _first_url(process, timeout_s=30)
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= names
        assert "process_open_fds" in names
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_a_bad_or_taken_metrics_address_is_one_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match=r"--metrics-listen 'nope' is not HOST:PORT"):
        start_metrics("nope")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(LedgerMQError) as raised:
            start_metrics(f"127.0.0.1:{port}")
    assert f"cannot serve /metrics on 127.0.0.1:{port}: address already in use" in str(raised.value)
    assert "choose another address with --metrics-listen HOST:PORT" in str(raised.value)
    assert start_metrics(None) is None
    assert main(["proxy", "-n", "127.0.0.1:1", "--listen", "127.0.0.1:0",
                 "--metrics-listen", "127.0.0.1:x"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "--metrics-listen '127.0.0.1:x' is not HOST:PORT" in err
    assert "Traceback" not in err
