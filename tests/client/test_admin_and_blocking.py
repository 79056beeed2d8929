"""Admin against fake brokers, and the blocking facades over TCP from plain threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ledgermq.client import (
    Admin,
    ConsumeStatus,
    MessageQueue,
    Producer,
    PullStatus,
    SyncAdmin,
    SyncProducer,
    SyncPullConsumer,
    SyncPushConsumer,
)
from ledgermq.errors import NoRouteError, TopicNotFoundError
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import TcpNetwork

from .conftest import NAMESRV, arun, cluster
from .fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(20)


def test_admin_topics_stats_progress_and_messages() -> None:
    async def main() -> None:
        async with (
            cluster({"broker-a": {}, "broker-b": {}}) as env,
            Admin(NAMESRV, network=env.network) as admin,
        ):
            info = await admin.cluster_info()
            assert sorted(info.broker_addr_table) == ["broker-a", "broker-b"]
            assert await admin.create_topic("Orders", 3) == ["broker-a", "broker-b"]
            route = await admin.wait_for_route("Orders", ["broker-a", "broker-b"])
            assert {q.write_queue_nums for q in route.queue_datas} == {3}
            assert "Orders" in await admin.topic_list()
            with pytest.raises(NoRouteError):
                await admin.create_topic("X", 1, cluster="NoSuchCluster")
            async with Producer("pg", NAMESRV, network=env.network) as producer:
                sent = [await producer.send("Orders", b"o", keys="order-7") for _ in range(4)]
            stats = await admin.topic_stats("Orders")
            assert len(stats) == 6
            assert sum(s.max_offset for s in stats) == 4
            # consumer progress: commit one queue's offset, see its lag
            a = next(b for b in env.brokers.values() if b.name == "broker-a")
            q0 = next(s for s in stats if s.broker_name == "broker-a" and s.max_offset)
            a.store.offsets[("cg", "Orders", q0.queue_id)] = 0
            (row,) = await admin.consumer_progress("cg", "Orders")
            assert row.lag == q0.max_offset
            viewed = await admin.view_message(sent[0].offset_msg_id)
            assert viewed.msg_id == sent[0].msg_id
            found = await admin.query_message("Orders", "order-7")
            assert {m.msg_id for m in found} == {s.msg_id for s in sent}
            assert (await admin.broker_runtime_info(a.address))["brokerName"] == "broker-a"
            await admin.transfer_leadership("broker-a", "n1")
            assert a.transfers == ["n1"]
            await admin.delete_topic("Orders")
            with pytest.raises(TopicNotFoundError):
                await admin.topic_route("Orders")

    arun(main())


class ThreadCluster:
    """A NameServer and a fake broker over TCP on 127.0.0.1, in their own loop thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.namesrv: Any = None
        self.broker: Any = None

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def start(self) -> str:
        async def go() -> str:
            network = TcpNetwork()
            self.namesrv = NameServer(NameServerConfig(listen_port=0), network)
            await self.namesrv.start()
            addr = f"127.0.0.1:{self.namesrv.port}"
            self.broker = FakeBroker(network, addr, topics={"T": 2})  # type: ignore[arg-type]
            await self.broker.start()
            return addr

        return str(self.run(go()))

    def stop(self) -> None:
        async def go() -> None:
            await self.broker.close()
            await self.namesrv.close()

        self.run(go())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def test_blocking_facades_from_threads() -> None:
    servers = ThreadCluster()
    addr = servers.start()
    try:
        with SyncProducer("pg", addr) as producer:
            results = [producer.send("T", b"s%d" % i, tags="t") for i in range(6)]
            assert all(r.ok for r in results)
            # safe from several threads at once
            threads = [
                threading.Thread(target=lambda: producer.send("T", b"thread")) for _ in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        with SyncPullConsumer("cg", addr) as consumer:
            queues = consumer.fetch_queues("T")
            assert queues == [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
            total = 0
            for mq in queues:
                result = consumer.pull(mq, 0, 256)
                assert result.status is PullStatus.FOUND
                total += len(result.messages)
                consumer.commit_offset(mq, result.next_begin_offset)
                assert consumer.fetch_committed_offset(mq) == result.next_begin_offset
                assert consumer.max_offset(mq) == result.next_begin_offset
            assert total == 10
        seen: list[bytes] = []
        push = SyncPushConsumer(
            "pushg", addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", suspend_timeout_ms=200
        )
        push.subscribe("T")

        def listener(msgs: list[Any]) -> ConsumeStatus:
            seen.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        push.register_listener(listener)
        push.start()
        for _ in range(200):
            if len(seen) >= 10:
                break
            threading.Event().wait(0.02)
        push.shutdown()
        assert len(seen) == 10
        with SyncAdmin(addr) as admin:
            assert admin.topic_route("T").queue_datas[0].broker_name == "broker-a"
            assert sum(s.max_offset for s in admin.topic_stats("T")) == 10
        producer.close()  # twice is fine
    finally:
        servers.stop()
