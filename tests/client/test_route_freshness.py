"""Clients learn route changes within seconds, not at the 30 s refresh (issue 27): new queues,
a transferred leader (fault avoidance ends), a master found while the NameServers are down;
and a send that may have been stored is never reported as a plain failure."""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import ConsumeStatus, Producer, PullConsumer, PushConsumer
from ledgermq.errors import LedgerMQError, SendOutcomeUnknownError
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.route import TopicConfig

if TYPE_CHECKING:
    from ledgermq.wire import MessageExt

from .conftest import NAMESRV, arun, cluster, eventually

pytestmark = pytest.mark.timeout(20)


def _groups(producer: Producer, topic: str) -> set[str]:
    route = producer._client.cached_route(topic)
    assert route is not None
    return {q.broker_name for q in route.queue_datas}


def test_new_queues_on_another_group_are_used_within_two_seconds() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 2}}) as env:
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            assert _groups(producer, "T") == {"broker-a"}
            b = await env.add_broker("broker-b", {"T": 2})  # the topic expands onto a new group
            loop = asyncio.get_running_loop()
            started = loop.time()
            await eventually(lambda: _groups(producer, "T") == {"broker-a", "broker-b"}, 3.0)
            assert loop.time() - started < 2.0
            for i in range(4):  # round-robin over 4 queues: two of them are broker-b's
                assert (await producer.send("T", b"%d" % i)).ok
            assert b.count(MQRequestCode.SEND_MESSAGE_V2) == 2
            await producer.shutdown()

    arun(main())


class _LastChoice(random.Random):
    """Always the last candidate: the consumer asks the new group for its member list."""

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return (start if stop is None else stop) - 1


def test_a_consumer_reads_new_queues_on_a_group_that_has_not_heard_of_it() -> None:
    """The real-process scale-out: the consumer rebalanced at once on the route change, asked the
    new group for the group's members, was refused (no consumer of it online yet: the broker
    had not had a heartbeat) and gave up until the next rebalance, 20 s later."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}}) as env:
            got: list[bytes] = []

            def listener(messages: list[MessageExt]) -> ConsumeStatus:
                got.extend(m.body for m in messages)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer(
                "cg", NAMESRV, network=env.network, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                rng=_LastChoice(),
            )  # fmt: skip
            consumer.subscribe("T")
            consumer.register_listener(listener)
            await consumer.start()
            await eventually(lambda: any(q.topic == "T" for q in consumer.assigned_queues()))
            b = await env.add_broker("broker-b", {"T": 1})
            b.strict_consumer_list = True
            b.append("T", 0, b"on b", "")
            await eventually(lambda: b"on b" in got, 3.0)
            await consumer.shutdown()

    arun(main())


def test_a_group_whose_leader_moved_is_not_avoided() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}, "broker-b": {"T": 1}}) as env:
            a = next(b for b in env.brokers.values() if b.name == "broker-a")
            replica = await env.add_slave(a, broker_id=2)
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            for i in range(2):
                assert (await producer.send("T", b"%d" % i)).ok
            # transfer-leader: the replica becomes the master, the old master a slave
            await replica.register(broker_id=0)
            await a.register(broker_id=3)
            results = [await producer.send("T", b"after %d" % i) for i in range(6)]
            assert all(r.ok for r in results)
            # the group is used again at once (it was avoided for 30 s: fault_avoid_ms)
            assert replica.count(MQRequestCode.SEND_MESSAGE_V2) >= 2
            await producer.shutdown()

    arun(main())


def test_a_failure_of_the_old_master_after_the_route_named_the_new_one_is_not_held() -> None:
    """A race of the route poll: the route already names the new master when the old master's
    refusal of a send made before arrives. The failure is the old master's; the group must not
    be avoided for 30 s."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}, "broker-b": {"T": 1}}) as env:
            a = next(b for b in env.brokers.values() if b.name == "broker-a")
            replica = await env.add_slave(a, broker_id=2)
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            a.send_error_code, a.send_error_delay_s = MQResponseCode.SERVICE_NOT_AVAILABLE, 0.3
            sends = [asyncio.create_task(producer.send("T", b"%d" % i)) for i in range(2)]
            await eventually(lambda: a.count(MQRequestCode.SEND_MESSAGE_V2) == 1)
            await replica.register(broker_id=0)  # transfer-leader, while the send is in flight
            await a.register(broker_id=3)
            await producer._client.refresh_all_routes()  # the poll sees it first
            assert all(r.ok for r in await asyncio.gather(*sends))
            results = [await producer.send("T", b"after %d" % i) for i in range(4)]
            assert {r.message_queue.broker_name for r in results} == {"broker-a", "broker-b"}
            await producer.shutdown()

    arun(main())


