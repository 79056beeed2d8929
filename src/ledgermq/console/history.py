"""The last hour of put and get per second, per broker replica and per topic, kept in memory
and drawn as inline SVG strips (no script, no chart library: the console works offline).

The brokers report running totals (a replica's ``putMessages`` / ``getMessages``, a topic's max
offsets, the groups' committed offsets), not history. ``Sampler`` reads them every
``interval_s`` through the console's own link, whether or not a page is open, and ``History``
turns each counter into a rate per interval, keeping one hour of points per series.

Memory is bounded twice: a series keeps at most one hour of points (a ring), and the number of
series is capped so that all of them together hold at most ``MAX_POINTS`` points; past the
cap the series updated least recently is dropped (a deleted topic, a replaced replica). At most
``MAX_TOPICS`` topics are sampled (system topics never).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.console.views import cluster_view, is_system_topic
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.clock import Clock
    from ledgermq.console.link import ClusterLink

__all__ = [
    "DEFAULT_INTERVAL_S",
    "MAX_POINTS",
    "MAX_TOPICS",
    "MIN_INTERVAL_S",
    "NO_SESSION",
    "WINDOW_S",
    "History",
    "Sampler",
    "Strip",
    "strip",
]

log = logging.getLogger(__name__)

WINDOW_S: Final = 3600
"""How far back the strips go."""
DEFAULT_INTERVAL_S: Final = 10.0
"""How often the brokers are sampled (``ledgermq console --history-interval``)."""
MIN_INTERVAL_S: Final = 1.0
MAX_POINTS: Final = 200_000
"""Most points kept over all series (each a few dozen bytes: a few MiB at most)."""
MAX_TOPICS: Final = 200
"""Most topics sampled (the first by name); the others show no strip."""


class History:
    """Rates per series (``"broker 10.0.0.1:10911 put"``, ``"topic Orders get"``), one hour.

    Args:
        clock: monotonic time for the rates, wall time for the points' x.
        interval_s: the sampling interval (it sets how many points an hour is).
    """

    def __init__(self, clock: Clock, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._clock = clock
        self.interval_s = max(interval_s, MIN_INTERVAL_S)
        self.points_per_series = math.ceil(WINDOW_S / self.interval_s) + 1
        self.max_series = max(MAX_POINTS // self.points_per_series, 1)
        self._series: OrderedDict[str, deque[tuple[int, float]]] = OrderedDict()
        """key -> (wall ms, per second) points, oldest first; least recently updated first."""
        self._last: OrderedDict[str, tuple[float, int]] = OrderedDict()
        """key -> (monotonic s, counter) of the last sample, least recently read first; as
        bounded as the series (a topic read once and deleted leaves no entry for ever)."""

    def record(self, key: str, counter: int | None) -> None:
        """A new reading of ``key``'s counter: a point (the rate since the previous reading)
        from the second reading on. A counter that went down (a restarted broker, a
        recreated topic) starts afresh; None (not readable now) leaves a gap."""
        now = self._clock.monotonic_ms() / 1000
        if counter is None:
            self._last.pop(key, None)
            return
        last = self._last.get(key)
        self._last[key] = (now, counter)
        self._last.move_to_end(key)
        while len(self._last) > 2 * self.max_series:
            self._last.popitem(last=False)
        if last is None or counter < last[1] or now <= last[0]:
            return
        rate = (counter - last[1]) / (now - last[0])
        points = self._series.get(key)
        if points is None:
            points = self._series[key] = deque(maxlen=self.points_per_series)
        self._series.move_to_end(key)
        points.append((int(self._clock.wall_time_s() * 1000), rate))
        while len(self._series) > self.max_series:
            dropped, _ = self._series.popitem(last=False)
            self._last.pop(dropped, None)

    def series(self, key: str) -> list[tuple[int, float]]:
        """``key``'s points of the last hour, oldest first."""
        since = int(self._clock.wall_time_s() * 1000) - WINDOW_S * 1000
        return [p for p in self._series.get(key, ()) if p[0] >= since]

    def __len__(self) -> int:
        return len(self._series)

    def strip(self, put_key: str, get_key: str) -> Strip:
        return strip(
            self.series(put_key), self.series(get_key), int(self._clock.wall_time_s() * 1000)
        )


# ------------------------------------------------------------------------------- drawing
WIDTH: Final = 360
HEIGHT: Final = 48


