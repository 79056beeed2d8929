"""``ledgermq bench produce | consume``: throughput and latency of a running cluster.

``produce`` keeps ``producers`` sends in flight (each a batch of ``batch`` messages when batch > 1,
SEND_BATCH_MESSAGE) for ``duration`` seconds, or paces them at ``rate`` messages/s to measure
latency under a given load; every send is acknowledged by a quorum before it counts. ``consume``
pulls a topic's queues as fast as it can, from each queue's first offset, until it has read what
was there when it started (or ``duration`` passes). Both print a table and can write JSON.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ledgermq.bench.stats import LatencyRecorder, Progress, RunResult
from ledgermq.client import Message, Producer, PullConsumer
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ledgermq.bench.cpu import CpuMeter
    from ledgermq.client import Credentials, MessageQueue, TlsClientConfig

__all__ = ["ConsumeOptions", "ProduceOptions", "fill_topic", "run_consume", "run_produce"]


@dataclass(frozen=True)
class ProduceOptions:
    namesrv_addr: str
    topic: str = "BenchTopic"
    body_bytes: int = 1024
    batch: int = 1
    producers: int = 16
    duration_s: float = 10.0
    warmup_s: float = 1.0
    rate: float | None = None
    """Messages per second to offer (None: as fast as acknowledgements allow)."""
    mode: str = "produce"
    credentials: Credentials | None = None
    """Sign every request (a cluster with ACL on)."""
    tls: TlsClientConfig | None = None
    """Connect with TLS (a cluster whose ports serve it)."""


@dataclass(frozen=True)
class ConsumeOptions:
    namesrv_addr: str
    topic: str = "BenchTopic"
    duration_s: float = 30.0
    pull_batch: int = 256
    max_messages: int | None = None
    mode: str = "consume"
    credentials: Credentials | None = None
    tls: TlsClientConfig | None = None


async def fill_topic(
    namesrv_addr: str,
    topic: str,
    messages: int,
    *,
    body_bytes: int = 1024,
    producers: int = 4,
    batch: int = 64,
    client_name: str = "ledgermq-bench-fill",
) -> float:
    """Send ``messages`` messages of ``body_bytes`` to ``topic`` (which must exist), in batches
    of ``batch`` from ``producers`` producers; the msgs/s it took.

    The set-up of the read benchmarks (a topic of known size to read back), unlike
    ``run_produce``, which measures for a duration.
    """
    body = b"x" * body_bytes
    batches = iter(range(-(-messages // batch)))

    async def one(index: int) -> None:
        producer = Producer(f"{client_name}-{index}", namesrv_addr, send_timeout_s=10.0)
        await producer.start()
        try:
            for n in batches:
                count = min(batch, messages - n * batch)
                result = await producer.send_batch(topic, [Message(body)] * count)
                if not result.ok:
                    raise LedgerMQError(f"filling {topic}: a batch was not stored ({result})")
        finally:
            await producer.shutdown()

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(producers)))
    return messages / (time.perf_counter() - start)


async def _meter_window(meter: CpuMeter, start: float, end: float) -> None:
    """Read ``meter`` at loop time ``start`` and again at ``end`` (the measured window)."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start - loop.time()))
    meter.start()
    await asyncio.sleep(max(0.0, end - loop.time()))
    meter.stop()


def _cpu_per_message(meter: CpuMeter | None, messages: int) -> tuple[float | None, float | None]:
    if meter is None or meter.usage is None:
        return None, None
    return meter.usage.per_message_us(messages)


STATUS_INTERVAL_S: Final = 1.0
"""How often a workload prints its status line on a terminal."""


async def _status_lines(
    progress: Progress,
    mode: str,
    start: float,
    end: float,
    counts: Callable[[], tuple[int, int]],
) -> None:
    """From ``start`` to ``end`` (loop time), a status line each second: messages so far, the
    rate over the last second, errors; printed even when nothing moves (a stalled cluster shows
    as 0 msgs/s, not as silence). ``counts``: (messages, errors) now."""
    if not progress.enabled:
        return
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start - loop.time()))
    before, tick = counts()[0], start
    while tick + STATUS_INTERVAL_S <= end:
        tick += STATUS_INTERVAL_S
        await asyncio.sleep(max(0.0, tick - loop.time()))
        done, errors = counts()
        rate = (done - before) / STATUS_INTERVAL_S
        before = done
        progress.status(
            f"{mode}: {tick - start:4.0f} s  {done:,} messages  {rate:,.0f} msgs/s in the "
            f"last second  {errors:,} errors"
        )


def _status_task(
    progress: Progress | None,
    mode: str,
    start: float,
    end: float,
    counts: Callable[[], tuple[int, int]],
) -> list[Coroutine[Any, Any, None]]:
    """``_status_lines`` to run beside a workload's tasks; none without ``progress``."""
    return [] if progress is None else [_status_lines(progress, mode, start, end, counts)]


