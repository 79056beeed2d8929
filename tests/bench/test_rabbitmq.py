"""RabbitMQ quorum queues in ``bench peers``: the one-line skips, and (when RabbitMQ is
installed) a short run on a real 3-node cluster after which no Erlang process is left."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.peers import rabbitmq_peer
from benchmarks.peers.rabbitmq_peer import RABBIT_SCRIPTS, RabbitSystem
from benchmarks.peers.servers import (
    MARKER_VARIABLE,
    ServerProcess,
    kill_marked,
    marked_pids,
    new_mark,
    session_pids,
)
from benchmarks.peers.workloads import WORKLOADS

RABBIT_MISSING = (
    not (Path(RABBIT_SCRIPTS) / "rabbitmq-server").exists()
    or importlib.util.find_spec("aio_pika") is None
)


def _fake_scripts(directory: Path) -> None:
    for name in ("rabbitmq-server", "rabbitmqctl", "epmd"):
        script = directory / name
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)


def test_not_installed_is_one_line_with_how_to_install(tmp_path: Path) -> None:
    assert RabbitSystem(str(tmp_path)).unavailable() == (
        "RabbitMQ quorum: skipped, rabbitmq-server is not installed "
        "(apt-get install rabbitmq-server)"
    )


def test_missing_aio_pika_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_scripts(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "aio_pika" else real(name, *a),
    )
    assert RabbitSystem(str(tmp_path)).unavailable() == (
        "RabbitMQ quorum: skipped, aio-pika is not installed (pip install aio-pika)"
    )


def test_installed_scripts_are_found(tmp_path: Path) -> None:
    _fake_scripts(tmp_path)
    if importlib.util.find_spec("aio_pika") is not None:
        assert RabbitSystem(str(tmp_path)).unavailable() is None


def test_the_marker_finds_a_daemon_that_left_the_session(tmp_path: Path) -> None:
    """What epmd -daemon does: a double fork into a new session; the session kill misses it."""
    mark = new_mark()
    server = ServerProcess("daemonizer", tmp_path / "d.log")
    server.spawn(
        ["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 < /dev/null & sleep 60"],
        {**os.environ, MARKER_VARIABLE: mark},
    )

    def escaped() -> set[int]:
        return set(marked_pids(mark)) - set(session_pids(server.pid))

    deadline = time.monotonic() + 5
    while (len(marked_pids(mark)) < 3 or not escaped()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(marked_pids(mark)) == 3  # the shell, its sleep, the escaped sleep
    assert len(escaped()) == 1
    server.kill()
    # the daemon survived the session kill (the shell's own sleep may take a moment to die:
    # SIGKILL is delivered, not waited for, for a process that is not the killer's child)
    assert _settles(lambda: len(marked_pids(mark)) == 1)
    assert len(kill_marked(mark)) == 1
    assert _settles(lambda: marked_pids(mark) == [])


def _settles(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_free_range_is_consecutive_free_ports() -> None:
    import socket

    base = rabbitmq_peer._free_range(10)
    sockets = []
    try:
        for port in range(base, base + 10):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.skipif(
    RABBIT_MISSING,
    reason="RabbitMQ not installed (apt-get install rabbitmq-server; pip install aio-pika)",
)
def test_smoke_rabbitmq_quorum_rows_and_no_erlang_left(tmp_path: Path) -> None:
    system = RabbitSystem()
    results = []
    try:
        system.start(tmp_path)
        pids = system.server_pids()
        mark = system._mark
        for name in ("produce single", "consume"):
            workload = next(w for w in WORKLOADS if w.name == name)
            results.append(asyncio.run(system.run(workload, 1.0)))
    finally:
        system.close()
    for result in results:
        assert result is not None
        assert result.entries_per_s > 0, result
        assert result.server_cpu_us is not None
    assert marked_pids(mark) == []
    for pid in pids:
        assert session_pids(pid) == []
    survivors = subprocess.run(
        ["ps", "-o", "stat=", "-p", ",".join(map(str, pids))],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    assert all(state.startswith("Z") for state in survivors)  # dead, not yet reaped by init
