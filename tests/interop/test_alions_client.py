"""The real Node.js RocketMQ client ali-ons (npm ``ali-ons``, pinned in ``alions/package.json``)
against our NameServer and brokers, on a plain cluster and with ACL keys (issue 17).

Each test starts a real cluster (one NameServer, one 3-replica broker group, as processes) and
runs the client in child processes (``alions/driver.js`` under ``node``, JSON command in, JSON
event lines out, as ``rocketmq_driver.py`` does for the C++ client), each with its own ``HOME``
(the client's log, ``$HOME/ali-ons.log``, is attached to a failure) and killed at a deadline.
The package is installed once per test session with ``npm ci`` into the pytest cache
(``.pytest_cache/d/alions/<hash of the lock file>``); the tests are skipped, with one line,
without ``node`` and ``npm`` or when the registry cannot be reached.

ali-ons does not create topics: its first route lookup throws on TOPIC_NOT_EXIST (a Java or C++
producer falls back to TBW102's route), so the tests create theirs with ``Admin``.

Select with ``-m interop``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import Admin, Credentials
from tests.interop.test_rocketmq_client import (
    FAST_RETRIES,
    Client,
    ClientRun,
    check_received,
    received_all,
)
from tests.npm_packages import installed_node_modules
from tests.security.test_broker_acl import ADMIN, _secure_cluster

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]
    Event = dict[str, Any]

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.timeout(120)]

PACKAGE = Path(__file__).with_name("alions")
DRIVER = PACKAGE / "driver.js"
NO_PERMISSION = 16
SEND_MESSAGE_V2 = 310


@pytest.fixture(scope="session")
def alions_node_path(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """``node_modules`` holding the pinned ali-ons (``tests.npm_packages``)."""
    return installed_node_modules(request, tmp_path_factory, PACKAGE, "ali-ons")


class AliOnsRun(ClientRun):
    """One run of ``driver.js``; its log is ``$HOME/ali-ons.log``."""

    def client_log(self, lines: int = 40) -> str:
        log = self.home / "ali-ons.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])


class AliOns(Client):
    """Starts ``driver.js`` runs against one cluster; every run is killed when the test ends."""

    def __init__(self, tmp: Path, namesrv: str, node_path: Path) -> None:
        super().__init__(tmp, namesrv)
        self.node_path = node_path

    def run(self, home: Path, command: dict[str, Any], limit_s: float) -> ClientRun:
        node = shutil.which("node") or "node"
        return AliOnsRun(
            home, command, timeout_s=limit_s, argv=[node, str(DRIVER)],
            env={"NODE_PATH": str(self.node_path)},
        )  # fmt: skip

    def send(self, topic: str, count: int, **options: Any) -> ClientRun:
        """A finished producer run (it reports refusals as events, not as a failure)."""
        run = self.start("produce", topic=topic, count=count, group="alions-pg", **options)
        run.finish()
        return run

    def sent(self, topic: str, count: int, **options: Any) -> list[Event]:
        """``count`` messages sent and each acknowledged SEND_OK with an id and an offset."""
        run = self.send(topic, count, **options)
        sent = run.of("sent")
        assert len(sent) == count, f"{len(sent)} of {count} acknowledged\n{run.report()}"
        for event in sent:
            assert event["status"] == "SEND_OK", run.report()
            assert len(event["msg_id"]) == 32, run.report()  # store host + commit log offset
            assert isinstance(event["offset"], int), run.report()
        return sent

    def push(
        self, topic: str, group: str, count: int, timeout_s: float = 20, **options: Any
    ) -> ClientRun:
        """A push consumer run (in the background): ``count`` messages or ``timeout_s``."""
        return self.start(
            "consume", limit_s=timeout_s + 15, topic=topic, group=group, count=count,
            timeout_s=timeout_s, **options,
        )  # fmt: skip


def _create_topics(namesrv: str, *topics: str, credentials: Credentials | None = None) -> None:
    async def create() -> None:
        async with Admin(namesrv, credentials=credentials) as admin:
            for topic in topics:
                await admin.create_topic(topic, 4, wait_s=20)

    asyncio.run(create())


def _stored(namesrv: str, topic: str, credentials: Credentials | None = None) -> int:
    """Messages the broker group holds for ``topic`` (sum of its queues' max offsets)."""

    async def count() -> int:
        async with Admin(namesrv, credentials=credentials) as admin:
            return sum(s.max_offset for s in await admin.topic_stats(topic))

    return asyncio.run(count())


@pytest.fixture
def plain(
    broker_clusters: MakeCluster, tmp_path: Path, alions_node_path: Path
) -> Iterator[tuple[BrokerCluster, AliOns]]:
    cluster = broker_clusters(replicas=3, extra_settings=FAST_RETRIES)
    cluster.wait_routable("TBW102")
    client = AliOns(tmp_path / "clients", cluster.namesrv_addr, alions_node_path)
    try:
        yield cluster, client
    finally:
        client.close()


@pytest.fixture
def secure(
    broker_clusters: MakeCluster, tmp_path: Path, alions_node_path: Path
) -> Iterator[tuple[BrokerCluster, AliOns]]:
    """The ACL cluster of ``tests/security/test_broker_acl.py`` (plain_acl.yml with an admin, a
    producer with PUB on Orders only, a consumer with SUB on Orders and orders-group, and an
    audit log at ``tmp_path / "audit.log"``)."""
    cluster = _secure_cluster(broker_clusters, tmp_path)
    cluster.wait_routable("TBW102")
    client = AliOns(tmp_path / "clients", cluster.namesrv_addr, alions_node_path)
    try:
        yield cluster, client
    finally:
        client.close()


def test_alions_sends_and_its_push_consumer_receives_every_message_in_queue_order(
    plain: tuple[BrokerCluster, AliOns],
) -> None:
    """ali-ons's producer spreads 16 messages over the topic's 4 queues, each acknowledged
    SEND_OK with its message id (the broker's store host and commit log offset) and queue
    offset; a push consumer of a new group (ali-ons's default CONSUME_FROM_LAST_OFFSET: the
    broker answers QUERY_CONSUMER_OFFSET on young queues with 0) receives each once, with the
    same id and offset, each queue dense from 0 and in send order. A second producer run while
    the consumer is parked in long polling is delivered as well; the offsets it commits on
    close hold: the group started again receives nothing."""
    cluster, client = plain
    _create_topics(cluster.namesrv_addr, "AliOnsTopic")
    first = client.sent("AliOnsTopic", 16, prefix="early")
    assert {e["queue_id"] for e in first} == {0, 1, 2, 3}
    consumer = client.push("AliOnsTopic", "alions-cg", 24, timeout_s=30)
    assert consumer.wait_for(received_all(16), 20), consumer.report()
    later = client.sent("AliOnsTopic", 8, prefix="late")
    received = [e for e in consumer.finish() if e["event"] == "received"]
    check_received(first + later, received)
    assert {(e["topic"], e["tags"], e["reconsume_times"]) for e in received} == {
        ("AliOnsTopic", "TagA", 0)
    }
    assert all(e["keys"] == e["body"] for e in received)
    assert not consumer.of("response_error"), consumer.report()
    assert _stored(cluster.namesrv_addr, "AliOnsTopic") == 24

    # close() committed the group's offsets (UPDATE_CONSUMER_OFFSET, oneway): the broker shows
    # no lag, and the group started again has nothing left to receive.
    def lags() -> list[int]:
        async def ask() -> list[int]:
            async with Admin(cluster.namesrv_addr) as admin:
                progress = await admin.consumer_progress("alions-cg", "AliOnsTopic")
            return [p.lag for p in sorted(progress, key=lambda p: p.queue_id)]

        return asyncio.run(ask())

    deadline = time.monotonic() + 5
    while lags() != [0, 0, 0, 0] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lags() == [0, 0, 0, 0]
    again = client.push("AliOnsTopic", "alions-cg", 1, timeout_s=3)
    assert not [e for e in again.finish() if e["event"] == "received"], again.report()


def test_alions_action_retry_comes_back_through_the_retry_topic(
    plain: tuple[BrokerCluster, AliOns],
) -> None:
    """A listener answering ``Consumer.ACTION_RETRY`` makes ali-ons send the message back
    (CONSUMER_SEND_MSG_BACK with delay level 0: the broker picks the level, 1 s here); the
    broker stores it in ``%RETRY%<group>``, which the client subscribes by itself, and the
    listener gets it again on its own topic: ``reconsume_times`` 1, ``originMessageId`` the
    first delivery's id."""
    cluster, client = plain
    _create_topics(cluster.namesrv_addr, "RetryTopic")
    sent = {e["body"]: e for e in client.sent("RetryTopic", 4, prefix="r")}
    run = client.push("RetryTopic", "retrying", 4, timeout_s=30, fail_once=["r-1", "r-2"])
    events = run.finish()
    rejected = [e for e in events if e["event"] == "rejected"]
    received = {e["body"]: e for e in events if e["event"] == "received"}
    assert sorted(e["body"] for e in rejected) == ["r-1", "r-2"], run.report()
    assert sorted(received) == sorted(sent), run.report()
    for body in ("r-1", "r-2"):
        again = received[body]
        assert (again["topic"], again["reconsume_times"]) == ("RetryTopic", 1), again
        assert again["origin_msg_id"] == sent[body]["msg_id"], again
    for body in ("r-0", "r-3"):
        assert received[body]["reconsume_times"] == 0, received[body]
        assert received[body]["msg_id"] == sent[body]["msg_id"], received[body]
    assert not run.of("response_error"), run.report()
    route = cluster.route("%RETRY%retrying")
    assert route is not None
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [1]


def test_alions_with_acl_keys(secure: tuple[BrokerCluster, AliOns], tmp_path: Path) -> None:
    """ali-ons signs every request when given accessKeyId / accessKeySecret (HmacSHA1 over the
    sorted header values, some sent as JSON numbers and booleans, and the body), as RocketMQ's
    ACL checks it: the producer account's sends to its PUB topic are acknowledged and stored; a
    wrong secret, an unknown key and a topic without PUB are answered NO_PERMISSION (the
    client's send fails; the audit log names who was refused) and store nothing; the consumer
    account's push consumer receives what was sent, and a group it has no SUB on is refused."""
    cluster, client = secure
    ns = cluster.namesrv_addr
    _create_topics(ns, "Orders", "Payments", credentials=ADMIN)
    sent = client.sent("Orders", 6, credentials=["orders-producer", "producer-secret"])

    def refused(topic: str, credentials: list[str], remark: str) -> None:
        run = client.send(topic, 2, credentials=credentials, retries=0)
        assert not run.of("sent"), run.report()
        assert len(run.of("send_failed")) == 2, run.report()
        answers = [(e["request_code"], e["code"], e["remark"]) for e in run.of("response_error")]
        assert (SEND_MESSAGE_V2, NO_PERMISSION, remark) in answers, run.report()
        assert {code for _, code, _ in answers} == {NO_PERMISSION}, run.report()

    mismatch = "the AccessKey and Signature do not match an account"
    refused("Orders", ["orders-producer", "wrong-secret"], mismatch)
    refused("Orders", ["nobody-at-all", "producer-secret"], mismatch)
    refused(
        "Payments",
        ["orders-producer", "producer-secret"],
        "orders-producer has no PUB permission on topic 'Payments'",
    )

    consumer_keys = ["orders-consumer", "consumer-secret"]
    reader = client.push("Orders", "orders-group", 6, credentials=consumer_keys)
    stranger = client.push("Orders", "other-group", 1, timeout_s=10, credentials=consumer_keys)
    received = [e for e in reader.finish() if e["event"] == "received"]
    check_received(sent, received)
    assert not reader.of("response_error"), reader.report()
    assert stranger.wait_for(lambda r: bool(r.of("response_error")), 10), stranger.report()
    stranger.kill()
    assert not stranger.of("received"), stranger.report()
    assert {e["code"] for e in stranger.of("response_error")} == {NO_PERMISSION}
    assert "orders-consumer has no SUB permission on group 'other-group'" in {
        e["remark"] for e in stranger.of("response_error")
    }

    assert _stored(ns, "Orders", ADMIN) == len(sent)  # nothing refused was stored
    assert _stored(ns, "Payments", ADMIN) == 0
    audit = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    sends = [a for a in audit if a["request"] == "SEND_MESSAGE_V2" and a["result"] == "refused"]
    assert {(a["who"], a["about"].get("b")) for a in sends} == {
        ("orders-producer", "Orders"),  # the wrong secret
        ("nobody-at-all", "Orders"),
        ("orders-producer", "Payments"),
    }
    assert {a["remark"] for a in sends} == {
        mismatch,
        "orders-producer has no PUB permission on topic 'Payments'",
    }