async def run_produce(
    options: ProduceOptions, progress: Progress | None = None, *, meter: CpuMeter | None = None
) -> RunResult:
    """Run one produce workload; with ``meter``, also the CPU per acknowledged message over the
    measured window (servers summed, and the load generator)."""
    producer = Producer(
        "ledgermq-bench-producer",
        options.namesrv_addr,
        send_timeout_s=10.0,
        credentials=options.credentials,
        tls=options.tls,
    )
    await producer.start()
    body = b"x" * options.body_bytes
    batch = [Message(body) for _ in range(options.batch)]
    latencies = LatencyRecorder()
    acked = 0
    errors = 0
    loop = asyncio.get_running_loop()
    # Create the topic and warm the route and connections before the clock starts.
    await producer.send(options.topic, body)
    start = loop.time() + options.warmup_s
    end = start + options.duration_s
    interval = (
        options.producers * options.batch / options.rate if options.rate else 0.0
    )  # seconds between sends of one producer at the offered rate

    async def one_producer(index: int) -> None:
        nonlocal acked, errors
        next_at = loop.time() + (interval * index / options.producers if interval else 0.0)
        while True:
            now = loop.time()
            if now >= end:
                return
            if interval:
                if now < next_at:
                    await asyncio.sleep(next_at - now)
                next_at += interval
            sent = time.perf_counter()
            try:
                if options.batch > 1:
                    await producer.send_batch(options.topic, batch)
                else:
                    await producer.send(options.topic, body)
            except LedgerMQError:
                errors += 1
                continue
            done = loop.time()
            if start <= done <= end:
                latencies.record(time.perf_counter() - sent)
                acked += options.batch
            if progress is not None and done >= start:
                progress.update(options.mode, done - start, options.duration_s, acked)

    tasks = [one_producer(i) for i in range(options.producers)] + _status_task(
        progress, options.mode, start, end, lambda: (acked, errors)
    )
    if meter is not None:
        tasks.append(_meter_window(meter, start, end))
    try:
        await asyncio.gather(*tasks)
    finally:
        await producer.shutdown()
        if progress is not None:
            progress.finish()
    seconds = options.duration_s
    server_us, client_us = _cpu_per_message(meter, acked)
    return RunResult(
        system="ledgermq",
        mode=options.mode,
        clients=options.producers,
        batch=options.batch,
        body_bytes=options.body_bytes,
        flush="",
        entries=acked,
        seconds=seconds,
        entries_per_s=acked / seconds,
        p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99),
        max_ms=latencies.max_ms(),
        errors=errors,
        note=f"offered {options.rate:,.0f} msgs/s" if options.rate else "",
        server_cpu_us=server_us,
        client_cpu_us=client_us,
    )


async def run_consume(
    options: ConsumeOptions, progress: Progress | None = None, *, meter: CpuMeter | None = None
) -> RunResult:
    """Read a topic from its start; with ``meter``, also the CPU per consumed message."""
    consumer = PullConsumer(
        "ledgermq-bench-consumer",
        options.namesrv_addr,
        credentials=options.credentials,
        tls=options.tls,
    )
    await consumer.start()
    latencies = LatencyRecorder()
    received = 0
    try:
        queues = await consumer.fetch_queues(options.topic)
        bounds = {q: (await consumer.min_offset(q), await consumer.max_offset(q)) for q in queues}
        total = sum(high - low for low, high in bounds.values())
        target = min(total, options.max_messages) if options.max_messages else total
        loop = asyncio.get_running_loop()
        start = loop.time()
        end = start + options.duration_s

        async def drain(queue: MessageQueue, offset: int, high: int) -> None:
            nonlocal received
            while offset < high and loop.time() < end and received < target:
                sent = time.perf_counter()
                result = await consumer.pull(queue, offset, max_nums=options.pull_batch)
                latencies.record(time.perf_counter() - sent)
                received += len(result.messages)
                if result.next_begin_offset <= offset:
                    return
                offset = result.next_begin_offset
                if progress is not None:
                    progress.update(options.mode, loop.time() - start, options.duration_s, received)

        if meter is not None:
            meter.start()
        status = (
            asyncio.create_task(
                _status_lines(progress, options.mode, start, end, lambda: (received, 0))
            )
            if progress is not None
            else None
        )
        try:
            await asyncio.gather(*(drain(q, low, high) for q, (low, high) in bounds.items()))
        finally:
            if status is not None:
                status.cancel()
        seconds = max(loop.time() - start, 1e-9)
        if meter is not None:
            meter.stop()
    finally:
        await consumer.shutdown()
        if progress is not None:
            progress.finish()
    server_us, client_us = _cpu_per_message(meter, received)
    return RunResult(
        system="ledgermq",
        mode=options.mode,
        clients=len(bounds),
        batch=options.pull_batch,
        body_bytes=0,
        flush="",
        entries=received,
        seconds=seconds,
        entries_per_s=received / seconds,
        p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99),
        max_ms=latencies.max_ms(),
        errors=0,
        note=f"{received:,} of {total:,} messages in {len(bounds)} queues",
        server_cpu_us=server_us,
        client_cpu_us=client_us,
    )
