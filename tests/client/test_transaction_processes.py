"""Our ``TransactionProducer`` end to end against a real 3-replica group (issue 16 section 3):
commit delivered once, rollback never, an UNKNOWN transaction settled by the broker's check-back
(commit and rollback), and a kill -9 of the master with half messages open: the new master
checks them back, and what the producer committed is delivered once, what it rolled back never.

Real processes (``BrokerCluster``) with a short ``transactionTimeOut`` and
``transactionCheckInterval``; the producer heartbeats every second so that a new master soon
knows where to send its check-backs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, LocalTransactionState, PullConsumer, TransactionProducer

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.client import TransactionalMessage
    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire.message import MessageExt

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "broker-a"
TOPIC = "TxnTopic"
SETTINGS = {"transactionTimeOut": "1000", "transactionCheckInterval": "300"}

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOWN = LocalTransactionState.UNKNOWN


def _checker_of(decisions: dict[bytes, LocalTransactionState]) -> Callable[
        [MessageExt], LocalTransactionState]:  # fmt: skip
    """A checker that answers what ``decisions`` says for the body (UNKNOWN until it is set),
    as a producer that looks its local transaction up."""

    def check(message: MessageExt) -> LocalTransactionState:
        assert message.topic == TOPIC
        return decisions.get(message.body, UNKNOWN)

    return check


async def _consumed(namesrv: str) -> list[bytes]:
    """Every message stored in the topic's queues (each copy), read from the start."""
    reader = PullConsumer("txn-checker", namesrv)
    await reader.start()
    bodies: list[bytes] = []
    try:
        for queue in await reader.fetch_queues(TOPIC):
            offset = await reader.min_offset(queue)
            high = await reader.max_offset(queue)
            while offset < high:
                result = await reader.pull(queue, offset, max_nums=256)
                bodies += [m.body for m in result.messages]
                offset = result.next_begin_offset
    finally:
        await reader.shutdown()
    return bodies


async def _wait_for(namesrv: str, expected: list[bytes], timeout_s: float = 40.0) -> list[bytes]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        bodies = await _consumed(namesrv)
        if sorted(bodies) == sorted(expected) or loop.time() > deadline:
            return bodies
        await asyncio.sleep(0.5)


async def _prepare(cluster: BrokerCluster) -> None:
    await asyncio.to_thread(cluster.wait_master, GROUP, 30.0)
    await asyncio.to_thread(cluster.wait_routable)
    admin = Admin(cluster.namesrv_addr)
    await admin.start()
    try:
        await admin.create_topic(TOPIC, 2)
        await admin.wait_for_route(TOPIC)
    finally:
        await admin.close()


def _producer(namesrv: str, decisions: dict[bytes, LocalTransactionState]) -> TransactionProducer:
    return TransactionProducer(
        "txn-producer", namesrv, checker=_checker_of(decisions), retry_times=4,
        heartbeat_interval_s=1.0, route_refresh_interval_s=1.0,
    )  # fmt: skip


def _executor(state: LocalTransactionState) -> Callable[[TransactionalMessage, object],
                                                        LocalTransactionState]:  # fmt: skip
    def run(message: TransactionalMessage, arg: object) -> LocalTransactionState:
        assert message.topic == TOPIC
        assert arg == "arg"
        return state

    return run


def test_commit_rollback_and_check_back(broker_clusters: Callable[..., BrokerCluster]) -> None:
    cluster = broker_clusters(replicas=3, extra_settings=SETTINGS)

    async def main() -> None:
        await _prepare(cluster)
        decisions: dict[bytes, LocalTransactionState] = {}
        producer = _producer(cluster.namesrv_addr, decisions)
        await producer.start()
        try:
            send = producer.send_message_in_transaction
            committed = await send(TOPIC, b"committed", _executor(COMMIT), "arg")
            assert committed.local_state is COMMIT
            assert committed.end_error is None
            rolled = await send(TOPIC, b"rolled-back", _executor(ROLLBACK), "arg")
            assert rolled.end_error is None
            # visible at once: the end is answered once the commit is stored
            assert await _consumed(cluster.namesrv_addr) == [b"committed"]
            # undecided: the broker checks back; the checker decides later
            await send(TOPIC, b"late-commit", _executor(UNKNOWN), "arg")
            await send(TOPIC, b"late-rollback", _executor(UNKNOWN), "arg")

            def boom(message: TransactionalMessage, arg: object) -> LocalTransactionState:
                raise RuntimeError("the local transaction failed")

            crashed = await send(TOPIC, b"crashed", boom, "arg")
            assert crashed.local_state is UNKNOWN  # an exception is UNKNOWN, as in RocketMQ
            await asyncio.sleep(1.5)
            assert sorted(await _consumed(cluster.namesrv_addr)) == [b"committed"]
            decisions.update({b"late-commit": COMMIT, b"late-rollback": ROLLBACK})
            decisions[b"crashed"] = ROLLBACK
            bodies = await _wait_for(cluster.namesrv_addr, [b"committed", b"late-commit"])
            assert sorted(bodies) == [b"committed", b"late-commit"]
            assert producer.checks_answered.get(COMMIT, 0) >= 1
            assert producer.checks_answered.get(ROLLBACK, 0) >= 2
            await asyncio.sleep(2.5)  # more passes change nothing
            assert sorted(await _consumed(cluster.namesrv_addr)) == [b"committed", b"late-commit"]
        finally:
            await producer.shutdown()

    asyncio.run(asyncio.wait_for(main(), 200))


def test_kill_9_of_the_master_with_half_messages_open(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3, extra_settings=SETTINGS)

    async def main() -> None:
        await _prepare(cluster)
        decisions: dict[bytes, LocalTransactionState] = {}
        producer = _producer(cluster.namesrv_addr, decisions)
        await producer.start()
        try:
            send = producer.send_message_in_transaction
            before = [b"before-%d" % i for i in range(3)]
            for body in before:
                await send(TOPIC, body, _executor(COMMIT), "arg")
            await send(TOPIC, b"before-rolled-back", _executor(ROLLBACK), "arg")
            open_bodies = [b"open-%d" % i for i in range(10)]
            for body in open_bodies:
                await send(TOPIC, body, _executor(UNKNOWN), "arg")
            master = await asyncio.to_thread(cluster.wait_master, GROUP, 10.0)
            cluster.kill9(GROUP, master)
            # the producer decides while the group elects a new master
            commit = [b for i, b in enumerate(open_bodies) if i % 2 == 0]
            for body in open_bodies:
                decisions[body] = COMMIT if body in commit else ROLLBACK
            new_master = await asyncio.to_thread(cluster.wait_master, GROUP, 30.0)
            assert new_master != master
            expected = before + commit
            bodies = await _wait_for(cluster.namesrv_addr, expected, timeout_s=60.0)
            assert sorted(bodies) == sorted(expected), (
                f"delivered {sorted(bodies)}, expected each of {sorted(expected)} once"
            )
            # the new master takes new transactions after the old ones
            after = await send(TOPIC, b"after", _executor(COMMIT), "arg")
            assert after.end_error is None
            assert after.send_result.queue_offset == len(before) + 1 + len(open_bodies)
            await send(TOPIC, b"after-rolled-back", _executor(ROLLBACK), "arg")
            expected.append(b"after")
            await asyncio.sleep(2.0)  # further check passes deliver nothing more
            assert sorted(await _consumed(cluster.namesrv_addr)) == sorted(expected)
        finally:
            await producer.shutdown()

    asyncio.run(asyncio.wait_for(main(), 220))
