"""The ``ledgermq`` command: quickstart and the store tools, with errors as one clear line."""

from __future__ import annotations

import concurrent.futures
import json
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledgermq.cli.main import main
from ledgermq.console import console_available
from ledgermq.store import LedgerStore


def _free_port_offset() -> int:
    """An offset that makes every quickstart port free (NameServer, brokers, ledger, gRPC,
    console, metrics)."""
    rng = random.Random()
    for _ in range(50):
        offset = rng.randrange(1000, 20000)
        ports = [9876, 30911, 30921, 30931, 40911, 40912, 40913, 8080, 8081, 8082, 8083,
                 5557, 5558, 5559]  # fmt: skip
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        return offset
    raise AssertionError("no free port offset found")


def _scrape_while_serving(url: str) -> concurrent.futures.Future[set[str]]:
    """The sample names at ``url``, read by a thread once it answers (within 60 s)."""

    def scrape() -> set[str]:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    text = response.read().decode()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                continue
            return {s.name for f in text_string_to_metric_families(text) for s in f.samples}

    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(scrape)
    pool.shutdown(wait=False)
    return future


@pytest.mark.timeout(120)
def test_quickstart_runs_a_cluster_and_checks_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offset = _free_port_offset()
    args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset), "--run-for", "0.2"]
    scraped = _scrape_while_serving(f"http://127.0.0.1:{5557 + offset}/metrics")
    assert main([*args[:-1], "3"]) == 0
    out = capsys.readouterr().out
    # every replica serves /metrics (issue 28 item 2), printed in the address block
    urls = "  ".join(f"http://127.0.0.1:{port + offset}/metrics" for port in (5557, 5558, 5559))
    assert f"Metrics         {urls}" in out
    names = scraped.result(timeout=5)
    assert {"process_resident_memory_bytes", "process_open_fds", "ledgermq_term"} <= names
    assert "ledgermq_broker_master" in names
    assert f"NameServer      127.0.0.1:{9876 + offset}" in out
    assert out.count("(master;") == 1
    assert f"gRPC 127.0.0.1:{8081 + offset})" in out
    assert (
        f'ledgermq proxy -n "127.0.0.1:{9876 + offset}" --listen 127.0.0.1:{8084 + offset}' in out
    )
    assert "self-check: 100 messages sent" in out
    if console_available():
        assert f"Console         http://127.0.0.1:{8080 + offset}/" in out
    else:
        assert "Console         not started: the console needs the `console` extra" in out
    # running it again reuses the data (and the same topic keeps its messages)
    assert main(args) == 0
    assert "self-check" in capsys.readouterr().out


def make_store(path: Path) -> None:
    with LedgerStore.open(path, data_segment_bytes=8192, index_segment_entries=64) as store:
        store.append_batch(1, [b"hello", b"\xff\xfe binary", b"third"])
        store.set_committed_index(1)


def test_store_info_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(tmp_path)
    assert main(["store", "info", str(tmp_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["end_index"] == 2
    assert info["committed_index"] == 1
    assert info["data_segment_bytes"] == 8192


def test_store_get_and_append(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store(tmp_path)
    assert main(["store", "get", str(tmp_path), "0"]) == 0
    assert "hello" in capsys.readouterr().out
    assert main(["store", "get", str(tmp_path), "1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["body_encoding"] == "hex"
    assert main(["store", "append", str(tmp_path), "--term", "2", "--body", "new"]) == 0
    assert "index=3" in capsys.readouterr().out
    assert main(["store", "verify", str(tmp_path)]) == 0
    assert "ok: 4 entries" in capsys.readouterr().out


def test_verify_reports_corruption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LedgerStore.open(tmp_path, data_segment_bytes=4096, index_segment_entries=16) as store:
        entries = store.append_batch(1, [b"x" * 900] * 16)  # four segments
    victim = entries[1]
    data = tmp_path / "data" / f"{0:020d}"
    with open(data, "r+b") as f:
        f.seek(victim.pos + 60)
        f.write(b"!")
    assert main(["store", "verify", str(tmp_path)]) == 1
    assert "CORRUPT" in capsys.readouterr().out


def test_errors_are_one_line_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["store", "info", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ledgermq: error: ")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    make_store(tmp_path)
    assert main(["store", "get", str(tmp_path), "99"]) == 1
    assert "outside the log" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--listen", "127.0.0.1"]) == 1
    assert "--listen '127.0.0.1' is not HOST:PORT" in capsys.readouterr().err
    assert main(["proxy", "-n", "nowhere", "--listen", "127.0.0.1:0"]) == 1
    assert "NameServer address 'nowhere' is not host:port" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "brokerName=x"]) == 1
    assert "the proxy does not take brokerName" in capsys.readouterr().err
    missing = ["--set", f"aclFilePath={tmp_path / 'none.yml'}"]
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "aclEnable=true", *missing]) == 1
    assert "there is no ACL file" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "aclEnable=yes"]) == 1
    assert "aclEnable must be true or false" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "enableTopicMessageTypeCheck=x"]) == 1
    assert "enableTopicMessageTypeCheck must be true or false" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "maxMessageSize=4M"]) == 1
    assert "maxMessageSize must be a number of bytes, not '4M'" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "maxMessageSize=100"]) == 1
    assert "maxMessageSize 100 is below 1024 bytes" in capsys.readouterr().err
    assert main(["proxy", "-n", "127.0.0.1:9876", "--set", "tls.server.mode=enforcing"]) == 1
    assert "tls.server.certPath" in capsys.readouterr().err


def test_console_script_is_installed(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ledgermq.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("ledgermq ")
    bad = subprocess.run(
        [sys.executable, "-m", "ledgermq.cli.main", "store", "get", str(tmp_path), "x"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 2  # argparse usage error
    assert "Traceback" not in bad.stderr
