"""Latency and throughput accounting shared by both sides of ``ledgermq ledger bench``.

Both the LedgerMQ ledger and the PySyncObj comparison report a ``RunResult`` per workload, so the
table and the JSON have one shape whichever system produced them. Latencies are recorded in
seconds, one float per acknowledged call, into an ``array('d')`` (a C double per entry, no object
per sample), and reported in milliseconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = ["LatencyRecorder", "Progress", "RunResult", "format_table", "write_json"]

# At most this many progress redraws per second (one every 200 ms).
_PROGRESS_MIN_INTERVAL_S: Final = 0.2


class LatencyRecorder:
    """Latency of each acknowledged operation, in seconds.

    ``record`` is one C-level append; percentiles sort a copy once per query, so call them after
    the run, not on the hot path.
    """

    def __init__(self, expected: int = 1 << 16) -> None:
        # samples: seconds per acknowledged operation, in the order they completed. ``expected``
        # only reserves room up front (arrays grow on their own past it).
        self._samples = array("d", bytes(8 * expected))
        self._count = 0

    def record(self, seconds: float) -> None:
        """Add one operation that took ``seconds`` from submission to acknowledgement."""
        if self._count < len(self._samples):
            self._samples[self._count] = seconds
        else:
            self._samples.append(seconds)
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (0 < p <= 100) in **milliseconds**, by nearest rank.

        Nearest rank returns a sample that was observed (no interpolation): p50 of [1, 2, 3, 4] ms
        is 2 ms, p100 is the maximum. 0.0 when nothing was recorded.
        """
        if not 0 < p <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {p}")
        if self._count == 0:
            return 0.0
        ordered = sorted(self._samples[: self._count])
        rank = max(1, math.ceil(p / 100 * self._count))
        return ordered[rank - 1] * 1000.0

    def max_ms(self) -> float:
        """The slowest operation in milliseconds (0.0 when nothing was recorded)."""
        return max(self._samples[: self._count]) * 1000.0 if self._count else 0.0


