"""Child processes of a benchmark: free loopback ports, stopping and reaping, log tails.

Both sides of ``ledgermq ledger bench`` (our replicas and PySyncObj's nodes) run as separate OS
processes on 127.0.0.1, started and always reaped by the driver.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HOST", "free_ports", "log_tail", "stop_processes"]

HOST: Final = "127.0.0.1"
_STOP_TIMEOUT_S: Final = 5.0


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
