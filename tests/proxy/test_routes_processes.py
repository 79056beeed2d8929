"""QueryRoute across broker groups, with real processes: each group's queues point at its own
replicas' gRPC doors (learnt from each replica over remoting), the master's first, and after a
failover the new master's first and the dead one gone."""

from __future__ import annotations

import asyncio
import time
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


def _first(route: service_pb2.QueryRouteResponse) -> dict[str, str]:
    """broker group -> the endpoint its first queue names (its master's door)."""
    found: dict[str, str] = {}
    for queue in route.message_queues:
        (address,) = queue.broker.endpoints.addresses
        found.setdefault(queue.broker.name, f"{address.host}:{address.port}")
    return found


def _wait_all_doors(cluster: BrokerCluster, address: str, topic: str) -> None:
    """Until the route names every replica's door (each registers within its period)."""
    every = {g: {cluster.grpc_address(g, n) for n in cluster.nodes} for g in cluster.groups}
    for _ in range(100):
        if _endpoints(asyncio.run(_route(address, topic))) == every:
            return
        time.sleep(0.2)
    raise AssertionError(f"the route never named every door: {every}")


def test_each_group_routes_to_its_masters_grpc_door(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(groups=2)
    masters = cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr) as admin:
        admin.create_topic("Spread", 2, wait_s=10)
    nodes = {g: next(n for n in cluster.nodes if cluster.address(g, n) == a)
             for g, a in masters.items()}  # fmt: skip
    every = {g: {cluster.grpc_address(g, n) for n in cluster.nodes} for g in cluster.groups}
    masters_doors = {g: cluster.grpc_address(g, n) for g, n in nodes.items()}
    _wait_all_doors(cluster, cluster.grpc_address("broker-a", "n0"), "Spread")
    # Any replica of any group answers with the same endpoints: every door, the master's first.
    for group in cluster.groups:
        for node in cluster.nodes:
            route = asyncio.run(_route(cluster.grpc_address(group, node), "Spread"))
            assert route.status.code == definition_pb2.Code.OK, route.status
            assert _endpoints(route) == every
            assert _first(route) == masters_doors
            assert len(route.message_queues) == 4 * len(cluster.nodes)

    cluster.kill9("broker-a", nodes["broker-a"])
    new = cluster.wait_routable("Spread", 20)
    new_node = next(n for n in cluster.nodes if cluster.address("broker-a", n) == new["broker-a"])
    address = cluster.grpc_address("broker-b", nodes["broker-b"])
    dead = cluster.grpc_address("broker-a", nodes["broker-a"])
    for _ in range(100):  # until the NameServer has dropped the dead replica
        route = asyncio.run(_route(address, "Spread"))
        if dead not in _endpoints(route)["broker-a"]:
            break
        time.sleep(0.2)
    assert _endpoints(route)["broker-a"] == every["broker-a"] - {dead}
    assert _first(route)["broker-a"] == cluster.grpc_address("broker-a", new_node)


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
    assert _first(route) == {g: cluster.grpc_address(g, n) for g, n in nodes.items()}
