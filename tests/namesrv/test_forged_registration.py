"""Issue 13 item 7 against real processes: forged REGISTER_BROKER frames sent over plain TCP to a
real NameServer do not take the real master out of the routes (or it takes its route back), and
failover still works afterwards.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Producer
from ledgermq.testing.child_process import wait_until
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.frame import FrameDecoder, encode_frame

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FORGED_ADDR = "127.0.0.1:1"


class ForgedLink:
    """A plain TCP socket to a NameServer, kept open as a forger would (frames by hand)."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5.0)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def ask(self, code: int, fields: dict[str, str]) -> RemotingCommand:
        self.opaque += 1
        self.sock.sendall(encode_frame(RemotingCommand(code, self.opaque, ext_fields=fields)))
        while True:
            data = self.sock.recv(65536)
            assert data, "the NameServer closed the connection"
            for frame in self.decoder.feed(data):
                if frame.opaque == self.opaque:
                    return frame

    def register(self, addr: str, broker_id: int, term: int) -> RemotingCommand:
        return self.ask(
            MQRequestCode.REGISTER_BROKER,
            {
                "clusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerAddr": addr,
                "haServerAddr": addr,
                "brokerId": str(broker_id),
                "ledgerTerm": str(term),
                "term": str(term),
            },
        )

    def close(self) -> None:
        self.sock.close()


def route_master(cluster: BrokerCluster) -> str | None:
    route = cluster.route("TBW102")
    if route is None:
        return None
    master: str | None = route["brokerDatas"][0]["brokerAddrs"].get("0")
    return master


def send_one(cluster: BrokerCluster, body: bytes) -> None:
    async def main() -> None:
        producer = Producer("forged-registration-producer", cluster.namesrv_addr)
        await producer.start()
        try:
            # a topic of its own, auto-created: TBW102 takes no sends
            await producer.send("ForgedRegistrationProbe", body)
        finally:
            await producer.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_forged_master_claims_over_tcp_keep_or_give_back_the_real_masters_route(
    broker_clusters: MakeCluster,
) -> None:
    cluster = broker_clusters(replicas=3, extra_settings={"registerNameServerPeriod": "1000"})
    real = cluster.wait_routable()["broker-a"]
    node = cluster.wait_master("broker-a")
    term = int(cluster.runtime_info("broker-a")[node]["dLegerTerm"])
    forger = ForgedLink(cluster.namesrv_addr)
    try:
        # The frame: id 0 with a term nobody in the group reported. Not believed.
        answer = forger.register(FORGED_ADDR, 0, 999999)
        assert answer.ext_fields["masterAddr"] == real
        assert route_master(cluster) == real
        # Frames naming the real master's address from another connection are refused.
        for forged in (forger.register(real, 1, term), forger.register(real, 0, 999999)):
            assert forged.code == MQResponseCode.NO_PERMISSION, forged
        assert route_master(cluster) == real
        send_one(cluster, b"after the incredible claim")

        # A claim one term ahead is believed for a moment; the real master takes id 0 back at
        # its next registration (every second here).
        forger.register(FORGED_ADDR, 0, term + 1)
        assert wait_until(lambda: route_master(cluster) == real, 15.0), route_master(cluster)
        send_one(cluster, b"after the credible claim")

        # Failover still works with the forger's claims on record: kill the master.
        cluster.kill9("broker-a", node)
        after = cluster.wait_routable(timeout_s=30.0)["broker-a"]
        assert after != real
        send_one(cluster, b"after failover")
    finally:
        forger.close()
