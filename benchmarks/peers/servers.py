"""Server processes of a benchmarked cluster: spawned into their own session with a log file,
waited for by TCP port, their CPU read from /proc, and killed (the whole session) whatever happens.

Peers' start scripts fork (RabbitMQ's shell script runs ``erl``, which runs ``beam.smp`` and
helpers), so a server is its session: every process whose session id is the spawned PID. Killing
sends SIGKILL to the process group and then to any process left in the session; an ``atexit``
hook does the same for anything a crashed run left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "INSTALL_HINT",
    "MARKER_VARIABLE",
    "PeerUnavailableError",
    "ServerProcess",
    "find_binary",
    "kill_marked",
    "marked_pids",
    "new_mark",
    "session_pids",
    "wait_port",
]

INSTALL_HINT: Final = "apt-get install nats-server rabbitmq-server etcd-server"
MARKER_VARIABLE: Final = "LEDGERMQ_PEERS_RUN"
"""Set in the environment of everything a peer starts: daemons that leave the session (epmd)
and the helpers of control tools still carry it, so ``kill_marked`` finds them."""
_POLL_S: Final = 0.05
_live: set[ServerProcess] = set()
_marks: set[str] = set()


class PeerUnavailableError(LedgerMQError):
    """A peer cannot be benchmarked here (not installed, its client library missing); the
    message is the one line the table prints instead."""


def find_binary(name: str, path: str | None = None, extra_dirs: Sequence[str] = ()) -> str | None:
    """``name`` on ``path`` (default ``$PATH``) or in ``extra_dirs``; None when absent."""
    found = shutil.which(name, path=path)
    if found is None:
        for directory in extra_dirs:
            candidate = Path(directory) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return found


def session_pids(sid: int, proc_root: str = "/proc") -> list[int]:
    """PIDs of every live process whose session id is ``sid`` (the server and what it forked)."""
    pids = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc_root}/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue  # exited meanwhile
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry))
    return sorted(pids)


def new_mark() -> str:
    """A fresh value for ``MARKER_VARIABLE``, swept at exit too if ``kill_marked`` never ran."""
    mark = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    _marks.add(mark)
    return mark


def marked_pids(mark: str, proc_root: str = "/proc") -> list[int]:
    """PIDs of live processes whose environment holds ``MARKER_VARIABLE=mark``."""
    needle = f"{MARKER_VARIABLE}={mark}".encode()
    pids = []
    own = os.getpid()
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"{proc_root}/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue  # exited meanwhile, or not ours to read
        if needle in environ:
            pids.append(int(entry))
    return sorted(pids)


def kill_marked(mark: str, proc_root: str = "/proc") -> list[int]:
    """SIGKILL every process carrying ``mark`` (until none is left); returns what was killed."""
    killed: list[int] = []
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        pids = [pid for pid in marked_pids(mark, proc_root) if not _is_zombie(pid, proc_root)]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed.extend(pids)
        time.sleep(_POLL_S)
    _marks.discard(mark)
    return sorted(set(killed))


def _is_zombie(pid: int, proc_root: str) -> bool:
    try:
        with open(f"{proc_root}/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_port(
    port: int, timeout_s: float, alive: Callable[[], bool] = lambda: True, host: str = "127.0.0.1"
) -> bool:
    """Until something accepts TCP connections on ``host:port`` (True), ``alive()`` turns False
    or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            return False
        with contextlib.suppress(OSError), socket.create_connection((host, port), 0.5):
            return True
        time.sleep(_POLL_S)
    return False


class ServerProcess:
    """One server process (and whatever it forks), in its own session."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"=== {self.name}: {' '.join(command)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )
        _live.add(self)

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise LedgerMQError(f"{self.name} was never started")
        return self.proc.pid

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """The server's process and everything it forked that still runs."""
        return session_pids(self.pid) if self.is_running() else []

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def wait_port(self, port: int, timeout_s: float) -> None:
        """Until the server accepts connections on ``port``; LedgerMQError with its log tail."""
        if not wait_port(port, timeout_s, self.is_running):
            code = self.proc.poll() if self.proc is not None else None
            state = f"exited with code {code}" if code is not None else "did not listen"
            raise LedgerMQError(
                f"{self.name} {state} on port {port} within {timeout_s:g} s; its log ends:\n"
                f"{self.log_tail()}"
            )

    def kill(self) -> None:
        """SIGKILL to the process group, then to anything left in the session; reap. Idempotent."""
        proc = self.proc
        if proc is None:
            return
        for _ in range(3):
            leftovers = session_pids(proc.pid)
            if not leftovers and proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
        _live.discard(self)


@atexit.register
def _kill_leftovers() -> None:
    """Last resort: no server outlives the benchmark that started it."""
    for server in list(_live):
        server.kill()
    for mark in list(_marks):
        kill_marked(mark)
