"""The virtual-time event loop of ``ledgermq.testing.virtual_time``: sleeps cost no wall time,
timers fire in order at their virtual times, and time stands still while a thread works."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest

from ledgermq.testing import virtual_time
from ledgermq.testing.virtual_time import VirtualClock, VirtualTimeLoop

pytestmark = pytest.mark.timeout(30)


def test_an_hour_of_sleeps_passes_at_once_and_in_order() -> None:
    fired: list[tuple[str, float]] = []

    async def main() -> float:
        loop = asyncio.get_running_loop()
        loop.call_later(3600, lambda: fired.append(("later", loop.time())))

        async def sleeper(name: str, seconds: float) -> None:
            await asyncio.sleep(seconds)
            fired.append((name, loop.time()))

        await asyncio.gather(sleeper("b", 2.5), sleeper("a", 0.5), sleeper("c", 3599.0))
        await asyncio.sleep(10)
        return loop.time()

    started = time.monotonic()
    end = virtual_time.run(main(), start_s=100.0)
    assert time.monotonic() - started < 5  # an hour and ten seconds of virtual time
    assert [name for name, _ in fired] == ["a", "b", "c", "later"]
    # each fires just past its time (a deadline that woke it is then passed)
    assert [at for _, at in fired] == pytest.approx([100.5, 102.5, 3699.0, 3700.0], abs=1e-9)
    assert all(at > due for (_, at), due in zip(fired, [100.5, 102.5, 3699.0, 3700.0], strict=True))
    assert end == pytest.approx(3709.0, abs=1e-9)


def test_wait_for_times_out_in_virtual_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        never: asyncio.Future[None] = loop.create_future()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(never, 110)
        return loop.time()

    assert virtual_time.run(main()) == pytest.approx(110.0, abs=1e-9)


def test_time_stands_still_while_a_thread_works() -> None:
    """The ledger's fsyncs run in threads: a timer must not fire 'during' them in virtual time
    just because the loop had nothing else to do."""
    order: list[str] = []
    release = threading.Event()

    def work() -> float:
        release.wait(5)
        order.append("thread")
        return 1.0

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        thread = asyncio.ensure_future(asyncio.to_thread(work))
        await asyncio.sleep(0)
        assert isinstance(loop, VirtualTimeLoop)
        assert loop.threads_busy == 1
        loop.call_later(0.01, lambda: order.append("timer"))
        threading.Timer(0.2, release.set).start()  # real time, which the loop cannot skip
        before = loop.time()
        await thread
        return before, loop.time()

    before, after = virtual_time.run(main())
    assert order[0] == "thread"
    assert after == before


def test_the_clock_reads_the_loop() -> None:
    async def main() -> tuple[int, float, int, float]:
        clock = VirtualClock(virtual_time.current_loop())
        first = (clock.monotonic_ms(), clock.wall_time_s())
        await asyncio.sleep(2.5)
        return (*first, clock.monotonic_ms(), clock.wall_time_s())

    got = virtual_time.run(main(), start_s=10.0, wall_origin_s=1_700_000_000.0)
    assert got == pytest.approx((10_000, 1_700_000_000.0, 12_500, 1_700_000_002.5), abs=1e-6)
    assert virtual_time.run(_now_of_two_clocks()) == 0  # every clock of one loop agrees


async def _now_of_two_clocks() -> float:
    first = virtual_time.current_clock()
    await asyncio.sleep(1)
    return first.wall_time_s() - virtual_time.current_clock().wall_time_s()


def test_a_poll_loop_reaches_its_deadline() -> None:
    """The POP long poll's shape: wait for an event at most the time left before a deadline;
    virtual time must carry the loop past the deadline (with asyncio's early firing within the
    clock resolution, tests/broker/test_pop_service.py's long poll spun for ever)."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        rounds = 0
        for start in (0.1, 2.01, 1e6 + 0.3):
            loop.call_later(start - loop.time(), lambda: None)
            await asyncio.sleep(start - loop.time())
            deadline = loop.time() + 0.3
            while (left := deadline - loop.time()) > 0:
                rounds += 1
                assert rounds < 100, "the poll loop does not reach its deadline"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(left, 0.07))
        return rounds

    assert virtual_time.run(main()) <= 3 * 6


def test_virtual_time_needs_its_loop() -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="VirtualTimeLoop"):
            virtual_time.current_loop()

    asyncio.run(main())


def test_time_never_goes_back() -> None:
    loop = VirtualTimeLoop()
    try:
        loop.advance(1.5)
        assert loop.time() == 1.5
        with pytest.raises(ValueError, match="never goes back"):
            loop.advance(-1)
    finally:
        loop.close()
