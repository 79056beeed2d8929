"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) signing its calls to a
gRPC door with ``aclEnable``: every kind of call it makes (routes, heartbeats, the Telemetry
stream, long-polling receives, acks, invisible-duration changes) goes through the door's
admission check (``proxy.admission``: who calls, checked before the request is read) and then
the servicer's permission check, and the SimpleConsumer's whole run works as without ACL; the
same client unsigned gets nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.client.blocking import SyncAdmin, SyncProducer
from ledgermq.client.credentials import Credentials

from .test_official_client import SIMPLE, TOPIC, Driver, client_python

if TYPE_CHECKING:
    from pathlib import Path

    from .test_official_client import MakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(200)]

ADMIN = ("ops-admin", "ops-admin-secret")
CONSUMER = ("grpc-consumer", "consumer-secret")
ACL = f"""
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {CONSUMER[0]}
    secretKey: {CONSUMER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{TOPIC}=SUB]
    groupPerms: [simple-g=SUB]
"""
COUNT = 4


def test_the_official_simple_consumer_signed_under_acl(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    python = client_python()
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    cluster = broker_clusters(
        credentials=ADMIN,
        extra_settings={"aclEnable": "true", "aclFilePath": str(acl),
                        "aclAccessKey": ADMIN[0], "aclSecretKey": ADMIN[1]},
    )  # fmt: skip
    cluster.wait_routable()
    admin_credentials = Credentials(*ADMIN)
    with SyncAdmin(cluster.namesrv_addr, credentials=admin_credentials) as admin:
        admin.create_topic(TOPIC, 4, wait_s=10)
    producer = SyncProducer("acl-producer", cluster.namesrv_addr, credentials=admin_credentials)
    try:
        producer.start()
        sent = {producer.send(TOPIC, f"m{i}".encode()).msg_id for i in range(COUNT)}
    finally:
        producer.close()
    endpoints = ";".join(cluster.grpc_address("broker-a", n) for n in cluster.nodes)
    args = {"endpoints": endpoints, "topic": TOPIC, "group": "simple-g", "count": COUNT,
            "duration_s": 40}  # fmt: skip
    unsigned = Driver(python, tmp_path / "unsigned", {**args, "duration_s": 3}, script=SIMPLE)
    try:
        unsigned.wait(60)
    finally:
        unsigned.close()
    assert not unsigned.of("acked"), unsigned.report()
    consumer = Driver(
        python, tmp_path / "consumer",
        {**args, "access_key": CONSUMER[0], "secret_key": CONSUMER[1]}, script=SIMPLE,
    )  # fmt: skip
    try:
        consumer.finish(80)
    finally:
        consumer.close()
    assert not consumer.of("failed"), (consumer.of("failed")[:3], consumer.report())
    assert sorted(e["message_id"] for e in consumer.of("acked")) == sorted(sent)
    assert consumer.of("done")[0]["leftover"] == 0
