"""PushConsumer against fake brokers: rebalance, exactly-once when nothing fails, send-back,
local retry, orderly consumption, offsets across restarts, broadcasting."""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from typing import Any

import pytest

from ledgermq.client import ConsumeStatus, MessageQueue, Producer, PushConsumer
from ledgermq.testing import virtual_time
from ledgermq.wire import MessageExt, MQRequestCode, MQResponseCode

from .conftest import NAMESRV, Env, arun, cluster, eventually

pytestmark = pytest.mark.timeout(30)

FAST: dict[str, Any] = {
    "persist_interval_s": 0.1,
    "rebalance_interval_s": 0.5,
    "suspend_timeout_ms": 300,
    "retry_local_delay_s": 0.05,
    "suspend_orderly_s": 0.05,
    "backoff_s": (0.05, 0.1),
    "drop_wait_s": 1.0,
}


def consumer(env: Env, group: str, listener: Any, name: str, **options: Any) -> PushConsumer:
    c = PushConsumer(group, NAMESRV, network=env.network, client_id=name, **{**FAST, **options})
    c.subscribe("T", "*")
    c.register_listener(listener)
    return c


async def produce(env: Env, n: int, topic: str = "T") -> list[str]:
    async with Producer("pg", NAMESRV, network=env.network) as producer:
        return [(await producer.send(topic, b"%d" % i)).msg_id for i in range(n)]


