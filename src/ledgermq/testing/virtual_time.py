"""An asyncio event loop whose time is virtual, for tests of timers, POP, transactions and delays.

A test that waits for a timer message due in 1.5 s, a POP invisibility of 2 s or a transaction
check-back every second should not take that long, and should not depend on how busy the machine
is. ``VirtualTimeLoop`` keeps its own time (``loop.time()``): it stands still while any callback is
ready, any selected file descriptor is readable or writable, or any work handed to a thread
(``run_in_executor``, ``asyncio.to_thread``, such as the ledger's fsyncs) is running; when every
task is idle it jumps straight to the next scheduled callback (as trio's ``MockClock`` with
``autojump_threshold=0`` does). So ``asyncio.sleep``, ``call_later`` and ``wait_for`` cost no wall
time, and a sequence of events happens in the same order on every run.

The broker reads time in two ways: the loop (``asyncio.sleep``, ``call_later``, ``loop.time()``)
and a ``ledgermq.clock.Clock`` (``state.now_ms()``: due times, invisibility deadlines, check-back
ages). ``VirtualClock`` is a ``Clock`` that reads the loop's virtual time, so both agree; give it
to the ``BrokerServer`` (``clock=``) and take due times in the test from it too.

Use it with the in-memory network (``ledgermq.net.MemoryNetwork``): bytes on a real socket take
real time that the loop cannot see, so a virtual loop would not wait for them. A thread must not
wait for something the loop's timers do (``to_thread(event.wait)`` for a housekeeping pass): time
stands still while it runs, so it waits until its own real timeout. ``run`` is the
``asyncio.run`` of this loop.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from typing import TYPE_CHECKING, Any, TypeVar

from ledgermq.clock import SystemClock

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Callable, Coroutine, Mapping

    from _typeshed import FileDescriptorLike

__all__ = ["VirtualClock", "VirtualTimeLoop", "current_clock", "current_loop", "run"]

_T = TypeVar("_T")

_THREAD_POLL_S = 0.05
"""While work runs in a thread, how long a real wait for it lasts before the loop looks again
(a finished thread wakes the loop at once through its self-pipe; this only bounds a missed
wake-up)."""


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` advances only when nothing can run."""

    def __init__(self, start_s: float = 0.0, wall_origin_s: float | None = None) -> None:
        self._virtual_now = start_s
        self.wall_origin_s = (
            SystemClock().wall_time_s() if wall_origin_s is None else wall_origin_s
        ) - start_s
        """The wall time (Unix seconds) at virtual time 0: by default, the loop starts now."""
        self._in_threads = 0
        super().__init__(_VirtualSelector(self))
        # Timers fire once their time is passed, never "within the clock's resolution" early:
        # virtual time does not move by itself, so an early timer would find its time not come.
        self._clock_resolution = 0.0

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move time forward by hand (callbacks now due run at the loop's next turn)."""
        if seconds < 0:
            raise ValueError(f"virtual time never goes back, asked to advance by {seconds}")
        self._virtual_now += seconds

    @property
    def threads_busy(self) -> int:
        """How many ``run_in_executor`` calls are running (time stands still meanwhile)."""
        return self._in_threads

    def run_in_executor(  # type: ignore[override]
        self, executor: concurrent.futures.Executor | None, func: Callable[..., _T], *args: Any
    ) -> asyncio.Future[_T]:
        future = super().run_in_executor(executor, func, *args)
        self._in_threads += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self._in_threads -= 1

    def _idle(self) -> bool:
        """Nothing is ready to run (the loop asked its selector to wait)."""
        return not self._ready and not self._stopping  # type: ignore[attr-defined]

    def _jump(self, seconds: float) -> None:
        """Every task is idle: move to just past the next timer, ``seconds`` at most.

        Just past it, not onto it: a timer fires when its time is passed, and code that woke
        for a deadline must then see it passed (with ``now + (deadline - now)`` a rounding
        below ``deadline`` a poll loop would wait for a vanishing remainder for ever).
        """
        now = self._virtual_now
        target = now + seconds
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        if scheduled and scheduled[0].when() <= target:
            target = scheduled[0].when()
        self._virtual_now = max(now, math.nextafter(target, math.inf))


class _VirtualSelector(selectors.BaseSelector):
    """The loop's selector: a real one for file descriptors; waits become jumps in time."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        # The loop passes 0 when callbacks are ready (or a timer is due now), the time to its
        # next timer otherwise, and None when it has neither.
        loop = self._loop
        if not loop._idle():
            return self._real.select(0)
        if timeout is not None and timeout <= 0:
            loop._jump(0)  # a timer due now: just past it
            return self._real.select(0)
        if loop.threads_busy:
            # A thread's work takes real time: wait for it for real, time standing still.
            wait = _THREAD_POLL_S if timeout is None else min(timeout, _THREAD_POLL_S)
            return self._real.select(wait)
        events = self._real.select(0)
        if events or timeout is None:
            # Something to do now, or nothing will ever happen but I/O: wait for it for real.
            return events or self._real.select(None)
        loop._jump(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_key(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualClock:
    """A ``ledgermq.clock.Clock`` that reads a ``VirtualTimeLoop``'s time.

    Wall time is the loop's ``wall_origin_s`` plus its virtual time, so dates in stored messages
    look real, due times agree with the loop's timers, and every clock of one loop agrees.
    """

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop

    def monotonic_ms(self) -> int:
        return int(self._loop.time() * 1000)

    def wall_time_s(self) -> float:
        return self._loop.wall_origin_s + self._loop.time()

    def wall_ms(self) -> int:
        """Wall time in whole milliseconds (RocketMQ's timestamps)."""
        return int(self.wall_time_s() * 1000)


def run(
    main: Coroutine[Any, Any, _T], *, start_s: float = 0.0, wall_origin_s: float | None = None
) -> _T:
    """``asyncio.run`` on a fresh ``VirtualTimeLoop``."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(start_s, wall_origin_s)) as runner:
        return runner.run(main)


def current_clock() -> VirtualClock:
    """A ``VirtualClock`` of the running ``VirtualTimeLoop``."""
    return VirtualClock(current_loop())


def current_loop() -> VirtualTimeLoop:
    """The running loop, which must be a ``VirtualTimeLoop`` (a clear error otherwise)."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, VirtualTimeLoop):
        raise TypeError(f"virtual time needs a VirtualTimeLoop, this loop is {type(loop).__name__}")
    return loop
