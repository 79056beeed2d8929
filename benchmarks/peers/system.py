"""What the peers benchmark needs of each system it runs (LedgerMQ and each peer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from benchmarks.peers.workloads import Workload
    from ledgermq.bench.stats import RunResult

__all__ = ["System"]


class System(Protocol):
    """One system with one client: a 3-node cluster started fresh for each round."""

    key: str
    """short name, unique in a run: the table's and the JSON's row label"""
    client: str
    """the load generator: which client library, which language"""
    durability: str
    """what an acknowledgement promises"""
    baseline: str | None
    """key of the LedgerMQ system this one is compared with (None: it is LedgerMQ)"""

    def unavailable(self) -> str | None:
        """Why it cannot run here (one line, with how to install it), or None."""

    def start(self, workdir: Path) -> None:
        """Start the cluster (blocking) with its files under ``workdir``."""

    def server_pids(self) -> list[int]:
        """Every process of the running cluster, for the CPU columns."""

    async def run(self, workload: Workload, duration_s: float) -> RunResult | None:
        """Run one workload; None when it does not apply to this system."""

    def close(self) -> None:
        """Kill every process of the cluster; idempotent, safe after a failed start."""
