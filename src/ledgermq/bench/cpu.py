"""CPU time of processes, from ``/proc/<pid>/stat``: what a benchmark costs, not only how fast.

Throughput on a shared 2-vCPU machine moves with whatever else runs; the CPU a cluster spends per
acknowledged message does not (much). ``CpuMeter`` reads utime + stime of the cluster's server
processes (replicas, NameServer; or a peer's servers) and of the load generator at the start and
the end of a workload's measured window, so a benchmark can print both per message.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["CpuMeter", "CpuUsage", "process_cpu_s"]

_UTIME_FIELD: Final = 11  # fields after the ")" that closes the command name: state is 0
_STIME_FIELD: Final = 12


def process_cpu_s(pid: int, proc_root: str = "/proc") -> float:
    """User + kernel CPU seconds that process ``pid`` has used (all its threads).

    Raises ``LedgerMQError`` when the process is gone (its CPU can no longer be read).
    """
    try:
        with open(f"{proc_root}/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise LedgerMQError(f"cannot read the CPU time of process {pid}: {exc}") from exc
    # The command name (field 2) is in parentheses and may itself hold spaces or ")".
    fields = text.rsplit(")", 1)[-1].split()
    if len(fields) <= _STIME_FIELD:
        raise LedgerMQError(f"{proc_root}/{pid}/stat is not a stat line: {text[:80]!r}")
    ticks = int(fields[_UTIME_FIELD]) + int(fields[_STIME_FIELD])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class CpuUsage:
    """CPU seconds spent over one window by the servers (summed) and by the load generator."""

    server_s: float
    client_s: float
    wall_s: float

    def per_message_us(self, messages: int) -> tuple[float | None, float | None]:
        """(server, client) CPU microseconds per message; (None, None) when nothing was acked."""
        if messages <= 0:
            return None, None
        return self.server_s / messages * 1e6, self.client_s / messages * 1e6


class CpuMeter:
    """Reads the CPU of ``server_pids`` and ``client_pids`` at ``start()`` and ``stop()``.

    ``client_pids`` defaults to this process (the load generator of the Python benchmarks); a
    load generator that is a child process (the Go loader) is passed explicitly, or reports its
    own CPU through ``add_client_s``.
    """

    def __init__(
        self,
        server_pids: Iterable[int],
        client_pids: Iterable[int] | None = None,
        *,
        clock: Callable[[], float] | None = None,
        reader: Callable[[int], float] = process_cpu_s,
    ) -> None:
        self.server_pids = list(server_pids)
        self.client_pids = [os.getpid()] if client_pids is None else list(client_pids)
        self._clock = clock or time.perf_counter
        self._read = reader
        self._start: tuple[float, float, float] | None = None
        self._extra_client_s = 0.0
        self.usage: CpuUsage | None = None

    def _sample(self) -> tuple[float, float, float]:
        server = sum(self._read(pid) for pid in self.server_pids)
        client = sum(self._read(pid) for pid in self.client_pids)
        return server, client, self._clock()

    def start(self) -> None:
        self._start = self._sample()
        self.usage = None

    def add_client_s(self, seconds: float) -> None:
        """CPU a load generator outside ``client_pids`` reported for this window."""
        self._extra_client_s += seconds

    def stop(self) -> CpuUsage:
        if self._start is None:
            raise LedgerMQError("CpuMeter.stop() before start()")
        server, client, wall = self._sample()
        server0, client0, wall0 = self._start
        self.usage = CpuUsage(
            server - server0, client - client0 + self._extra_client_s, wall - wall0
        )
        self._start = None
        self._extra_client_s = 0.0
        return self.usage