def test_a_new_master_is_found_among_the_replicas_while_the_nameservers_are_down() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}}) as env:
            (a,) = env.brokers.values()
            replica = await env.add_slave(a, broker_id=2)
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            await env.namesrv.close()  # both NameServers down
            env.network.break_link(NAMESRV)
            replica.broker_id, a.broker_id = 0, 3  # the master changes; nobody can register
            result = await producer.send("T", b"after")
            assert result.ok
            assert replica.count(MQRequestCode.SEND_MESSAGE_V2) == 1
            # the cached route now names the new master: the next send goes there at once
            assert (await producer.send("T", b"again")).ok
            assert replica.count(MQRequestCode.SEND_MESSAGE_V2) == 2
            await producer.shutdown()

    arun(main())


def test_a_send_that_may_be_stored_is_never_a_plain_failure() -> None:
    """Attempt 1 is stored but not answered; then the group loses its master, so the later
    attempts find no route. The message was stored: it must not be reported as NoRouteError."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}}) as env:
            (a,) = env.brokers.values()
            await env.add_slave(a, broker_id=2)
            producer = Producer("pg", NAMESRV, network=env.network, send_timeout_s=0.3)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            a.swallow_sends = 1
            sending = asyncio.get_running_loop().create_task(producer.send("T", b"maybe"))
            await eventually(lambda: a.count(MQRequestCode.SEND_MESSAGE_V2) == 2)
            await a.unregister()  # the group has no master now (its slave stays)
            with pytest.raises(SendOutcomeUnknownError) as caught:
                await sending
            assert caught.value.msg_id
            assert "may be stored" in str(caught.value)
            assert len(a.store.queue("T", 0)) == 2  # it was stored indeed
            await producer.shutdown()

    arun(main())


def test_a_master_elected_after_the_first_probe_is_detected_while_the_nameservers_are_down() -> (
    None
):
    """The real-process trial: the first send refused by the old master came while the group
    was still electing, so no member took it, and the group was avoided for 30 s."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}, "broker-b": {"T": 1}}) as env:
            a = next(b for b in env.brokers.values() if b.name == "broker-a")
            replica = await env.add_slave(a, broker_id=2)
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            await env.namesrv.close()
            env.network.break_link(NAMESRV)
            a.broker_id = 3  # the master steps down; no member is master yet
            for i in range(4):  # one of them meets broker-a's refusal and goes to broker-b
                assert (await producer.send("T", b"%d" % i)).ok
            replica.broker_id = 0  # elected
            await asyncio.sleep(1.2)  # the members are asked every 0.5 s
            results = [await producer.send("T", b"after %d" % i) for i in range(4)]
            assert {r.message_queue.broker_name for r in results} == {"broker-a", "broker-b"}
            await producer.shutdown()

    arun(main())


def test_a_send_to_a_queue_the_write_count_just_dropped_goes_to_another() -> None:
    """``topic-update -w`` shrinks the write count; a producer whose route is a second old
    sends to a dropped queue, which the broker refuses (nothing stored). That was a failed
    send; now the route is looked up again and the message goes to a queue that remains."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 2}}) as env:
            (a,) = env.brokers.values()
            a.strict_queues = True
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            a.store.topics["T"] = TopicConfig("T", 2, 1)  # -w 1: queue 1 is drained, not written
            await a.register()
            results = [await producer.send("T", b"%d" % i) for i in range(3)]
            assert {r.message_queue.queue_id for r in results} == {0}
            await producer.shutdown()

    arun(main())


def test_a_consumer_commits_to_a_new_master_found_while_the_nameservers_are_down() -> None:
    """Offsets go to the master: with the NameServers down, a consumer whose group's leader
    moved kept committing to the old master, which refused every commit (a restart would then
    consume again what was consumed)."""

    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}}) as env:
            (a,) = env.brokers.values()
            replica = await env.add_slave(a, broker_id=2)
            consumer = PullConsumer("cg", NAMESRV, network=env.network)
            await consumer.start()
            (mq,) = await consumer.fetch_queues("T")
            await consumer.commit_offset(mq, 1)
            await env.namesrv.close()
            env.network.break_link(NAMESRV)
            a.refuse_as_slave = True  # the leader moved: the old master refuses writes
            replica.broker_id, a.broker_id = 0, 3
            with pytest.raises(LedgerMQError):  # refused, then no NameServer to ask
                await consumer.commit_offset(mq, 2)
            await asyncio.sleep(1.2)  # the members are asked every 0.5 s
            await consumer.commit_offset(mq, 3)
            assert a.store.offsets[("cg", "T", 0)] == 3
            assert replica.count(MQRequestCode.UPDATE_CONSUMER_OFFSET) == 1
            await consumer.shutdown()

    arun(main())
