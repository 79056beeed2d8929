"""QueryRoute across broker groups, with real processes: each group's queues point at its own
master's gRPC door (learnt from that master over remoting), and after a failover at the new
master's."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc.aio
import pytest

from ledgermq.client.blocking import SyncAdmin
from ledgermq.client.credentials import Credentials
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from tests.proxy.test_grpc_acl import _metadata

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

ADMIN = ("ops-admin", "ops-admin-secret")


async def _route(
    address: str, topic: str, credentials: tuple[str, str] | None = None
) -> service_pb2.QueryRouteResponse:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic))
        metadata = _metadata(*credentials) if credentials is not None else None
        return await stub.QueryRoute(request, timeout=5, metadata=metadata)


def _endpoints(route: service_pb2.QueryRouteResponse) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for queue in route.message_queues:
        for address in queue.broker.endpoints.addresses:
            found.setdefault(queue.broker.name, set()).add(f"{address.host}:{address.port}")
    return found


def test_each_group_routes_to_its_masters_grpc_door(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(groups=2)
    masters = cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic("Spread", 2, wait_s=10)
    nodes = {g: next(n for n in cluster.nodes if cluster.address(g, n) == a)
             for g, a in masters.items()}  # fmt: skip
    expected = {g: {cluster.grpc_address(g, n)} for g, n in nodes.items()}
    # Any replica of any group answers with the same endpoints.
    for group in cluster.groups:
        for node in cluster.nodes:
            route = asyncio.run(_route(cluster.grpc_address(group, node), "Spread"))
            assert route.status.code == definition_pb2.Code.OK, route.status
            assert _endpoints(route) == expected
            assert len(route.message_queues) == 4

    cluster.kill9("broker-a", nodes["broker-a"])
    new = cluster.wait_routable("Spread", 20)
    new_node = next(n for n in cluster.nodes if cluster.address("broker-a", n) == new["broker-a"])
    route = asyncio.run(_route(cluster.grpc_address("broker-b", nodes["broker-b"]), "Spread"))
    assert _endpoints(route)["broker-a"] == {cluster.grpc_address("broker-a", new_node)}


def test_routes_across_groups_with_acl_on(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    """With ``aclEnable``, the door asks the NameServer and the other masters with the broker's
    own account (``aclAccessKey``): an unsigned GET_BROKER_CONFIG would be refused and the other
    group left out of the route. The client's own call is signed (the door checks it)."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: ops-admin\n    secretKey: ops-admin-secret\n"
                   "    admin: true\n")  # fmt: skip
    cluster = broker_clusters(
        groups=2,
        credentials=("ops-admin", "ops-admin-secret"),
        extra_settings={"aclEnable": "true", "aclFilePath": str(acl),
                        "aclAccessKey": "ops-admin", "aclSecretKey": "ops-admin-secret"},
    )  # fmt: skip
    masters = cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr, credentials=Credentials(*ADMIN)) as admin:
        admin.create_topic("Spread", 2, wait_s=10)
    nodes = {g: next(n for n in cluster.nodes if cluster.address(g, n) == a)
             for g, a in masters.items()}  # fmt: skip
    address = cluster.grpc_address("broker-a", nodes["broker-a"])
    route = asyncio.run(_route(address, "Spread", ADMIN))
    assert route.status.code == definition_pb2.Code.OK, route.status
    assert _endpoints(route) == {g: {cluster.grpc_address(g, n)} for g, n in nodes.items()}
