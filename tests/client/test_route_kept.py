"""A NameServer that restarts empty does not make a client forget its routes (chaos suite
finding: a NameServer restart made every send fail until the brokers registered again)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ledgermq.client._remoting import ClientInstance
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import TcpNetwork
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.route import RegisterBrokerBody, TopicConfig

if TYPE_CHECKING:
    from ledgermq.net import Connection


async def _register(port: int) -> Connection:
    """A broker's registration; the connection stays open (its close unregisters the broker)."""
    conn = await TcpNetwork().connect("127.0.0.1", port, lambda c, m: None, timeout_s=2)
    body, crc = RegisterBrokerBody({"T": TopicConfig("T", 4, 4)}).encode(compressed=False)
    fields = {
        "clusterName": "c1",
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "haServerAddr": "127.0.0.1:10911",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(crc),
    }
    command = RemotingCommand(MQRequestCode.REGISTER_BROKER, 0, ext_fields=fields, body=body)
    await conn.request(command, 2)
    return conn


def test_an_empty_restarted_nameserver_leaves_the_cached_route() -> None:
    async def main() -> None:
        first = NameServer(NameServerConfig(listen_port=0))
        await first.start()
        port = first.port
        broker = await _register(port)
        client = ClientInstance(f"127.0.0.1:{port}")
        await client.start(background=False)
        try:
            route = await client.topic_route("T")
            await first.close()
            second = NameServer(NameServerConfig(listen_port=port))  # restarted, knows nothing
            await second.start()
            try:
                await client.refresh_all_routes()
                assert await client.topic_route("T") == route  # still cached, still usable
                again = await _register(port)  # the broker registers again
                await client.refresh_all_routes()
                assert (await client.topic_route("T")).broker_datas == route.broker_datas
                again.close()
            finally:
                await second.close()
                broker.close()
        finally:
            await client.close()

    asyncio.run(asyncio.wait_for(main(), 20))
