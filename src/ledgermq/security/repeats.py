"""Rate-limiting repeated lines: the first of a kind is written, its like are counted.

Thousands of refusals a second that differ only in their time (one client guessing secrets,
one misconfigured client retrying) would fill the log and the audit log with the same line.
``RepeatedLines`` lets the first line of a kind through and counts the lines like it for
``window_s``; once that window is over (checked whenever a line is offered, and on ``flush``),
the count comes back as a summary to write, e.g. "(and 2,870 more like it in the last 10 s)".
What makes two lines alike is the caller's ``kind`` (who, from which address, which request,
why refused). At most ``max_kinds`` kinds are held; beyond that the oldest is summed up early.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Hashable

__all__ = ["RepeatedLines", "alike", "more_like_it"]

K = TypeVar("K", bound="Hashable")
V = TypeVar("V")

WINDOW_S: Final = 10.0
_WAIT: Final = re.compile(r"wait \d+ s")


def alike(remark: str) -> str:
    """What makes two refusals' remarks alike: the same words, whatever the seconds to wait
    (a locked sign-in's "wait 7 s" and "wait 6 s" are one reason)."""
    return _WAIT.sub("wait N s", remark)


def more_like_it(count: int, window_s: float) -> str:
    """The words a summary adds: ``(and 2,870 more like it in the last 10 s)``."""
    return f"(and {count:,} more like it in the last {window_s:g} s)"


class _Window(Generic[V]):
    __slots__ = ("count", "example", "opened_s")

    def __init__(self, opened_s: float, example: V) -> None:
        self.opened_s = opened_s
        self.example = example
        self.count = 0


class RepeatedLines(Generic[K, V]):
    """Which lines of each kind to write (see the module docstring)."""

    def __init__(self, window_s: float = WINDOW_S, max_kinds: int = 1000) -> None:
        self.window_s = window_s
        self.max_kinds = max_kinds
        self._windows: dict[K, _Window[V]] = {}
        """Open windows, oldest first (insertion order is opening order)."""

    def offer(self, kind: K, now_s: float, example: V) -> tuple[bool, list[tuple[V, int]]]:
        """Whether to write this line, and the summaries due now: (the first line's
        ``example``, lines held back) for each window that closed with lines held back."""
        due = self.flush(now_s - self.window_s)
        window = self._windows.get(kind)
        if window is not None:
            window.count += 1
            return False, due
        if len(self._windows) >= self.max_kinds:
            oldest = self._windows.pop(next(iter(self._windows)))
            if oldest.count:
                due.append((oldest.example, oldest.count))
        self._windows[kind] = _Window(now_s, example)
        return True, due

    def flush(self, opened_before_s: float = float("inf")) -> list[tuple[V, int]]:
        """Close the windows opened before ``opened_before_s`` (all by default); the
        summaries of those that held lines back."""
        due: list[tuple[V, int]] = []
        windows = self._windows
        while windows:
            kind = next(iter(windows))
            window = windows[kind]
            if window.opened_s >= opened_before_s:
                break
            del windows[kind]
            if window.count:
                due.append((window.example, window.count))
        return due
