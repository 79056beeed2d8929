"""Messages per second from the brokers' running counters (``putMessages`` / ``getMessages`` of
each replica's runtime info), sampled each time a page asks.

The brokers report totals, not rates, so the console keeps the last sample of each counter and
divides the change by the time between samples. Two browsers polling at once would sample a few
milliseconds apart and see noise, so a sample younger than ``MIN_INTERVAL_S`` is not taken and
the last rate is shown again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ledgermq.clock import Clock

__all__ = ["MIN_INTERVAL_S", "Rates"]

MIN_INTERVAL_S: Final = 1.0


class Rates:
    """Rate per counter key (e.g. ``"127.0.0.1:10911 put"``), from the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._samples: dict[str, tuple[float, int]] = {}
        """key -> (monotonic seconds, counter) of the last sample taken."""
        self._rates: dict[str, float] = {}

    def rate(self, key: str, count: int | None) -> float | None:
        """Per second since the last sample of ``key``; None until there are two samples (or
        when the counter is unknown). A counter that went down (a restarted broker) starts
        afresh."""
        if count is None:
            return None
        now = self._clock.monotonic_ms() / 1000
        last = self._samples.get(key)
        if last is not None and now - last[0] < MIN_INTERVAL_S:
            return self._rates.get(key)
        self._samples[key] = (now, count)
        if last is None or count < last[1]:
            self._rates.pop(key, None)
            return None
        rate = (count - last[1]) / (now - last[0])
        self._rates[key] = rate
        return rate
