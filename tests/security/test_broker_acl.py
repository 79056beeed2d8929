"""A broker group with aclEnable, a group secret and a NameServer that checks registrations, as
real processes: RocketMQ's plain ACL on the remoting port, peer authentication on the ledger
port, and a scan of every request code sent anonymously to each port (issue 17).

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, Credentials, Producer, PullConsumer
from ledgermq.errors import MQResponseError
from ledgermq.net import TcpNetwork
from ledgermq.raft import ResponseCode
from ledgermq.wire import LedgerRequestCode, MQRequestCode, MQResponseCode, RemotingCommand

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.net import Connection
    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
  - accessKey: orders-producer
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB]
  - accessKey: orders-consumer
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=SUB]
    groupPerms: [orders-group=SUB]
"""
ADMIN = Credentials("ops-admin", "ops-admin-secret")
PRODUCER = Credentials("orders-producer", "producer-secret")
CONSUMER = Credentials("orders-consumer", "consumer-secret")
PEER_SECRET = "broker-a-peer-secret-0123"


def _secure_cluster(make: MakeCluster, tmp_path: Path) -> BrokerCluster:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    return make(
        replicas=3,
        credentials=("ops-admin", "ops-admin-secret"),
        extra_settings={
            "aclEnable": "true",
            "aclFilePath": str(acl),
            "auditLogFile": str(tmp_path / "audit.log"),
            "aclAccessKey": "ops-admin",
            "aclSecretKey": "ops-admin-secret",
            "dLegerPeerSecret": PEER_SECRET,
        },
    )


async def _refusal(call: Callable[[], object]) -> str:
    with pytest.raises(MQResponseError) as caught:
        await call()  # type: ignore[misc]
    assert caught.value.code == MQResponseCode.NO_PERMISSION, caught.value
    return str(caught.value)


