"""Changing a broker group's replicas online, with real processes and the operator's commands
(issue 27 items 1-2), under steady load from three producers and a consumer group:

- replace: a follower is killed (kill -9), ``ledgermq admin replica-add`` adds ``n3`` at a new
  ledger port as a learner, ``n3`` is started with ``dLegerPeers`` listing the members plus
  itself, the master promotes it once caught up (``replica-list --json`` shows it a follower),
  and ``replica-remove`` takes the dead replica out;
- grow 3 -> 5 (two adds, one at a time) and shrink 5 -> 3 (two removes).

Nothing acknowledged is lost (every acknowledged message consumed and stored where its
acknowledgement said: the failover suite's checker). These are the commands
docs/operations/membership.md shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.client import Admin, ConsumeStatus, PushConsumer
from tests.broker.test_failover_processes import GROUP, PRODUCERS, TOPIC, Run, _check, _produce

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire.message import MessageExt

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def _admin(cluster: BrokerCluster, *args: str) -> str:
    """``ledgermq admin ARGS -n NAMESRV`` as an operator types it; its stdout."""
    proc = await asyncio.create_subprocess_exec(
        *ledgermq_command("admin", *args, "-n", cluster.namesrv_addr),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"admin {' '.join(args)}: {err.decode()}{out.decode()}"
    return out.decode()


async def _replicas(cluster: BrokerCluster) -> dict[str, dict[str, object]]:
    rows = json.loads(await _admin(cluster, "replica-list", "-b", GROUP, "--json"))
    return {str(r["id"]): r for r in rows}


async def _add(cluster: BrokerCluster, node: str) -> None:
    """replica-add, start it with the members plus itself, wait for its promotion."""
    address = cluster.add_replica(GROUP, node)
    out = await _admin(cluster, "replica-add", "-b", GROUP, "--peer", f"{node}-{address}")
    assert f"{node} joined broker group broker-a as a learner" in out
    await asyncio.to_thread(cluster.start_replica, GROUP, node)
    deadline = time.monotonic() + 30
    while (await _replicas(cluster))[node]["role"] != "follower":
        assert time.monotonic() < deadline, f"{node} was never promoted"
        await asyncio.sleep(0.5)


async def _remove(cluster: BrokerCluster, node: str) -> None:
    await _admin(cluster, "replica-remove", "-b", GROUP, "--id", node)
    cluster.forget_replica(GROUP, node)


async def _replace(cluster: BrokerCluster, master: str) -> list[str]:
    victim = next(n for n in ("n0", "n1", "n2") if n != master)
    cluster.kill9(GROUP, victim)
    await _add(cluster, "n3")
    await _remove(cluster, victim)
    return sorted({"n0", "n1", "n2", "n3"} - {victim})


async def _grow_and_shrink(cluster: BrokerCluster, master: str) -> list[str]:
    await _add(cluster, "n3")
    await _add(cluster, "n4")
    five = await _replicas(cluster)
    assert sorted(str(r["role"]) for r in five.values()) == ["follower"] * 4 + ["leader"]
    leavers = [n for n in ("n0", "n1", "n2") if n != master][:2]
    for node in leavers:
        await _remove(cluster, node)
    return sorted({"n0", "n1", "n2", "n3", "n4"} - set(leavers))


async def _under_load(
    cluster: BrokerCluster, change: Callable[[BrokerCluster, str], Awaitable[list[str]]]
) -> None:
    """``change`` runs while three producers send and a consumer group consumes; then the
    failover suite's checker: nothing acknowledged lost, every message where acknowledged."""
    namesrv = cluster.namesrv_addr
    master = await asyncio.to_thread(cluster.wait_master, GROUP, 30.0)
    await asyncio.to_thread(cluster.wait_routable)
    admin = Admin(namesrv)
    await admin.start()
    try:
        await admin.create_topic(TOPIC, 4)
        await admin.wait_for_route(TOPIC)
    finally:
        await admin.close()
    run = Run()
    consumer = PushConsumer(
        "membership-consumers",
        namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        pull_batch_size=64,
        rebalance_interval_s=2.0,
    )
    consumer.subscribe(TOPIC)

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        run.consumed.extend(messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    await consumer.start()
    stop = asyncio.Event()
    producers = [asyncio.ensure_future(_produce(namesrv, run, i, stop)) for i in range(PRODUCERS)]
    loop = asyncio.get_running_loop()
    try:
        await asyncio.sleep(1.0)
        assert run.acked, "nothing was acknowledged before the change"
        expected = await change(cluster, master)
        acked_during = len(run.acked)
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*producers)
        assert len(run.acked) > acked_during, "no acknowledgement after the change"
        deadline = loop.time() + 40
        while loop.time() < deadline:
            if set(run.acked) <= {m.body for m in run.consumed}:
                break
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        for task in producers:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await consumer.shutdown()
    await _check(cluster, run)
    print(f"acked {len(run.acked)}, consumed {len(run.consumed)}, failures {run.failures}")
    members = await _replicas(cluster)
    assert sorted(members) == expected
    assert sorted(str(r["role"]) for r in members.values()) == ["follower", "follower", "leader"]


def test_replace_a_dead_replica_at_a_new_address_under_load(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    asyncio.run(asyncio.wait_for(_under_load(cluster, _replace), 150))


def test_grow_3_to_5_and_shrink_5_to_3_under_load(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    asyncio.run(asyncio.wait_for(_under_load(cluster, _grow_and_shrink), 170))