@dataclass(frozen=True, slots=True)
class RunResult:
    """One workload on one system.

    ``entries`` counts bodies (a call with ``batch`` bodies adds ``batch``) acknowledged inside
    the measured window of ``seconds``; latencies are per call, submission to acknowledgement.
    """

    system: str  # "ledgermq" or "pysyncobj"
    mode: str  # workload label; rows of two systems with the same mode are compared
    clients: int  # calls kept outstanding at once
    batch: int  # bodies per call
    body_bytes: int  # bytes per body
    flush: str  # "async" or "sync" (what each means is the system's own; see ``note``)
    entries: int  # bodies acknowledged in the window
    seconds: float  # length of the measured window
    entries_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    errors: int  # calls that failed (and were retried) in the window
    note: str = ""
    server_cpu_us: float | None = None
    """CPU microseconds per acknowledged body, summed over every server process (replicas and
    NameServer), over the measured window; None when not measured."""
    client_cpu_us: float | None = None
    """The same for the load generator."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``from_json`` reads it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


_COLUMNS: Final = (
    # (header, value of a row, right-aligned)
    ("system", lambda r: r.system, False),
    ("mode", lambda r: r.mode, False),
    ("flush", lambda r: r.flush, False),
    ("clients", lambda r: f"{r.clients:,}", True),
    ("batch", lambda r: f"{r.batch:,}", True),
    ("body B", lambda r: f"{r.body_bytes:,}", True),
    ("entries", lambda r: f"{r.entries:,}", True),
    ("s", lambda r: f"{r.seconds:,.1f}", True),
    ("entries/s", lambda r: f"{r.entries_per_s:,.0f}", True),
    ("p50 ms", lambda r: f"{r.p50_ms:,.2f}", True),
    ("p99 ms", lambda r: f"{r.p99_ms:,.2f}", True),
    ("max ms", lambda r: f"{r.max_ms:,.2f}", True),
    ("errors", lambda r: f"{r.errors:,}", True),
)
_CPU_COLUMNS: Final = (
    # shown when some row measured CPU (``ledgermq ledger bench`` does not)
    ("server us/msg", lambda r: _us(r.server_cpu_us), True),
    ("loadgen us/msg", lambda r: _us(r.client_cpu_us), True),
)


def _us(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"


def _workload(result: RunResult) -> tuple[str, int, int, int, str]:
    return (result.mode, result.clients, result.batch, result.body_bytes, result.flush)


def format_table(
    results: Sequence[RunResult],
    *,
    ratio: tuple[str, str] | None = None,
    ratios: Sequence[tuple[str, str]] = (),
) -> str:
    """An aligned plain-text table, one row per result, numbers with thousands separators.

    Args:
        results: rows in the order to print them.
        ratio: ``(system_a, system_b)`` adds a ``ratio`` column: on each row of ``system_a``,
            its entries/s divided by that of the ``system_b`` row with the same workload (mode,
            clients, batch, body size and flush); blank where there is no such row. Default:
            no ratio column.
        ratios: more such columns, one per pair, after ``ratio``'s (several peers side by side).
    """
    columns: list[tuple[str, Callable[[RunResult], str], bool]] = list(_COLUMNS)
    if any(r.server_cpu_us is not None or r.client_cpu_us is not None for r in results):
        columns.extend(_CPU_COLUMNS)
    headers = [name for name, _, _ in columns]
    rows = [[cell(result) for _, cell, _ in columns] for result in results]
    right = [align for _, _, align in columns]
    for numerator, denominator in ([ratio] if ratio is not None else []) + list(ratios):
        base = {_workload(r): r.entries_per_s for r in results if r.system == denominator}
        headers.append(f"ratio {numerator}/{denominator}")
        right.append(True)
        for row, result in zip(rows, results, strict=True):
            other = base.get(_workload(result)) if result.system == numerator else None
            row.append(f"{result.entries_per_s / other:,.2f}x" if other else "")
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in rows)
    # Each distinct note once, in order of first appearance (rows of one system often share one).
    notes = list(dict.fromkeys(f"{r.system} {r.mode}: {r.note}" for r in results if r.note))
    if notes:
        out.append("")
        out.extend(notes)
    return "\n".join(out)


def write_json(path: str, results: Sequence[RunResult], meta: Mapping[str, Any]) -> None:
    """Write ``{"meta": meta, "results": [...]}`` to ``path`` (indented, newline-terminated)."""
    document = {"meta": dict(meta), "results": [result.to_json() for result in results]}
    with open(path, "w", encoding="utf-8") as out:
        json.dump(document, out, indent=2)
        out.write("\n")


class Progress:
    """A one-line progress bar on stderr, redrawn in place with ``\\r``.

    Silent unless the stream is a TTY or ``force`` is set, so logs and CI output stay clean.
    Redraws at most 5 times a second whatever the call rate.
    """

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        force: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # stream: where the bar goes (default: sys.stderr at construction).
        self._stream = stream if stream is not None else sys.stderr
        # enabled: False means every method is a no-op.
        self.enabled = force or self._stream.isatty()
        # clock: seconds, monotonic; injectable so tests can drive the rate limit.
        self._clock = clock
        self._last_draw_s = -math.inf
        self._width = 0  # length of the last line drawn, to blank it out

    def update(self, mode: str, elapsed_s: float, total_s: float, entries: int) -> None:
        """Redraw with the current state of ``mode`` (skipped if drawn less than 200 ms ago)."""
        if not self.enabled:
            return
        now = self._clock()
        if now - self._last_draw_s < _PROGRESS_MIN_INTERVAL_S:
            return
        self._last_draw_s = now
        rate = entries / elapsed_s if elapsed_s > 0 else 0.0
        text = (
            f"{mode}: {elapsed_s:5.1f}/{total_s:.1f} s  {entries:,} entries  {rate:,.0f} entries/s"
        )
        self._stream.write("\r" + text.ljust(self._width))
        self._stream.flush()
        self._width = len(text)

    def status(self, text: str) -> None:
        """A line that stays (a workload's status once a second, as RocketMQ's benchmark tools
        print it): it replaces the redrawn bar, which the next ``update`` draws again below."""
        if not self.enabled:
            return
        self._stream.write("\r" + text.ljust(self._width) + "\n")
        self._stream.flush()
        self._width = 0
        self._last_draw_s = -math.inf

    def finish(self) -> None:
        """Clear the line, ready for the next mode or for normal output."""
        if not self.enabled or self._width == 0:
            return
        self._stream.write("\r" + " " * self._width + "\r")
        self._stream.flush()
        self._width = 0
        self._last_draw_s = -math.inf
