"""Producer against fake brokers and the real NameServer: sends, retries, routes, TBW102."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from ledgermq.client import Message, MessageQueue, Producer, PullConsumer, PullStatus, SendStatus
from ledgermq.errors import (
    InvalidMessageError,
    MQResponseError,
    RequestTimeoutError,
    SendOutcomeUnknownError,
    TopicNotFoundError,
)
from ledgermq.wire import MessageProperty, MQRequestCode, MQResponseCode

from .conftest import NAMESRV, arun, cluster, eventually

pytestmark = pytest.mark.timeout(20)


def test_send_and_pull_round_trip() -> None:
    async def main() -> None:
        async with cluster() as env:
            producer = Producer("pg", NAMESRV, network=env.network)
            consumer = PullConsumer("cg", NAMESRV, network=env.network)
            await producer.start()
            await consumer.start()
            results = [
                await producer.send("T", b"m%d" % i, tags="a" if i % 2 else "b", keys=[f"k{i}"])
                for i in range(8)
            ]
            assert all(r.status is SendStatus.SEND_OK and r.ok for r in results)
            assert {r.message_queue.queue_id for r in results} == {0, 1, 2, 3}  # round-robin
            queues = await consumer.fetch_queues("T")
            assert queues == [MessageQueue("T", "broker-a", i) for i in range(4)]
            got = {}
            for mq in queues:
                result = await consumer.pull(mq, 0, 32)
                assert result.status is PullStatus.FOUND
                assert result.next_begin_offset == result.max_offset == len(result.messages)
                for m in result.messages:
                    got[m.msg_id] = m
            assert set(got) == {r.msg_id for r in results}
            sample = got[results[3].msg_id]
            assert sample.body == b"m3"
            assert sample.tags == "a"
            assert sample.keys == ["k3"]
            assert sample.properties[MessageProperty.UNIQ_KEY] == results[3].msg_id
            assert sample.offset_msg_id == results[3].offset_msg_id
            # tag filtering (broker hash + client string), then no new message
            mq = results[1].message_queue
            filtered = await consumer.pull(mq, 0, 32, "a")
            assert [m.tags for m in filtered.messages] == ["a"] * len(filtered.messages)
            empty = await consumer.pull(mq, filtered.next_begin_offset, 32)
            assert empty.status is PullStatus.NO_NEW_MSG
            moved = await consumer.pull(mq, 1000, 32)
            assert moved.status is PullStatus.OFFSET_ILLEGAL
            assert moved.next_begin_offset == moved.max_offset
            assert await consumer.max_offset(mq) == 2
            assert await consumer.min_offset(mq) == 0
            assert await consumer.fetch_committed_offset(mq) is None
            await consumer.commit_offset(mq, 2)
            assert await consumer.fetch_committed_offset(mq) == 2
            await producer.shutdown()
            await consumer.shutdown()

    arun(main())


def test_big_bodies_are_compressed_and_come_back_inflated() -> None:
    async def main() -> None:
        async with cluster() as env:
            producer = Producer("pg", NAMESRV, network=env.network, compress_over=100)
            await producer.start()
            body = b"x" * 10_000
            result = await producer.send("T", body)
            (broker,) = env.brokers.values()
            sent = [r for r in broker.requests if r.code == MQRequestCode.SEND_MESSAGE_V2][-1]
            assert sent.ext_fields["f"] == "1"
            assert zlib.decompress(sent.body) == body
            async with PullConsumer("cg", NAMESRV, network=env.network) as consumer:
                pulled = await consumer.pull(result.message_queue, 0)
            assert pulled.messages[0].body == body
            await producer.shutdown()

    arun(main())


def test_retry_goes_to_another_group_when_one_is_not_available() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 2}, "broker-b": {"T": 2}}) as env:
            a, b = env.brokers.values()
            a.send_error_code = MQResponseCode.SERVICE_NOT_AVAILABLE
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            results = [await producer.send("T", b"x") for _ in range(6)]
            assert {r.message_queue.broker_name for r in results} == {"broker-b"}
            # broker-a is avoided after its first failure: it saw at most one send
            assert a.count(MQRequestCode.SEND_MESSAGE_V2) == 1
            # a non-retriable refusal is raised at once
            b.send_error_code = MQResponseCode.MESSAGE_ILLEGAL
            a.send_error_code = MQResponseCode.MESSAGE_ILLEGAL
            with pytest.raises(MQResponseError) as caught:
                await producer.send("T", b"x")
            assert caught.value.code == MQResponseCode.MESSAGE_ILLEGAL
            assert not caught.value.retriable
            await producer.shutdown()

    arun(main())


def test_all_attempts_failing_raises_the_last_error_with_a_note() -> None:
    async def main() -> None:
        async with cluster() as env:
            (broker,) = env.brokers.values()
            broker.send_error_code = MQResponseCode.SYSTEM_BUSY
            producer = Producer("pg", NAMESRV, network=env.network, retry_times=2)
            await producer.start()
            with pytest.raises(MQResponseError) as caught:
                await producer.send("T", b"x")
            assert caught.value.retriable
            assert "3 attempts" in "".join(caught.value.__notes__)
            assert broker.count(MQRequestCode.SEND_MESSAGE_V2) == 3
            await producer.shutdown()

    arun(main())


def test_route_is_refreshed_after_a_failure_and_a_new_master_is_used() -> None:
    async def main() -> None:
        async with cluster() as env:
            (old,) = env.brokers.values()
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            assert (await producer.send("T", b"before")).ok
            # failover: a slave sharing the store becomes master; the old master goes away
            new = await env.add_slave(old, broker_id=1)
            env.network.break_link(old.address)
            await old.unregister()
            await new.register(broker_id=0)
            result = await producer.send("T", b"after")
            assert result.ok
            assert new.count(MQRequestCode.SEND_MESSAGE_V2) == 1
            await producer.shutdown()

    arun(main())


def test_timeout_is_an_unknown_outcome_that_is_retried_and_counted() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 1}, "broker-b": {"T": 1}}) as env:
            a, b = env.brokers.values()
            a.swallow_sends = b.swallow_sends = 1  # stored, never answered
            producer = Producer("pg", NAMESRV, network=env.network, send_timeout_s=0.2)
            await producer.start()
            result = await producer.send("T", b"x")
            assert result.ok
            assert producer.unknown_outcomes == 2
            # the message is stored three times, all with the same UNIQ_KEY (at-least-once)
            stored = sum(len(q) for br in (a, b) for q in br.store.queues.values())
            assert stored == 3
            a.swallow_sends = b.swallow_sends = 5
            with pytest.raises(SendOutcomeUnknownError) as caught:
                await producer.send("T", b"y")
            assert isinstance(caught.value.__cause__, RequestTimeoutError)
            await producer.shutdown()

    arun(main())


def test_unknown_topic_is_created_through_tbw102() -> None:
    async def main() -> None:
        async with cluster() as env:
            (broker,) = env.brokers.values()
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            result = await producer.send("NewTopic", b"hello")
            assert result.ok
            sent = [r for r in broker.requests if r.code == MQRequestCode.SEND_MESSAGE_V2][-1]
            assert sent.ext_fields["c"] == "TBW102"
            assert broker.store.topics["NewTopic"].write_queue_nums == 4
            # the broker registers the topic; the producer then uses the real route
            await eventually(lambda: producer._client.cached_route("NewTopic") is not None)
            assert (await producer.send("NewTopic", b"again")).ok
            await producer.shutdown()

    arun(main())


def test_unknown_topic_without_tbw102_is_a_clear_error() -> None:
    async def main() -> None:
        async with cluster(auto_create=False) as env:
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            with pytest.raises(TopicNotFoundError, match=r"does not exist.*TBW102"):
                await producer.send("Nope", b"x")
            await producer.shutdown()

    arun(main())


def test_batch_oneway_orderly_and_pinned_queue() -> None:
    async def main() -> None:
        async with cluster({"broker-a": {"T": 4}, "broker-b": {"T": 4}}) as env:
            producer = Producer("pg", NAMESRV, network=env.network)
            consumer = PullConsumer("cg", NAMESRV, network=env.network)
            await producer.start()
            await consumer.start()
            batch = await producer.send_batch(
                "T", [b"b0", Message(b"b1", tags="t", keys="k1"), b"b2"]
            )
            assert batch.ok
            assert len(batch.msg_id.split(",")) == 3
            pulled = await consumer.pull(batch.message_queue, batch.queue_offset, 32)
            assert [m.body for m in pulled.messages] == [b"b0", b"b1", b"b2"]
            assert [m.msg_id for m in pulled.messages] == batch.msg_id.split(",")
            assert pulled.messages[1].tags == "t"
            # orderly: one key, one queue, in order
            orderly = [await producer.send_orderly("T", b"o%d" % i, "order-42") for i in range(5)]
            assert len({r.message_queue for r in orderly}) == 1
            offsets = [r.queue_offset for r in orderly]
            assert offsets == sorted(offsets)
            keys = {
                (await producer.send_orderly("T", b"x", f"k{i}")).message_queue for i in range(40)
            }
            assert len(keys) > 1
            pinned = MessageQueue("T", "broker-b", 3)
            assert (await producer.send("T", b"p", queue=pinned)).message_queue == pinned
            await producer.send_oneway("T", b"one-way")
            brokers = list(env.brokers.values())
            await eventually(
                lambda: any(
                    r.code == MQRequestCode.SEND_MESSAGE_V2 and r.body == b"one-way"
                    for br in brokers
                    for r in br.requests
                )
            )
            await producer.shutdown()
            await consumer.shutdown()

    arun(main())


def test_invalid_messages_are_refused_before_sending() -> None:
    async def main() -> None:
        async with cluster() as env:
            producer = Producer("pg", NAMESRV, network=env.network, max_message_size=10)
            await producer.start()
            with pytest.raises(InvalidMessageError):
                await producer.send("T", b"x" * 11)
            with pytest.raises(InvalidMessageError):
                await producer.send("bad topic", b"x")
            with pytest.raises(InvalidMessageError):
                await producer.send("T", b"")
            with pytest.raises(InvalidMessageError):
                await producer.send_batch("T", [b"12345678", b"12345678"])
            await producer.shutdown()

    arun(main())


def test_a_producer_heartbeats_a_broker_as_soon_as_it_learns_of_it() -> None:
    """``admin producer-connection`` listed a producer only after its first periodic heartbeat,
    up to 30 s after its first send: the heartbeat at start goes to no broker (no route yet).
    Java's client shows up within about a second (its first periodic heartbeat comes 1 s after
    start, by when the first send has fetched the route). Now a broker that enters the cached
    routes gets a heartbeat at once."""

    async def main() -> None:
        async with cluster() as env:
            (broker,) = env.brokers.values()
            producer = Producer("pg", NAMESRV, network=env.network)  # heartbeat every 30 s
            await producer.start()
            assert broker.count(MQRequestCode.HEART_BEAT) == 0
            assert (await producer.send("T", b"first")).ok
            await eventually(lambda: broker.count(MQRequestCode.HEART_BEAT) == 1, timeout_s=2.0)
            assert (await producer.send("T", b"second")).ok  # a known broker: no extra beat
            await asyncio.sleep(0.2)
            assert broker.count(MQRequestCode.HEART_BEAT) == 1
            await producer.shutdown()

    arun(main())
