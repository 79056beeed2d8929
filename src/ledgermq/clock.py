"""The only module that reads the operating system's clocks.

Everything else takes time as an argument or through a ``Clock``, so tests can drive time by hand
and the Raft core stays deterministic (STYLE.md sections 7.1 and 7.13.3).
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """A source of time."""

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin that never goes backwards."""
        ...

    def wall_time_s(self) -> float:
        """Seconds since the Unix epoch (for file ages and hours of the day)."""
        ...


class SystemClock:
    """The operating system's clocks."""

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_time_s(self) -> float:
        return time.time()