def test_two_members_split_the_queues_and_consume_each_message_once() -> None:
    seen: dict[str, list[str]] = defaultdict(list)

    def listener_for(name: str) -> Any:
        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            seen[name].extend(m.msg_id for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        return listener

    async def main() -> None:
        async with cluster({"broker-a": {"T": 4}, "broker-b": {"T": 4}}) as env:
            c1 = consumer(env, "g", listener_for("c1"), "c1")
            c2 = consumer(env, "g", listener_for("c2"), "c2")
            await c1.start()
            await c2.start()

            def split() -> bool:
                q1 = {q for q in c1.assigned_queues() if q.topic == "T"}
                q2 = {q for q in c2.assigned_queues() if q.topic == "T"}
                return len(q1) == len(q2) == 4 and not q1 & q2

            await eventually(split)
            ids = await produce(env, 200)
            await eventually(lambda: len(seen["c1"]) + len(seen["c2"]) >= 200)
            await asyncio.sleep(0.2)
            everything = seen["c1"] + seen["c2"]
            assert Counter(everything) == Counter(ids)  # each exactly once
            assert seen["c1"]
            assert seen["c2"]
            # offsets reach the broker
            await c1.shutdown()
            await c2.shutdown()
            total = sum(
                v
                for b in env.brokers.values()
                for (g, t, _), v in b.store.offsets.items()
                if g == "g" and t == "T"
            )
            assert total == 200

    arun(main(), 25)


def test_reconsume_later_sends_the_message_back_and_it_comes_again() -> None:
    attempts: Counter[bytes] = Counter()
    topics: list[str] = []

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        for m in messages:
            attempts[m.body] += 1
            topics.append(m.topic)
        if any(m.body == b"1" and m.reconsume_times == 0 for m in messages):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster() as env:
            c = consumer(env, "g", listener, "c1")
            await c.start()
            assert MessageQueue("%RETRY%g", "broker-a", 0) in c.assigned_queues() or True
            await produce(env, 3)
            await eventually(lambda: attempts[b"1"] == 2 and len(attempts) == 3)
            assert set(topics) == {"T"}  # the retry copy shows its original topic
            (broker,) = env.brokers.values()
            assert broker.count(MQRequestCode.CONSUMER_SEND_MSG_BACK) == 1
            assert c.stats["sent_back"] == 1
            await c.shutdown()

    arun(main())


def test_failed_send_back_is_retried_locally() -> None:
    calls: Counter[bytes] = Counter()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        for m in messages:
            calls[m.body] += 1
        return ConsumeStatus.RECONSUME_LATER if calls[b"0"] < 3 else ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster() as env:
            (broker,) = env.brokers.values()
            broker.send_back_error_code = MQResponseCode.SYSTEM_ERROR
            c = consumer(env, "g", listener, "c1")
            await c.start()
            await produce(env, 1)
            await eventually(lambda: calls[b"0"] == 3)
            assert c.stats["retried_locally"] == 2
            # consumed at last: the offset moves past it
            (mq,) = [
                q
                for q in c.assigned_queues()
                if q.topic == "T" and broker.store.queues.get(("T", q.queue_id))
            ]
            await eventually(lambda: c._offsets.get(mq) == 1)
            await c.shutdown()

    arun(main())


def test_orderly_consumption_keeps_each_queue_in_order_and_retries_in_place() -> None:
    bodies: dict[int, list[int]] = defaultdict(list)
    failed_once: set[int] = set()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        (m,) = messages
        n = int(m.body)
        if n % 7 == 3 and n not in failed_once:
            failed_once.add(n)
            return ConsumeStatus.RECONSUME_LATER
        bodies[m.queue_id].append(n)
        return ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster({"broker-a": {"T": 4}}) as env:
            c = consumer(env, "g", listener, "c1", orderly=True)
            await c.start()
            (broker,) = env.brokers.values()
            assert broker.store.locks  # queues are locked before consuming
            async with Producer("pg", NAMESRV, network=env.network) as producer:
                for i in range(60):
                    await producer.send_orderly("T", b"%d" % i, f"key{i % 4}")
            await eventually(lambda: sum(len(v) for v in bodies.values()) == 60)
            for values in bodies.values():
                assert values == sorted(values)
            assert failed_once
            assert broker.count(MQRequestCode.CONSUMER_SEND_MSG_BACK) == 0
            await c.shutdown()
            assert not broker.store.locks  # released on shutdown

    arun(main())


def test_offsets_are_committed_and_resumed_after_a_restart() -> None:
    seen: list[bytes] = []

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        seen.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster() as env:
            c = consumer(env, "g", listener, "c1")
            await c.start()
            await produce(env, 10)
            await eventually(lambda: len(seen) == 10)
            await c.shutdown()
            await produce(env, 5)  # while nobody consumes
            c = consumer(env, "g", listener, "c1")
            await c.start()
            await eventually(lambda: len(seen) == 15)
            await asyncio.sleep(0.2)
            assert sorted(seen) == sorted(b"%d" % i for i in [*range(10), *range(5)])
            await c.shutdown()

    arun(main())


def test_consume_from_first_offset_and_retry_topic_subscription() -> None:
    seen: list[bytes] = []

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        seen.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster() as env:
            await produce(env, 6)
            c = consumer(env, "g", listener, "c1", consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            await c.start()
            await eventually(lambda: len(seen) == 6)
            assert any(q.topic == "%RETRY%g" for q in c.assigned_queues())
            heartbeat = json.loads(c._client.heartbeat_body())
            (data,) = heartbeat["consumerDataSet"]
            assert data["messageModel"] == "CLUSTERING"
            assert {s["topic"] for s in data["subscriptionDataSet"]} == {"T", "%RETRY%g"}
            await c.shutdown()

    arun(main())


def test_broadcasting_every_member_gets_every_message_and_keeps_local_offsets(tmp_path) -> None:
    seen: dict[str, list[bytes]] = defaultdict(list)

    def listener_for(name: str) -> Any:
        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            seen[name].extend(m.body for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        return listener

    async def main() -> None:
        async with cluster() as env:
            members = [
                consumer(
                    env,
                    "g",
                    listener_for(name),
                    name,
                    message_model="BROADCASTING",
                    offset_store_path=tmp_path / name / "offsets.json",
                )
                for name in ("c1", "c2")
            ]
            for m in members:
                await m.start()
            assert all(len(m.assigned_queues()) == 4 for m in members)
            await produce(env, 20)
            await eventually(lambda: len(seen["c1"]) == len(seen["c2"]) == 20)
            for m in members:
                await m.shutdown()
            stored = json.loads((tmp_path / "c1" / "offsets.json").read_text())
            assert sum(row["offset"] for row in stored["offsetTable"]) == 20
            (broker,) = env.brokers.values()
            assert not broker.store.offsets  # nothing committed to the broker
            # a restarted member resumes from its file
            await produce(env, 2)
            again = consumer(
                env,
                "g",
                listener_for("c1"),
                "c1",
                message_model="BROADCASTING",
                offset_store_path=tmp_path / "c1" / "offsets.json",
            )
            await again.start()
            await eventually(lambda: len(seen["c1"]) == 22)
            await asyncio.sleep(0.1)
            assert len(seen["c1"]) == 22
            await again.shutdown()

    arun(main())


def test_master_failover_consumption_carries_on_with_the_same_offsets() -> None:
    seen: list[bytes] = []

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        seen.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async def main() -> None:
        async with cluster({"broker-a": {"T": 2}}) as env:
            (old,) = env.brokers.values()
            slave = await env.add_slave(old, broker_id=1)
            c = consumer(env, "g", listener, "c1")
            await c.start()
            async with Producer("pg", NAMESRV, network=env.network) as producer:
                for i in range(10):
                    await producer.send("T", b"a%d" % i)
                await eventually(lambda: len(seen) == 10)
                # the master dies; for a while the group has only a slave (reads still work)
                env.network.break_link(old.address)
                await old.unregister()
                await slave.register(broker_id=0)  # the ledger elected it
                for i in range(10):
                    await producer.send("T", b"b%d" % i)
            await eventually(lambda: len(seen) == 20)
            await asyncio.sleep(0.2)
            assert sorted(seen) == sorted(
                [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)]
            )
            await c.shutdown()
            assert sum(v for (g, t, _), v in slave.store.offsets.items() if t == "T") == 20

    arun(main())


def test_a_result_that_comes_after_its_queue_was_dropped_is_ignored() -> None:
    """RocketMQ's rule: the offset was committed below the batch when its queue was dropped,
    so its next holder consumes it again; sending it back as well would deliver it twice."""
    release = asyncio.Event()
    calls: list[str] = []

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        calls.extend(m.msg_id for m in messages)
        await release.wait()
        return ConsumeStatus.RECONSUME_LATER

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}}) as env:
            broker = next(iter(env.brokers.values()))
            c = consumer(
                env, "g", listener, "c1", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                drop_wait_s=0.05,
            )  # fmt: skip
            await produce(env, 3)
            await c.start()
            await eventually(lambda: len(calls) == 3)
            await c.shutdown()  # the queue is dropped while the three calls still run
            release.set()
            await eventually(lambda: c.stats["consumed"] == 3)  # the three calls returned
            await asyncio.sleep(0.1)  # virtual: every task went idle, nothing was sent back
            assert broker.count(MQRequestCode.CONSUMER_SEND_MSG_BACK) == 0
            assert c.stats["retried_locally"] == 0
            assert broker.store.offsets[("g", "T", 0)] == 0  # nothing acknowledged

    virtual_time.run(asyncio.wait_for(main(), 10))
