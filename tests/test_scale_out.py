"""Scale out and decommission under load, real processes (issue 27 item 3): a broker group joins
a running cluster, ``admin topic-update -b`` spreads a topic onto it and the running producer
and consumer use it within seconds; then the old group is drained (``wipe-write-perm``, the
consumer reads its queues to the end) and stopped, and leaves the routes. Every acknowledged
message is consumed; no send fails plainly.

The figures (seconds from the command's return to the first acknowledged send / first consumed
message on the new group) are printed; docs/operations/scaling-out.md quotes them.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.client import ConsumeStatus, Producer, PushConsumer
from ledgermq.errors import LedgerMQError, SendOutcomeUnknownError
from ledgermq.testing.broker_cluster import BrokerCluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.wire import MessageExt

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

TOPIC = "Scale"


def ledgermq(*args: str) -> str:
    """``python -m ledgermq ARGS`` as an operator runs it; its output (it must exit 0)."""
    done = subprocess.run(
        ledgermq_command(*args), env=child_env(), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class Traffic:
    """A producer sending every 20 ms and a push consumer, both recorded."""

    acked: dict[str, tuple[str, float]] = field(default_factory=dict)
    """msg id -> (broker group, monotonic time of the acknowledgement)"""
    consumed: dict[str, tuple[str, float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    """plain failures (not stored)"""
    maybe: list[str] = field(default_factory=list)
    """SendOutcomeUnknownError (may be stored)"""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    group_of: dict[str, str] = field(default_factory=dict)
    """store host (a replica's address) -> its broker group"""

    def first_after(self, records: dict[str, tuple[str, float]], group: str, t: float) -> float:
        times = [at for g, at in records.values() if g == group and at >= t]
        return min(times) - t if times else float("inf")

    async def produce(self, producer: Producer) -> None:
        seq = 0
        while not self.stop.is_set():
            try:
                result = await producer.send(TOPIC, b"m%d" % seq)
            except SendOutcomeUnknownError as exc:
                self.maybe.append(str(exc))
            except LedgerMQError as exc:
                self.failed.append(str(exc))
            else:
                self.acked[result.msg_id] = (result.message_queue.broker_name, time.monotonic())
            seq += 1
            await asyncio.sleep(0.02)

    def listener(self, messages: list[MessageExt]) -> ConsumeStatus:
        for m in messages:
            group = self.group_of.get(m.store_host, m.store_host)
            self.consumed.setdefault(m.msg_id, (group, time.monotonic()))
        return ConsumeStatus.CONSUME_SUCCESS


def test_a_group_joins_takes_traffic_and_another_drains_and_leaves(tmp_path: Path) -> None:
    cluster = BrokerCluster(tmp_path, replicas=1, groups=2, start=False)
    try:
        cluster.start(only=["broker-a"])
        cluster.wait_master("broker-a")
        ns = cluster.namesrv_addr
        ledgermq("admin", "-n", ns, "topic-create", "-t", TOPIC, "-q", "2", "-b", "broker-a")
        asyncio.run(asyncio.wait_for(_scenario(cluster, ns), 120))
    finally:
        cluster.close()


async def _scenario(cluster: BrokerCluster, ns: str) -> None:
    traffic = Traffic()
    traffic.group_of = {cluster.address(g, "n0"): g for g in ("broker-a", "broker-b")}
    producer = Producer("scale-p", ns, send_timeout_s=2.0)
    consumer = PushConsumer(
        "scale-c", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        persist_interval_s=0.5,
    )  # fmt: skip
    consumer.subscribe(TOPIC)
    consumer.register_listener(traffic.listener)
    await producer.start()
    await consumer.start()
    sending = asyncio.get_running_loop().create_task(traffic.produce(producer))
    try:
        await asyncio.sleep(1.0)
        # 1. a new group joins the running cluster; the topic spreads onto it
        await asyncio.to_thread(cluster.start_replica, "broker-b", "n0")
        await asyncio.to_thread(cluster.wait_master, "broker-b")
        out = await asyncio.to_thread(
            ledgermq, "admin", "-n", ns, "topic-update", "-t", TOPIC, "-q", "2", "-b", "broker-b"
        )
        expanded = time.monotonic()
        assert f"topic {TOPIC} (2 queues) on broker-b" in out
        await _until(lambda: traffic.first_after(traffic.consumed, "broker-b", expanded) < 99)
        send_s = traffic.first_after(traffic.acked, "broker-b", expanded)
        consume_s = traffic.first_after(traffic.consumed, "broker-b", expanded)
        print(f"\nexpansion: first send on broker-b after {send_s:.2f} s, first consumed after "
              f"{consume_s:.2f} s")  # fmt: skip
        assert send_s < 3.0  # the goal is 2 s; it was 9.8-12.9 s
        assert consume_s < 4.0
        # 2. broker-a is drained: no more writes, its queues read to the end, then it leaves
        await asyncio.to_thread(ledgermq, "admin", "-n", ns, "wipe-write-perm", "-b", "broker-a")
        wiped = time.monotonic()
        await asyncio.sleep(2.0)
        late = [at - wiped for g, at in traffic.acked.values() if g == "broker-a" and at > wiped]
        print(f"writes to broker-a went on for {max(late, default=0.0):.2f} s after the wipe")
        assert max(late, default=0.0) < 2.0
        on_a = {m for m, (g, _) in traffic.acked.items() if g == "broker-a"}
        await _until(lambda: on_a <= traffic.consumed.keys())
        await asyncio.to_thread(cluster.terminate, "broker-a", "n0")
        deadline = time.monotonic() + 20.0  # it leaves the routes
        while await asyncio.to_thread(_groups, cluster) != {"broker-b"}:
            assert time.monotonic() < deadline, "broker-a did not leave the routes"
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # and the traffic goes on without broker-a
    finally:
        traffic.stop.set()
        await sending
    await _until(lambda: traffic.acked.keys() <= traffic.consumed.keys())
    await consumer.shutdown()
    await producer.shutdown()
    assert not traffic.failed, traffic.failed[:3]
    assert not traffic.maybe, traffic.maybe[:3]
    print(f"{len(traffic.acked)} acknowledged, all consumed")
    # 3. a shrink of the topic's queues drains first: -q 1 at once is refused with the reason
    refused = await asyncio.to_thread(
        subprocess.run,
        ledgermq_command("admin", "-n", ns, "topic-update", "-t", TOPIC, "-q", "1"),
        env=child_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "shrink the write count first" in refused.stderr
    assert "Traceback" not in refused.stderr
    out = await asyncio.to_thread(
        ledgermq, "admin", "-n", ns, "topic-update", "-t", TOPIC, "-w", "1"
    )
    assert f"topic {TOPIC} (2 read / 1 write queues) on broker-b" in out
    out = await asyncio.to_thread(
        ledgermq, "admin", "-n", ns, "topic-update", "-t", TOPIC, "-r", "1"
    )
    assert f"topic {TOPIC} (1 queues) on broker-b" in out  # queue 1 was consumed to its end


def _groups(cluster: BrokerCluster) -> set[str]:
    route = cluster.route(TOPIC)
    return set() if route is None else {q["brokerName"] for q in route["queueDatas"]}


async def _until(predicate: object, timeout_s: float = 20.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
