"""Issue 28 item 8: ``ledgermq bench`` on a terminal prints a status line each second (messages,
the last second's rate, errors), also while nothing moves."""

from __future__ import annotations

import asyncio
import io
import re
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.broker import ProduceOptions, run_produce
from ledgermq.bench.stats import Progress

if TYPE_CHECKING:
    from .conftest import TcpFakeCluster

pytestmark = pytest.mark.timeout(60)

STATUS = re.compile(
    r"^produce: +(\d+) s  ([\d,]+) messages  ([\d,]+) msgs/s in the last second  (\d+) errors$"
)


def test_bench_produce_prints_a_status_line_each_second(tcp_fake_cluster: TcpFakeCluster) -> None:
    broker = tcp_fake_cluster.add_broker({"BenchTopic": 2})
    stream = io.StringIO()
    options = ProduceOptions(
        tcp_fake_cluster.addr, "BenchTopic", body_bytes=16, producers=2, duration_s=3.5,
        warmup_s=0.1, rate=200.0,
    )  # fmt: skip

    async def stall_after_a_second() -> None:
        await asyncio.sleep(1.6)  # from then on every send fails
        broker.send_error_code = 14  # SERVICE_NOT_AVAILABLE, answered at once

    async def bench() -> None:
        stall = asyncio.create_task(stall_after_a_second())
        await run_produce(options, Progress(stream=stream, force=True))
        await stall

    asyncio.run(bench())
    lines = [line.strip("\r ").strip() for line in stream.getvalue().split("\n")]
    status = [m for line in lines if (m := STATUS.match(line.rsplit("\r", 1)[-1]))]
    assert [int(m.group(1)) for m in status] == [1, 2, 3], stream.getvalue()
    assert int(m_rate(status[0])) > 0
    assert int(m_rate(status[2])) == 0  # stalled: the line still comes, saying so


def m_rate(match: re.Match[str]) -> str:
    return match.group(3).replace(",", "")
