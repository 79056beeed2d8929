"""One child process of a test harness: spawned with its output in a log file, waited for until
it prints its ready line, signalled, stopped and reaped by PID.

Shared by ``testing.processes.ReplicaGroup`` (ledger replicas) and
``testing.broker_cluster.BrokerCluster`` (NameServers and brokers); the rules are theirs
(STYLE.md section 7.13.4): every wait bounded, a process that does not come up fails with the
tail of its log, a stopped process gets SIGCONT before it is killed.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Final

from ledgermq.bench.processes import child_env
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["ADDRESS_IN_USE", "ChildProcess", "ProcessStartError", "wait_until"]

ADDRESS_IN_USE: Final = ("address already in use", "Errno 98")
_POLL_S: Final = 0.05


class ProcessStartError(LedgerMQError):
    """A process did not print its ready line in time, or exited; carries its log tail."""

    def __init__(self, message: str, *, address_in_use: bool = False) -> None:
        super().__init__(message)
        self.address_in_use = address_in_use


def wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = _POLL_S) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


class ChildProcess:
    """One child process: its command, its log file (appended to across runs), its state.

    Failures raise ``error`` (a ``ProcessStartError`` subclass, so each harness keeps its own
    exception type), with ``name`` in the message.
    """

    def __init__(
        self,
        name: str,
        log_path: Path,
        ready_mark: bytes,
        error: type[ProcessStartError] = ProcessStartError,
    ) -> None:
        self.name = name
        self.error = error
        self.log_path = log_path
        self.ready_mark = ready_mark
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.ready_line = ""
        self._offset = 0

    def spawn(self, command: list[str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"=== start {self.name}: {' '.join(command)}\n".encode())
            log.flush()
            self._offset = log.tell()
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(),
                start_new_session=True,  # a Ctrl-C in the terminal goes to pytest, not to us
            )
        self.stopped = False
        self.ready_line = ""

    def wait_ready(self, timeout_s: float) -> None:
        """Until the ready line is in the log; ``error`` (process killed) otherwise."""
        proc = self.proc
        assert proc is not None

        def ready() -> bool:
            text = self.read_log(self._offset)
            at = text.find(self.ready_mark)
            if at >= 0:
                end = text.find(b"\n", at)
                if end >= 0:
                    line_start = text.rfind(b"\n", 0, at) + 1
                    self.ready_line = text[line_start:end].decode(errors="replace")
                    return True
            return proc.poll() is not None

        if not wait_until(ready, timeout_s) or not self.ready_line:
            exited = proc.poll()
            self.kill()
            tail = self.log_tail()
            state = f"exited with code {exited}" if exited is not None else "did not start"
            raise self.error(
                f"{self.name} {state} within {timeout_s:g} s; its log ends:\n{tail}",
                address_in_use=any(mark in tail for mark in ADDRESS_IN_USE),
            )

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise self.error(f"{self.name} is not running (exit code {code})")
        self.proc.send_signal(sig)
        if sig is signal.SIGSTOP:
            self.stopped = True
        elif sig is signal.SIGCONT:
            self.stopped = False

    def terminate(self, timeout_s: float) -> int:
        proc = self.proc
        if proc is None:
            raise self.error(f"{self.name} was never started")
        if self.stopped:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
            self.stopped = False
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self.error(
                f"{self.name} ignored SIGTERM for {timeout_s:g} s and was killed; "
                f"its log ends:\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL (after SIGCONT: a stopped process dies only once resumed) and reap."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        self.stopped = False

    def read_log(self, offset: int = 0) -> bytes:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return b""

    def log_tail(self, lines: int = 30) -> str:
        text = self.read_log().decode("utf-8", errors="backslashreplace")
        return "\n".join(text.splitlines()[-lines:])
