"""``ledgermq.spark.daemon``: a reused Python worker whose connection the JVM closes at
``spark.stop()`` ends without a traceback, and one with a task runs it with every byte intact.

No JVM: a socket pair stands for the worker's connection. pyspark's own ``daemon.worker``, given
a connection closed before a task, prints "PySpark daemon failed to flush" and a
``BrokenPipeError`` traceback, which is what ``spark.stop()`` printed once per idle worker."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")

import pyspark.daemon

from ledgermq.spark import daemon

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def closed_by_the_jvm() -> Iterator[socket.socket]:
    """The worker's end of a connection whose other end (the JVM's) is closed."""
    worker_end, jvm_end = socket.socketpair()
    jvm_end.close()
    try:
        yield worker_end
    finally:
        worker_end.close()


# pyspark's worker leaves the files it opened on the socket to the garbage collector
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_pyspark_s_worker_prints_a_broken_pipe_when_the_jvm_closed_an_idle_worker(
    closed_by_the_jvm: socket.socket, capfd: pytest.CaptureFixture[str]
) -> None:
    """The mechanism behind the tracebacks at ``spark.stop()`` (pyspark's code, unchanged)."""
    pyspark.daemon.worker(closed_by_the_jvm, True)
    err = capfd.readouterr().err
    assert "BrokenPipeError" in err
    assert "Traceback" in err


def test_a_worker_closed_before_its_next_task_ends_quietly(
    closed_by_the_jvm: socket.socket, capfd: pytest.CaptureFixture[str]
) -> None:
    code = daemon.worker(closed_by_the_jvm, True)
    assert code != 0  # the daemon's child stops reusing the connection and exits
    assert capfd.readouterr().err == ""


def test_a_worker_with_a_task_gets_all_of_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    worker_end, jvm_end = socket.socketpair()
    received: list[bytes] = []

    def task(sock: socket.socket, authenticated: bool) -> int:
        received.append(sock.recv(100))
        return 0

    monkeypatch.setattr(daemon, "_pyspark_worker", task)
    try:
        jvm_end.sendall(b"\x00\x00\x00\x07task")
        assert daemon.worker(worker_end, True) == 0
        assert received == [b"\x00\x00\x00\x07task"]
    finally:
        worker_end.close()
        jvm_end.close()


def test_local_sessions_run_this_daemon() -> None:
    from pathlib import Path

    import ledgermq.spark.local

    assert daemon.DAEMON_MODULE == "ledgermq.spark.daemon"
    text = Path(ledgermq.spark.local.__file__).read_text()
    assert f'"spark.python.daemon.module", "{daemon.DAEMON_MODULE}"' in text
