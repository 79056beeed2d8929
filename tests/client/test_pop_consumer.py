"""``PopConsumer`` (the remoting POP door, typed) against the real broker in-process: receive,
ack, change of invisible time, redelivery with attempt + 1, a stale handle refused, and the
group's POP state carried over a master failover."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, Producer
from ledgermq.client.pop import PopConsumer, PoppedMessage, handle_position
from ledgermq.errors import MQResponseError
from ledgermq.wire import MQResponseCode
from tests.broker.harness import NAMESRV, Cluster

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)


def run(tmp: Path, test: Callable[[Cluster], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster(tmp)
        try:
            await cluster.start()
            await cluster.master()
            async with Admin(NAMESRV, network=cluster.network) as admin:
                await admin.wait_for_route("TBW102", ["broker-a"])
                await admin.create_topic("P", 2)
                await admin.wait_for_route("P", ["broker-a"])
            await test(cluster)
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 80))


def test_handle_position_reads_broker_queue_and_offset() -> None:
    assert handle_position("7 1700000000000 3000 0 0 broker-b 3 42") == ("broker-b", 3, 42)
    for bad in ("", "1 2 3", "7 1 3000 0 0 broker-a x 42"):
        with pytest.raises(ValueError, match="not a receipt handle"):
            handle_position(bad)


def test_receive_ack_change_and_redelivery(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        async with Producer("pg", NAMESRV, network=net) as producer:
            for i in range(3):
                assert (await producer.send("P", b"m%d" % i)).ok
        async with PopConsumer("G", NAMESRV, network=net) as consumer:
            assert await consumer.broker_names("P") == ["broker-a"]
            got: list[PoppedMessage] = []
            for _ in range(4):  # one receive may find one queue's messages only
                if len(got) < 3:
                    result = await consumer.receive("P", "broker-a", invisible_s=1.5)
                    got += result.messages
            assert sorted(p.message.body for p in got) == [b"m0", b"m1", b"m2"]
            assert {p.attempt for p in got} == {1}
            assert all(handle_position(p.handle)[0] == "broker-a" for p in got)
            by_body = {p.message.body: p for p in got}
            await consumer.ack("P", by_body[b"m0"].handle)
            await consumer.ack("P", by_body[b"m0"].handle)  # a repeated ack is accepted
            renewed = await consumer.change_invisible_time("P", by_body[b"m1"].handle, 30.0)
            assert renewed != by_body[b"m1"].handle
            with pytest.raises(MQResponseError) as stale:
                await consumer.ack("P", by_body[b"m1"].handle)
            assert stale.value.code == MQResponseCode.NO_MESSAGE
            await asyncio.sleep(1.7)  # m2 was neither acked nor renewed: it comes back
            again: list[PoppedMessage] = []
            for _ in range(4):
                again += (await consumer.receive("P", "broker-a", invisible_s=5.0)).messages
            assert [(p.message.body, p.attempt) for p in again] == [(b"m2", 2)]
            await consumer.ack("P", renewed)

    run(tmp_path, test)


def test_pop_state_survives_a_master_failover(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        net = cluster.network
        async with Producer("pg", NAMESRV, network=net) as producer:
            for i in range(4):
                assert (await producer.send("P", b"f%d" % i)).ok
        async with PopConsumer(
            "G", NAMESRV, network=net, request_timeout_s=1.0, route_refresh_interval_s=0.5
        ) as consumer:
            got: list[PoppedMessage] = []
            for _ in range(4):
                if len(got) < 4:
                    got += (await consumer.receive("P", "broker-a", invisible_s=1.0)).messages
            assert len(got) == 4
            acked = {p.message.body for p in got[:2]}
            for popped in got[:2]:
                await consumer.ack("P", popped.handle)
            master = await cluster.master()
            await cluster.stop_broker(next(n for n, b in cluster.brokers.items() if b is master))
            await cluster.master()
            again: list[bytes] = []
            for _ in range(60):
                try:
                    result = await consumer.receive("P", "broker-a", invisible_s=5.0, poll_s=0.2)
                except Exception:  # noqa: BLE001 - until the new master is in the route
                    await asyncio.sleep(0.2)
                    continue
                again += [p.message.body for p in result.messages]
                assert all(p.attempt == 2 for p in result.messages)
                if len(again) >= 2:
                    break
            assert sorted(again) == sorted({p.message.body for p in got} - acked)

    run(tmp_path, test)