def test_acl_on_the_broker_allows_what_the_file_grants_and_stores_nothing_else(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    cluster = _secure_cluster(broker_clusters, tmp_path)
    cluster.wait_routable()
    ns = cluster.namesrv_addr

    async def main() -> None:
        async with Admin(ns, credentials=ADMIN) as admin:
            await admin.create_topic("Orders", 4, wait_s=20)
            await admin.create_topic("Payments", 4, wait_s=20)
        async with Admin(ns, credentials=PRODUCER) as not_admin:
            remark = await _refusal(lambda: not_admin.create_topic("Other", 4, wait_s=5))
            assert "needs an admin account" in remark

        producer = Producer("orders-producers", ns, credentials=PRODUCER, retry_times=0)
        anonymous = Producer("anonymous", ns, retry_times=0)
        forged = Producer(
            "forged", ns, credentials=Credentials("orders-producer", "not-the-secret"),
            retry_times=0,
        )  # fmt: skip
        for p in (producer, anonymous, forged):
            await p.start()
        try:
            sent = [await producer.send("Orders", f"order {i}".encode()) for i in range(5)]
            assert "not signed" in await _refusal(lambda: anonymous.send("Orders", b"x"))
            assert "do not match" in await _refusal(lambda: forged.send("Orders", b"x"))
            # (TBW102 was this topic once: a producer may no longer send there at all, and
            # the client refuses that before sending: tests/client/test_names_client.py)
            refused = await _refusal(lambda: producer.send("Payments", b"x"))
            assert "no PUB permission on topic 'Payments'" in refused
        finally:
            for p in (producer, anonymous, forged):
                await p.shutdown()

        async with Admin(ns, credentials=ADMIN) as admin:
            stats = await admin.topic_stats("Orders")
            settings = await admin.broker_config(cluster.address("broker-a", cluster.nodes[0]))
        assert settings["aclEnable"] == "true"
        assert settings["aclSecretKey"] == settings["dLegerPeerSecret"] == "******"
        assert "ops-admin-secret" not in str(settings)
        assert sum(s.max_offset for s in stats) == len(sent)  # nothing refused was stored

        reader = PullConsumer("orders-group", ns, credentials=CONSUMER)
        stranger = PullConsumer("other-group", ns, credentials=CONSUMER)
        await reader.start()
        await stranger.start()
        try:
            bodies = []
            for mq in await reader.fetch_queues("Orders"):
                result = await reader.pull(mq, 0, 32)
                bodies += [m.body for m in result.messages]
            assert sorted(bodies) == sorted(f"order {i}".encode() for i in range(5))
            mq = (await stranger.fetch_queues("Orders"))[0]
            assert "no SUB permission on group 'other-group'" in await _refusal(
                lambda: stranger.pull(mq, 0, 32)
            )
        finally:
            await reader.shutdown()
            await stranger.shutdown()

    asyncio.run(main())
    audit = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    refused = [line for line in audit if line["result"] == "refused"]
    assert {line["who"] for line in refused} >= {None, "orders-producer", "orders-consumer"}
    assert all(line["server"] == "broker" for line in audit)
    assert "secret" not in (tmp_path / "audit.log").read_text()


async def _raw(address: str, command: RemotingCommand) -> tuple[RemotingCommand | None, bool]:
    """Send one request on a fresh connection: its answer (None if the connection closed
    first) and whether the connection is closed a moment later."""
    host, _, port = address.rpartition(":")
    conn: Connection = await TcpNetwork().connect(host, int(port), lambda c, m: None, timeout_s=5)
    try:
        answer: RemotingCommand | None = await conn.request(command, 5)
    except Exception:  # noqa: BLE001 - a closed connection is an answer here too
        answer = None
    await asyncio.sleep(0.05)
    closed = conn.closed
    conn.close()
    return answer, closed


def test_every_request_code_sent_anonymously_is_refused(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    cluster = _secure_cluster(broker_clusters, tmp_path)
    cluster.wait_routable()
    master = cluster.wait_master("broker-a")
    broker = cluster.address("broker-a", master)
    ledger = f"127.0.0.1:{cluster.ledger_ports[('broker-a', master)]}"

    async def main() -> None:
        for code in MQRequestCode:
            fields = {"topic": "Orders", "consumerGroup": "g", "group": "g", "b": "Orders"}
            answer, _ = await _raw(broker, RemotingCommand(int(code), 0, ext_fields=fields))
            assert answer is not None, code
            assert answer.code == MQResponseCode.NO_PERMISSION, (code, answer)
        handshake = {LedgerRequestCode.AUTH_HELLO, LedgerRequestCode.AUTH_PROOF}
        for ledger_code in set(LedgerRequestCode) - handshake:
            answer, closed = await _raw(ledger, RemotingCommand(int(ledger_code), 0, body=b"x"))
            assert answer is None or answer.code == ResponseCode.NOT_AUTHENTICATED, ledger_code
            assert closed, ledger_code

    asyncio.run(main())
    # the group still works for those who may: the harness (admin) sees a master
    assert cluster.wait_master("broker-a") == master


def test_the_real_cpp_client_with_session_credentials(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """RocketMQ's C++ client (``set_session_credentials``) signs as RocketMQ's ACL expects:
    allowed sends and pulls work; a wrong secret, an unknown key and a topic without PUB are
    refused and store nothing."""
    from tests.interop.test_rocketmq_client import Client

    cluster = _secure_cluster(broker_clusters, tmp_path)
    cluster.wait_routable()
    ns = cluster.namesrv_addr

    async def create() -> None:
        async with Admin(ns, credentials=ADMIN) as admin:
            await admin.create_topic("Orders", 4, wait_s=20)
            await admin.create_topic("Payments", 4, wait_s=20)

    asyncio.run(create())
    client = Client(tmp_path / "clients", ns)
    try:
        sent = client.produce(
            "Orders", "sync", 5, credentials=["orders-producer", "producer-secret"]
        )

        def refused(topic: str, credentials: list[str], remark: str) -> None:
            run = client.start("produce", topic=topic, mode="sync", count=1, group="pg",
                               credentials=credentials, send_timeout_ms=3000)  # fmt: skip
            assert run.wait_for(lambda r: r.proc.poll() is not None, 40), run.report()
            assert not run.of("sent"), run.report()
            assert run.of("error"), run.report()
            assert f"{remark}, error code:16" in run.client_log(200), run.report()

        mismatch = "the AccessKey and Signature do not match an account"
        refused("Orders", ["orders-producer", "wrong-secret"], mismatch)
        refused("Orders", ["nobody-at-all", "producer-secret"], mismatch)
        refused(
            "Payments",
            ["orders-producer", "producer-secret"],
            "orders-producer has no PUB permission on topic 'Payments'",
        )
        reader = client.consume("Orders", "pull", "orders-group", 5, timeout_s=20,
                                credentials=["orders-consumer", "consumer-secret"])  # fmt: skip
        received = [e for e in reader.finish() if e["event"] == "received"]
        assert sorted(e["body"] for e in received) == sorted(e["body"] for e in sent)
    finally:
        client.close()

    async def count(topic: str) -> int:
        async with Admin(ns, credentials=ADMIN) as admin:
            return sum(s.max_offset for s in await admin.topic_stats(topic))

    assert asyncio.run(count("Orders")) == 5  # nothing refused was stored
    assert asyncio.run(count("Payments")) == 0


def test_brokers_and_a_namesrv_that_require_strong_signatures(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """``aclRequireStrongSignature=true``: our clients with ``strong_signature=True`` work
    (the broker's registrations too), RocketMQ's signature alone is refused, and a captured
    topic-create replayed as DELETE_TOPIC_IN_BROKER deletes nothing (issue 25, item 9)."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    settings = {"aclEnable": "true", "aclFilePath": str(acl), "aclRequireStrongSignature": "true"}
    cluster = broker_clusters(
        replicas=1,
        credentials=("ops-admin", "ops-admin-secret"),
        extra_settings=settings | {"aclAccessKey": "ops-admin", "aclSecretKey": "ops-admin-secret"},
        namesrv_settings=settings,
    )
    broker = cluster.wait_routable()["broker-a"]  # registered: strong-signed
    ns = cluster.namesrv_addr
    strong_admin = Credentials("ops-admin", "ops-admin-secret", strong_signature=True)
    strong_producer = Credentials("orders-producer", "producer-secret", strong_signature=True)

    async def main() -> None:
        async with Admin(ns, credentials=ADMIN) as weak:
            remark = await _refusal(lambda: weak.create_topic("Orders", 4, wait_s=5))
            assert "requires LedgerMQ's strong signature" in remark
        async with Admin(ns, credentials=strong_admin) as admin:
            await admin.create_topic("Orders", 4, wait_s=20)
        producer = Producer("orders-producers", ns, credentials=strong_producer, retry_times=0)
        await producer.start()
        try:
            await producer.send("Orders", b"signed strongly")
        finally:
            await producer.shutdown()

        fields = {"topic": "Orders", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
        create = RemotingCommand(
            MQRequestCode.UPDATE_AND_CREATE_TOPIC, 0,
            ext_fields=strong_admin.sign(fields, None, MQRequestCode.UPDATE_AND_CREATE_TOPIC),
        )  # fmt: skip
        answer, _ = await _raw(broker, create)
        assert answer is not None
        assert answer.code == MQResponseCode.SUCCESS, answer
        replay = RemotingCommand(
            MQRequestCode.DELETE_TOPIC_IN_BROKER, 0, ext_fields=dict(create.ext_fields)
        )
        answer, _ = await _raw(broker, replay)
        assert answer is not None
        assert answer.code == MQResponseCode.NO_PERMISSION, answer
        assert "replayed" in (answer.remark or "")
        async with Admin(ns, credentials=strong_admin) as admin:
            stats = await admin.topic_stats("Orders")
        assert sum(s.max_offset for s in stats) == 1  # the topic and its message are still there

    asyncio.run(main())
