"""An in-process cluster for broker tests: a NameServer and one 3-replica broker group over the
in-memory network, and a raw remoting client that speaks RocketMQ's protocol."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.server import BrokerServer
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import ConnectionPool, MemoryNetwork
from ledgermq.testing import virtual_time
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.message import encode_properties

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

    from ledgermq.clock import Clock

NAMESRV = "10.0.1.1:9876"
LEDGER_PEERS = {"n0": ("10.0.0.1", 40911), "n1": ("10.0.0.2", 40911), "n2": ("10.0.0.3", 40911)}
BROKER_HOSTS = {"n0": "10.0.0.1", "n1": "10.0.0.2", "n2": "10.0.0.3"}


class Cluster:
    def __init__(self, tmp: Path, **settings: object) -> None:
        self.tmp = tmp
        self.clock: Clock | None = None
        """The brokers' clock (a test in virtual time sets a VirtualClock before ``start``)."""
        self.network = MemoryNetwork()
        self.settings = settings
        self.namesrv: NameServer | None = None
        self.brokers: dict[str, BrokerServer] = {}
        self.pool = ConnectionPool(self.network)

    def config(self, node: str) -> BrokerConfig:
        values: dict[str, object] = {
            "broker_name": "broker-a",
            "broker_ip1": BROKER_HOSTS[node],
            "listen_port": 10911,
            "namesrv_addr": (NAMESRV,),
            "store_path_root_dir": os.fspath(self.tmp / node),
            "dleger_peers": LEDGER_PEERS,
            "dleger_self_id": node,
            "mapped_file_size_commit_log": 1 << 20,
            "index_file_size": 32 * 4096,
            "mapped_file_size_consume_queue": 20 * 1024,
            "message_delay_level": "1s 1s 1s 1s 1s",
        }
        values.update(self.settings)
        return BrokerConfig(**values)  # type: ignore[arg-type]

    async def start(self) -> None:
        host, port = NAMESRV.split(":")
        self.namesrv = NameServer(
            NameServerConfig(listen_host=host, listen_port=int(port)), network=self.network
        )
        await self.namesrv.start()
        for node in LEDGER_PEERS:
            await self.start_broker(node)

    async def start_broker(self, node: str) -> BrokerServer:
        broker = BrokerServer(self.config(node), network=self.network, clock=self.clock)
        await broker.start()
        self.brokers[node] = broker
        return broker

    async def stop_broker(self, node: str) -> None:
        broker = self.brokers.pop(node)
        await broker.close()

    async def master(self, timeout_s: float = 10, exclude: str | None = None) -> BrokerServer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            masters = [
                b
                for node, b in self.brokers.items()
                if node != exclude and b.state is not None and b.state.is_master
            ]
            if len(masters) == 1:
                return masters[0]
            await asyncio.sleep(0.01)
        raise AssertionError("no master was elected")

    async def request(
        self, address: str, code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        command = RemotingCommand(code=code, opaque=0, ext_fields=dict(fields or {}), body=body)
        return await self.pool.request(address, command, 5.0)

    async def send(
        self,
        address: str,
        topic: str,
        body: bytes,
        *,
        queue_id: int = 0,
        properties: Mapping[str, str] | None = None,
    ) -> RemotingCommand:
        return await self.request(
            address,
            MQRequestCode.SEND_MESSAGE,
            {
                "producerGroup": "pg",
                "topic": topic,
                "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4",
                "queueId": str(queue_id),
                "sysFlag": "0",
                "bornTimestamp": "1",
                "flag": "0",
                "properties": encode_properties(properties or {}),
                "reconsumeTimes": "0",
                "unitMode": "false",
                "batch": "false",
            },
            body,
        )

    async def pull(
        self,
        address: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "cg",
        sys_flag: int = 4,
        suspend_ms: int = 0,
        subscription: str = "*",
        max_nums: int = 32,
    ) -> RemotingCommand:
        return await self.request(
            address,
            MQRequestCode.PULL_MESSAGE,
            {
                "consumerGroup": group,
                "topic": topic,
                "queueId": str(queue_id),
                "queueOffset": str(offset),
                "maxMsgNums": str(max_nums),
                "sysFlag": str(sys_flag),
                "commitOffset": "-1",
                "suspendTimeoutMillis": str(suspend_ms),
                "subscription": subscription,
                "subVersion": "0",
            },
        )

    async def close(self) -> None:
        await self.pool.close()
        for node in list(self.brokers):
            await self.stop_broker(node)
        if self.namesrv is not None:
            await self.namesrv.close()


def run_with_cluster(
    tmp: Path,
    test: Callable[[Cluster], Awaitable[None]],
    *,
    in_virtual_time: bool = False,
    **settings: object,
) -> None:
    """Start a ``Cluster`` under ``tmp`` (``settings`` for its brokers), run ``test`` on it
    within 80 s, and close it whatever happens. ``in_virtual_time``: on a ``VirtualTimeLoop``
    with the brokers on its clock (timers, POP, transactions: their waits cost no real time),
    within 110 s of virtual time."""

    async def main() -> None:
        cluster = Cluster(tmp, **settings)
        if in_virtual_time:
            cluster.clock = virtual_time.current_clock()
        try:
            await cluster.start()
            await test(cluster)
        finally:
            await cluster.close()

    if in_virtual_time:
        virtual_time.run(asyncio.wait_for(main(), 110))
    else:
        asyncio.run(asyncio.wait_for(main(), 80))
