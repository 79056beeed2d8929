"""The workloads of ``benchmarks/broker.py``, as data, and a load driver for any Python client.

Every system runs the same shapes with 1 KiB bodies: batched sends (4 producers x 64), single
sends (16 producers x 1), one sequential producer, 10k msgs/s offered (8 x 16, paced) and a
consume of what the batched workload stored. ``drive_produce`` is ``run_produce``'s loop with the
client abstracted to ``send(count)``: an awaitable that returns once ``count`` messages are
acknowledged, so a peer's client is measured exactly as ours is.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.bench.stats import LatencyRecorder, RunResult

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.bench.cpu import CpuMeter

__all__ = ["BODY_BYTES", "WORKLOADS", "Workload", "drive_produce", "result_of"]

BODY_BYTES: Final = 1024


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    producers: int = 1
    batch: int = 1
    rate: float | None = None
    """messages/s offered (None: as fast as acknowledgements allow)"""
    consume: bool = False

    @property
    def shape(self) -> str:
        if self.consume:
            return "read back the batched run"
        paced = f", paced at {self.rate:,.0f}/s" if self.rate else ""
        return f"{self.producers} x {self.batch}{paced}"


WORKLOADS: Final = (
    Workload("produce batched", producers=4, batch=64),
    Workload("produce single", producers=16, batch=1),
    Workload("sequential", producers=1, batch=1),
    Workload("latency @10k/s", producers=8, batch=16, rate=10_000),
    Workload("consume", consume=True),
)


def result_of(
    system: str,
    workload: Workload,
    *,
    messages: int,
    seconds: float,
    latencies: LatencyRecorder,
    errors: int = 0,
    meter: CpuMeter | None = None,
    clients: int | None = None,
    batch: int | None = None,
    note: str = "",
) -> RunResult:
    """A ``RunResult`` row for ``system`` (the CPU columns from ``meter`` when it ran)."""
    usage = meter.usage if meter is not None else None
    server_us, client_us = usage.per_message_us(messages) if usage else (None, None)
    return RunResult(
        system=system,
        mode=workload.name,
        clients=workload.producers if clients is None else clients,
        batch=workload.batch if batch is None else batch,
        body_bytes=BODY_BYTES,
        flush="",
        entries=messages,
        seconds=seconds,
        entries_per_s=messages / seconds if seconds > 0 else 0.0,
        p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99),
        max_ms=latencies.max_ms(),
        errors=errors,
        note=note,
        server_cpu_us=server_us,
        client_cpu_us=client_us,
    )


async def drive_produce(
    system: str,
    workload: Workload,
    senders: list[Callable[[int], Awaitable[None]]],
    *,
    duration_s: float,
    warmup_s: float = 1.0,
    meter: CpuMeter | None = None,
    errors_caught: tuple[type[BaseException], ...] = (Exception,),
) -> RunResult:
    """Run ``workload`` with one sender per producer (``len(senders) == workload.producers``).

    Each producer calls its sender with ``workload.batch`` back to back (paced at the offered
    rate when there is one); a call acknowledged inside the measured window (after ``warmup_s``,
    for ``duration_s``) counts its messages and its latency. A call that raises one of
    ``errors_caught`` counts as an error and the producer goes on.
    """
    assert len(senders) == workload.producers
    loop = asyncio.get_running_loop()
    latencies = LatencyRecorder()
    acked = 0
    errors = 0
    start = loop.time() + warmup_s
    end = start + duration_s
    interval = workload.producers * workload.batch / workload.rate if workload.rate else 0.0

    async def one(index: int, send: Callable[[int], Awaitable[None]]) -> None:
        nonlocal acked, errors
        next_at = loop.time() + (interval * index / workload.producers if interval else 0.0)
        while loop.time() < end:
            if interval:
                now = loop.time()
                if now < next_at:
                    await asyncio.sleep(next_at - now)
                next_at += interval
            sent = time.perf_counter()
            try:
                await send(workload.batch)
            except errors_caught:
                errors += 1
                await asyncio.sleep(0.01)
                continue
            done = loop.time()
            if start <= done <= end:
                latencies.record(time.perf_counter() - sent)
                acked += workload.batch

    async def window() -> None:
        assert meter is not None
        await asyncio.sleep(max(0.0, start - loop.time()))
        meter.start()
        await asyncio.sleep(max(0.0, end - loop.time()))
        meter.stop()

    tasks = [one(i, send) for i, send in enumerate(senders)]
    if meter is not None:
        tasks.append(window())
    await asyncio.gather(*tasks)
    note = f"offered {workload.rate:,.0f} msgs/s" if workload.rate else ""
    return result_of(
        system,
        workload,
        messages=acked,
        seconds=duration_s,
        latencies=latencies,
        errors=errors,
        meter=meter,
        note=note,
    )