@dataclass(frozen=True)
class Strip:
    """Two lines (put, get) over the last hour, in SVG user units (``WIDTH`` x ``HEIGHT``)."""

    put: str
    """``points`` of the put polyline: ``"x,y x,y ..."``; empty when there is no point."""
    get: str
    peak: float
    """The highest rate drawn: the top of the strip."""
    last_put: float | None
    last_get: float | None
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def empty(self) -> bool:
        return not self.put and not self.get


def _line(points: list[tuple[int, float]], now_ms: int, peak: float) -> str:
    start = now_ms - WINDOW_S * 1000
    coords = []
    for at, rate in points:
        x = (at - start) / (WINDOW_S * 1000) * WIDTH
        y = HEIGHT - 1 - rate / peak * (HEIGHT - 2)
        coords.append(f"{min(max(x, 0.0), WIDTH):.1f},{y:.1f}")
    return " ".join(coords)


def strip(put: list[tuple[int, float]], get: list[tuple[int, float]], now_ms: int) -> Strip:
    """The strip of two series ending at ``now_ms``: x is time over the last hour, y the rate
    from 0 to the higher peak of the two (at least 1, so an idle hour is a flat line)."""
    peak = max([1.0, *(r for _, r in put), *(r for _, r in get)])
    return Strip(
        _line(put, now_ms, peak),
        _line(get, now_ms, peak),
        peak,
        put[-1][1] if put else None,
        get[-1][1] if get else None,
    )


# ------------------------------------------------------------------------------- sampling
NO_SESSION: Final = (
    "the brokers enforce ACL and the console has no account of its own: the charts are "
    "sampled with a signed-in operator's account, and nobody is signed in now"
)


class Sampler:
    """Reads the counters into ``history`` every ``history.interval_s`` while started.

    ``link`` says which link to read through at each sample: the console's own, or with ACL
    on and no account of its own, a signed-in operator's (None: nobody is signed in, no
    sample). Errors (a cluster down, no account) are kept in ``error`` for the pages to show,
    and sampling goes on."""

    def __init__(self, link: Callable[[], Awaitable[ClusterLink | None]], history: History) -> None:
        self._link = link
        self.history = history
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def sample(self) -> None:
        """One reading of every broker replica's and (up to ``MAX_TOPICS``) topic's counters.

        Raises:
            LedgerMQError: no link to read through (``NO_SESSION``), or the cluster's error.
        """
        link = await self._link()
        if link is None:
            raise LedgerMQError(NO_SESSION)
        admin = link.admin
        groups = await cluster_view(admin)
        for group in groups:
            for replica in group.replicas:
                self.history.record(f"broker {replica.address} put", replica.put_messages)
                self.history.record(f"broker {replica.address} get", replica.get_messages)
        names = frozenset(g.name for g in groups) | frozenset(g.cluster for g in groups)
        topics = [t for t in await admin.topic_list() if not is_system_topic(t, names)]
        topics = sorted(topics)[:MAX_TOPICS]
        consumed: dict[str, int] = {}
        for rows in (await admin.consumer_lags()).values():
            for row in rows:
                consumed[row.topic] = consumed.get(row.topic, 0) + max(row.consumer_offset, 0)

        async def stored(topic: str) -> int | None:
            try:
                return sum(q.max_offset for q in await admin.topic_stats(topic))
            except (LedgerMQError, OSError, TimeoutError):
                return None  # deleted meanwhile, no master now: a gap

        totals = await asyncio.gather(*(stored(t) for t in topics))
        for topic, total in zip(topics, totals, strict=True):
            self.history.record(f"topic {topic} put", total)
            self.history.record(f"topic {topic} get", consumed.get(topic, 0))

    async def _run(self) -> None:
        # The first reading comes one interval after the start, not at once: a rate needs two
        # readings anyway, and a reading at start raced the first page's requests on a fresh
        # connection (a plain console at a TLS-only NameServer: the port answers the first
        # request "accepts only TLS" and closes, so the page saw a closed connection instead).
        while True:
            await asyncio.sleep(self.history.interval_s)
            try:
                await self.sample()
                self.error = None
            except (LedgerMQError, OSError, TimeoutError) as exc:
                self.error = str(exc) or type(exc).__name__
            except Exception:  # never let the history stop: log and go on
                log.exception("console: sampling the brokers failed")
                self.error = "sampling failed; the console's log has the details"

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="ledgermq console history"
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
