"""The peers benchmark's output: one table (medians over rounds), JSON, and a PNG chart."""

from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from ledgermq.bench.stats import RunResult

__all__ = ["SummaryRow", "SystemInfo", "format_peers_table", "summarize", "write_chart"]

LATENCY_WORKLOAD: Final = "latency @10k/s"
_NO_LATENCY: Final = ("consume",)


@dataclass(frozen=True, slots=True)
class SystemInfo:
    key: str
    client: str
    durability: str
    baseline: str | None


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """One workload on one system: medians over the rounds it ran."""

    workload: str
    system: str
    rounds: int
    msgs_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    server_cpu_us: float | None
    client_cpu_us: float | None
    ratio: float | None
    """LedgerMQ / this peer: msgs/s, or p99 for the latency workload (None on LedgerMQ rows)"""

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(results: Sequence[RunResult], systems: Sequence[SystemInfo]) -> list[SummaryRow]:
    """Medians per (workload, system), in workload order then system order, with ratios."""
    order = {info.key: i for i, info in enumerate(systems)}
    baselines = {info.key: info.baseline for info in systems}
    workloads = list(dict.fromkeys(r.mode for r in results))
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.mode, result.system), []).append(result)
    medians: dict[tuple[str, str], SummaryRow] = {}
    for (workload, system), rows in groups.items():
        latency = workload not in _NO_LATENCY
        medians[(workload, system)] = SummaryRow(
            workload=workload,
            system=system,
            rounds=len(rows),
            msgs_per_s=statistics.median(r.entries_per_s for r in rows),
            p50_ms=statistics.median(r.p50_ms for r in rows) if latency else None,
            p99_ms=statistics.median(r.p99_ms for r in rows) if latency else None,
            server_cpu_us=_median([r.server_cpu_us for r in rows]),
            client_cpu_us=_median([r.client_cpu_us for r in rows]),
            ratio=None,
        )
    out = []
    for workload in workloads:
        keys = sorted((k for k in medians if k[0] == workload), key=lambda k: order.get(k[1], 99))
        for key in keys:
            row = medians[key]
            baseline = baselines.get(row.system)
            ours = medians.get((workload, baseline)) if baseline else None
            ratio = None
            if ours is not None:
                if workload == LATENCY_WORKLOAD:
                    if ours.p99_ms and row.p99_ms:
                        ratio = ours.p99_ms / row.p99_ms
                elif row.msgs_per_s > 0:
                    ratio = ours.msgs_per_s / row.msgs_per_s
            out.append(_replace_ratio(row, ratio))
    return out


def _replace_ratio(row: SummaryRow, ratio: float | None) -> SummaryRow:
    return dataclasses.replace(row, ratio=ratio)


def _num(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def format_peers_table(
    rows: Sequence[SummaryRow], systems: Sequence[SystemInfo], skipped: Sequence[str] = ()
) -> str:
    """The one table: a row per workload per system, then the legend and the skipped peers."""
    info = {s.key: s for s in systems}
    headers = [
        "workload", "system", "client", "msgs/s", "p50 ms", "p99 ms",
        "server us/msg", "loadgen us/msg", "LedgerMQ/peer", "an ack means",
    ]  # fmt: skip
    right = [False, False, False, True, True, True, True, True, True, False]
    table = []
    for row in rows:
        system = info.get(row.system)
        ratio = ""
        if row.ratio is not None:
            ratio = f"{row.ratio:.2f}x" + (" p99" if row.workload == LATENCY_WORKLOAD else "")
        table.append([
            row.workload,
            row.system,
            system.client if system else "",
            f"{row.msgs_per_s:,.0f}",
            _num(row.p50_ms, ".2f"),
            _num(row.p99_ms, ".2f"),
            _num(row.server_cpu_us, ",.1f"),
            _num(row.client_cpu_us, ",.1f"),
            ratio,
            system.durability if system else "",
        ])  # fmt: skip
    widths = [max([len(h)] + [len(r[i]) for r in table]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in table)
    out += [
        "",
        (
            "medians over the rounds; p50/p99: per send call (a batch is one call); "
            "server us/msg: CPU (user + kernel) of every server process of the cluster, summed, "
            "per acknowledged (consume: received) message; loadgen us/msg: the same for the client"
        ),
        (
            "LedgerMQ/peer: msgs/s of LedgerMQ (ASYNC_FLUSH for NATS, SYNC_FLUSH for RabbitMQ and "
            "etcd, which fsync before they acknowledge) over the peer's; on the latency row, "
            "LedgerMQ's p99 over the peer's (below 1: LedgerMQ's is lower)"
        ),
    ]
    out.extend(skipped)
    return "\n".join(out)


def write_json(
    path: Path,
    meta: Mapping[str, Any],
    systems: Sequence[SystemInfo],
    results: Sequence[tuple[int, RunResult]],
    rows: Sequence[SummaryRow],
    skipped: Sequence[str],
) -> None:
    document = {
        "meta": dict(meta),
        "systems": [{n: getattr(s, n) for n in s.__slots__} for s in systems],
        "skipped": list(skipped),
        "summary": [row.to_json() for row in rows],
        "runs": [{"round": r, **result.to_json()} for r, result in results],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def write_chart(path: Path, rows: Sequence[SummaryRow], title: str) -> str | None:
    """Throughput and p99 per workload per system as a PNG; the reason when it cannot."""
    if not rows:
        return "chart skipped: nothing ran"
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install 'ledgermq[bench]')"
    workloads = list(dict.fromkeys(r.workload for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows))
    value = {(r.workload, r.system): r for r in rows}
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8))
    width = 0.8 / max(1, len(systems))
    for i, system in enumerate(systems):
        xs = [w + (i - (len(systems) - 1) / 2) * width for w in range(len(workloads))]
        rates = [value[(w, system)].msgs_per_s if (w, system) in value else 0 for w in workloads]
        p99 = [(value[(w, system)].p99_ms or 0) if (w, system) in value else 0 for w in workloads]
        top.bar(xs, rates, width, label=system)
        bottom.bar(xs, p99, width, label=system)
    for axes, label in ((top, "msgs/s"), (bottom, "p99 ms per call")):
        axes.set_xticks(range(len(workloads)), workloads)
        axes.set_ylabel(label)
        axes.grid(axis="y", alpha=0.3)
    top.set_yscale("log")
    bottom.set_yscale("log")
    top.set_title(title)
    top.legend(fontsize="small", ncols=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return None
