"""Child processes on loopback: their command line and environment, free ports, reaping, logs.

Both sides of ``ledgermq ledger bench`` (our replicas and PySyncObj's nodes) and the process
tests' ``testing.processes.ReplicaGroup`` start children with these, so a child always imports
the ``ledgermq`` its parent runs, installed (CI) or on ``PYTHONPATH`` (a worktree).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import ledgermq
from ledgermq.bench.checkout import clone_root

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HOST", "child_env", "free_ports", "ledgermq_command", "log_tail", "stop_processes"]

HOST: Final = "127.0.0.1"
_STOP_TIMEOUT_S: Final = 5.0


def ledgermq_command(*args: str) -> list[str]:
    """``[python, -m, ledgermq, *args]`` for this interpreter."""
    return [sys.executable, "-m", "ledgermq", *args]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ``ledgermq`` importable from where this process found it,
    and in a clone the clone's root too, so that ``python -m benchmarks.peers.pysyncobj_log`` and
    ``python -m tests.chaos.buggy.buggy_broker`` resolve (``checkout``)."""
    env = dict(os.environ)
    roots = [str(Path(ledgermq.__file__).resolve().parent.parent)]
    clone = clone_root()
    if clone is not None:
        roots.append(str(clone))
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([*roots, old] if old else roots)
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def free_ports(count: int) -> list[int]:
    """Ports free right now on 127.0.0.1 (bound to port 0, read back, released together)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((HOST, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def stop_processes(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Terminate, wait up to ``_STOP_TIMEOUT_S`` in all, then kill and reap what is left."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for process in processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def log_tail(path: str, lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"
