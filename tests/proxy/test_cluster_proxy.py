"""The stand-alone proxy (``ledgermq proxy -n``, RocketMQ's cluster mode) as a real process in
front of a 3-replica group of real processes (``broker_clusters``).

With our generated stubs: routes and assignments name the proxy for every broker group (broker
name kept); sends are stored and read back through our remoting PullConsumer; POP receive, ack,
change of invisible duration (the handle it made stale is refused); a bad handle and the RPCs
not served here answer their status codes. Across a kill -9 of the master, the same channel to
the proxy goes on sending, and every acknowledged send is readable. With the official Python
client 5.1.2: its Producer and its SimpleConsumer through the proxy, its Producer across a kill
-9, and its transactional Producer with a checker (check-backs relayed by the proxy).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from tests.proxy import test_official_client_fifo as fifo
from tests.proxy.proxy_process import ProxyProcess
from tests.proxy.test_grpc_acl import _metadata as _grpc_metadata
from tests.proxy.test_official_client import (
    GROUP,
    SIMPLE,
    TOPIC,
    Driver,
    _cluster,
    client_python,
    read_back,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.testing.tls_certs import CertificateSet

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

TRANSACTIONS = Path(__file__).with_name("rmq5_transaction_driver.py")
TRANSACTION_SETTINGS = {"transactionTimeOut": "1000", "transactionCheckInterval": "300"}

Code = definition_pb2.Code


@pytest.fixture
def proxied(
    broker_clusters: MakeCluster, tmp_path: Path
) -> Iterator[tuple[BrokerCluster, ProxyProcess]]:
    cluster, _ = _cluster(broker_clusters)
    proxy = ProxyProcess(cluster.namesrv_addr, tmp_path / "proxy")
    try:
        yield cluster, proxy
    finally:
        proxy.close()


def _message(index: int) -> definition_pb2.Message:
    message = definition_pb2.Message(body=f"body-{index}".encode())
    message.topic.name = TOPIC
    message.user_properties["index"] = str(index)
    system = message.system_properties
    system.message_id = uuid.uuid4().hex.upper()
    system.tag = "T"
    system.keys.append(f"k{index}")
    system.message_type = definition_pb2.NORMAL
    system.born_timestamp.GetCurrentTime()
    return message


def _send(stub: Any, index: int, timeout_s: float = 3.0) -> service_pb2.SendMessageResponse:
    request = service_pb2.SendMessageRequest(messages=[_message(index)])
    response: service_pb2.SendMessageResponse = stub.SendMessage(request, timeout=timeout_s)
    return response


def _receive(
    stub: Any, group: str, count: int, invisible_s: int = 30
) -> list[service_pb2.ReceiveMessageResponse]:
    request = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name=group),
        message_queue=definition_pb2.MessageQueue(
            topic=definition_pb2.Resource(name=TOPIC),
            id=-1,
            broker=definition_pb2.Broker(name=GROUP),
        ),
        filter_expression=definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="*"),
        batch_size=count,
        auto_renew=False,
    )
    request.invisible_duration.FromSeconds(invisible_s)
    request.long_polling_timeout.FromSeconds(2)
    return list(stub.ReceiveMessage(request, timeout=10))


def _ack(stub: Any, group: str, handle: str, message_id: str) -> service_pb2.AckMessageResponse:
    request = service_pb2.AckMessageRequest(
        group=definition_pb2.Resource(name=group),
        topic=definition_pb2.Resource(name=TOPIC),
        entries=[service_pb2.AckMessageEntry(message_id=message_id, receipt_handle=handle)],
    )
    response: service_pb2.AckMessageResponse = stub.AckMessage(request, timeout=5)
    return response


def test_routes_sends_and_pop_through_the_proxy(
    proxied: tuple[BrokerCluster, ProxyProcess],
) -> None:
    cluster, proxy = proxied
    host, _, port = proxy.address.rpartition(":")
    with grpc.insecure_channel(proxy.address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=TOPIC)), timeout=5
        )
        assert route.status.code == Code.OK, route.status
        assert len(route.message_queues) == 4
        for queue in route.message_queues:
            assert queue.broker.name == GROUP
            assert len(queue.accept_message_types) == 4  # a topic without message.type: MIXED
            (address,) = queue.broker.endpoints.addresses
            assert (address.host, address.port) == (host, int(port))
        missing = stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="NoSuchTopic")),
            timeout=5,
        )
        assert missing.status.code == Code.TOPIC_NOT_FOUND

        sent = {}
        for index in range(10):
            response = _send(stub, index)
            assert response.status.code == Code.OK, response.status
            (entry,) = response.entries
            sent[entry.message_id] = index
        found = read_back(cluster.namesrv_addr)
        assert set(found) == set(sent)
        for message_id, index in sent.items():
            message = found[message_id]
            assert message.body == f"body-{index}".encode()
            assert message.tags == "T"
            assert message.keys == [f"k{index}"]
            assert message.properties["index"] == str(index)

        assignment = stub.QueryAssignment(
            service_pb2.QueryAssignmentRequest(
                topic=definition_pb2.Resource(name=TOPIC),
                group=definition_pb2.Resource(name="proxy-pop"),
            ),
            timeout=5,
        )
        assert assignment.status.code == Code.OK
        (only,) = assignment.assignments
        assert only.message_queue.id == -1
        assert only.message_queue.broker.name == GROUP

        received: dict[str, definition_pb2.Message] = {}
        deadline = time.monotonic() + 30
        while len(received) < 10 and time.monotonic() < deadline:
            for answer in _receive(stub, "proxy-pop", 32):
                if answer.HasField("message"):
                    received[answer.message.system_properties.message_id] = answer.message
        assert set(received) == set(sent)
        for message_id, message in received.items():
            assert message.body == f"body-{sent[message_id]}".encode()
            assert message.system_properties.delivery_attempt == 1
            assert "POP_CK" not in message.user_properties
            handle = message.system_properties.receipt_handle
            assert handle.split(" ")[5] == GROUP, handle

        first_id, first = next(iter(received.items()))
        change = service_pb2.ChangeInvisibleDurationRequest(
            group=definition_pb2.Resource(name="proxy-pop"),
            topic=definition_pb2.Resource(name=TOPIC),
            receipt_handle=first.system_properties.receipt_handle,
            message_id=first_id,
        )
        change.invisible_duration.FromSeconds(60)
        changed = stub.ChangeInvisibleDuration(change, timeout=5)
        assert changed.status.code == Code.OK, changed.status
        assert changed.receipt_handle != first.system_properties.receipt_handle
        stale = _ack(stub, "proxy-pop", first.system_properties.receipt_handle, first_id)
        assert stale.status.code == Code.INVALID_RECEIPT_HANDLE, stale.status
        dead_id, dead = list(received.items())[1]
        forwarded = stub.ForwardMessageToDeadLetterQueue(
            service_pb2.ForwardMessageToDeadLetterQueueRequest(
                group=definition_pb2.Resource(name="proxy-pop"),
                topic=definition_pb2.Resource(name=TOPIC),
                receipt_handle=dead.system_properties.receipt_handle,
                message_id=dead_id,
            ),
            timeout=10,
        )
        assert forwarded.status.code == Code.OK, forwarded.status
        _check_dead_letter(stub, "%DLQ%proxy-pop", dead_id, dead.body)
        for message_id, message in received.items():
            handle = (
                changed.receipt_handle
                if message_id == first_id
                else message.system_properties.receipt_handle
            )
            acked = _ack(stub, "proxy-pop", handle, message_id)
            assert acked.status.code == Code.OK, acked.status
        again = _ack(stub, "proxy-pop", changed.receipt_handle, first_id)
        assert again.status.code == Code.OK, "an ack is idempotent (the broker's POP service)"
        garbage = _ack(stub, "proxy-pop", "not a handle", first_id)
        assert garbage.status.code == Code.INVALID_RECEIPT_HANDLE
        nothing = _receive(stub, "proxy-pop", 32)
        assert [a.status.code for a in nothing] == [Code.MESSAGE_NOT_FOUND]

        # a timer message passes through as the remoting send carries it (TIMER_DELIVER_MS)
        timer = _message(99)
        timer.system_properties.message_type = definition_pb2.DELAY
        due_ms = int(time.time() * 1000) + 1500
        timer.system_properties.delivery_timestamp.FromMilliseconds(due_ms)
        timed = stub.SendMessage(service_pb2.SendMessageRequest(messages=[timer]), timeout=5)
        assert timed.status.code == Code.OK, timed.status
        sent[timer.system_properties.message_id] = 99
        arrived: list[definition_pb2.Message] = []
        deadline = time.monotonic() + 15
        while not arrived and time.monotonic() < deadline:
            arrived = [a.message for a in _receive(stub, "proxy-pop", 32) if a.HasField("message")]
        arrived_ms = time.time() * 1000
        assert [m.system_properties.message_id for m in arrived] == [
            timer.system_properties.message_id
        ]
        assert due_ms - 50 <= arrived_ms < due_ms + 5000
        assert (
            _ack(stub, "proxy-pop", arrived[0].system_properties.receipt_handle, "").status.code
            == Code.OK
        )
        # a timer message still pending is recalled through the proxy (RECALL_MESSAGE)
        later = _message(98)
        later.system_properties.message_type = definition_pb2.DELAY
        later.system_properties.delivery_timestamp.FromMilliseconds(
            int(time.time() * 1000) + 60_000
        )
        pending = stub.SendMessage(service_pb2.SendMessageRequest(messages=[later]), timeout=5)
        assert pending.status.code == Code.OK, pending.status
        (pending_entry,) = pending.entries
        assert pending_entry.recall_handle
        recall = service_pb2.RecallMessageRequest(
            topic=definition_pb2.Resource(name=TOPIC), recall_handle=pending_entry.recall_handle
        )
        recalled = stub.RecallMessage(recall, timeout=5)
        assert recalled.status.code == Code.OK, recalled.status
        assert recalled.message_id == later.system_properties.message_id
        twice = stub.RecallMessage(recall, timeout=5)
        assert twice.status.code == Code.NOT_FOUND, twice.status
        recall.recall_handle = "not-a-handle"
        assert stub.RecallMessage(recall, timeout=5).status.code == Code.BAD_REQUEST

        _pull_everything(stub, route.message_queues, sent)

        end = stub.EndTransaction(
            service_pb2.EndTransactionRequest(
                topic=definition_pb2.Resource(name=TOPIC), transaction_id="not-one"
            ),
            timeout=5,
        )
        assert end.status.code == Code.INVALID_TRANSACTION_ID, end.status
        garbage_dlq = stub.ForwardMessageToDeadLetterQueue(
            service_pb2.ForwardMessageToDeadLetterQueueRequest(
                group=definition_pb2.Resource(name="proxy-pop"),
                topic=definition_pb2.Resource(name=TOPIC),
                receipt_handle="not a handle",
            ),
            timeout=5,
        )
        assert garbage_dlq.status.code == Code.INVALID_RECEIPT_HANDLE


def _check_dead_letter(stub: Any, topic: str, message_id: str, body: bytes) -> None:
    """The dead-letter topic (created by the broker on the first one) holds the message."""
    deadline = time.monotonic() + 30
    while True:
        route = stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic)), timeout=5
        )
        if route.status.code == Code.OK or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert route.status.code == Code.OK, route.status
    found = {}
    for queue in route.message_queues:
        _, messages, _ = _pull(stub, queue, 0)
        found.update({m.system_properties.message_id: m.body for m in messages})
    assert found == {message_id: body}


def _pull(
    stub: Any, queue: definition_pb2.MessageQueue, offset: int
) -> tuple[definition_pb2.Status, list[definition_pb2.Message], int]:
    request = service_pb2.PullMessageRequest(
        group=definition_pb2.Resource(name="proxy-pull"),
        message_queue=queue,
        offset=offset,
        batch_size=32,
        filter_expression=definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="*"),
    )
    request.long_polling_timeout.FromMilliseconds(0)
    answers = list(stub.PullMessage(request, timeout=10))
    first, *middle, last = answers
    assert last.HasField("next_offset"), answers
    return first.status, [a.message for a in middle], last.next_offset


def _pull_everything(
    stub: Any, queues: Sequence[definition_pb2.MessageQueue], sent: dict[str, int]
) -> None:
    """The PullConsumer set through the proxy: each queue read from QueryOffset BEGINNING to
    END, every message sent found once; the group's offset stored and read back; an offset
    past the end refused with where to go on."""
    pulled: list[str] = []
    group = definition_pb2.Resource(name="proxy-pull")
    for queue in queues:
        policies = (definition_pb2.BEGINNING, definition_pb2.END)
        low, high = (
            stub.QueryOffset(
                service_pb2.QueryOffsetRequest(message_queue=queue, query_offset_policy=p),
                timeout=5,
            )
            for p in policies
        )
        assert (low.status.code, high.status.code) == (Code.OK, Code.OK)
        offset = low.offset
        while offset < high.offset:
            answer, messages, offset = _pull(stub, queue, offset)
            assert answer.code == Code.OK, answer
            pulled.extend(m.system_properties.message_id for m in messages)
        answer, messages, after = _pull(stub, queue, offset)
        assert (answer.code, messages, after) == (Code.MESSAGE_NOT_FOUND, [], offset)
        beyond, _, go_on = _pull(stub, queue, offset + 1000)
        assert beyond.code == Code.ILLEGAL_OFFSET, beyond
        assert go_on == high.offset
        updated = stub.UpdateOffset(
            service_pb2.UpdateOffsetRequest(group=group, message_queue=queue, offset=offset),
            timeout=5,
        )
        assert updated.status.code == Code.OK, updated.status
        got = stub.GetOffset(
            service_pb2.GetOffsetRequest(group=group, message_queue=queue), timeout=5
        )
        assert (got.status.code, got.offset) == (Code.OK, offset)
    assert sorted(pulled) == sorted(sent)
    no_broker = definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=TOPIC), id=0)
    nameless = list(
        stub.PullMessage(
            service_pb2.PullMessageRequest(
                group=group, message_queue=no_broker, offset=0, batch_size=1
            ),
            timeout=5,
        )
    )
    assert [a.status.code for a in nameless] == [Code.BAD_REQUEST]


def test_sends_through_the_proxy_go_on_across_a_master_kill(
    proxied: tuple[BrokerCluster, ProxyProcess],
) -> None:
    """One channel to the proxy, never a new route: sends resume once the new master serves,
    and every acknowledged one is readable afterwards."""
    cluster, proxy = proxied
    master = cluster.wait_master(GROUP)
    acked: dict[str, float] = {}
    failed: list[str] = []
    with grpc.insecure_channel(proxy.address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        for index in range(20):
            response = _send(stub, index)
            assert response.status.code == Code.OK, response.status
            acked[response.entries[0].message_id] = time.monotonic()
        cluster.kill9(GROUP, master)
        killed_at = time.monotonic()
        index = 20
        resumed = 0  # acknowledged more than 1 s after the kill: 10 are asked for below
        # Up to 20 s; done sooner once the sends have resumed well past what is asked for.
        while time.monotonic() - killed_at < 20 and resumed < 100:
            try:
                response = _send(stub, index, timeout_s=5)
            except grpc.RpcError as exc:
                failed.append(str(exc.code()))
                continue
            if response.status.code == Code.OK:
                acked[response.entries[0].message_id] = now = time.monotonic()
                resumed += now - killed_at > 1.0
            else:
                failed.append(response.status.message)
            index += 1
    after = sorted(t - killed_at for t in acked.values() if t > killed_at)
    print(f"proxy, our stub: first ack after the kill at +{after[0] if after else -1:.2f} s; "
          f"{len(after)} acked after, {len(failed)} failed: {failed[:3]}")  # fmt: skip
    assert len([t for t in after if t > 1.0]) >= 10, proxy.log()
    found = read_back(cluster.namesrv_addr)
    missing = [m for m in acked if m not in found]
    assert not missing, f"{len(missing)} acknowledged sends are not readable"


def test_official_python_client_through_the_proxy(
    proxied: tuple[BrokerCluster, ProxyProcess], tmp_path: Path
) -> None:
    python = client_python()
    cluster, proxy = proxied
    producer = Driver(python, tmp_path / "producer", {"endpoints": proxy.address,
                                                       "topic": TOPIC, "count": 12})  # fmt: skip
    try:
        producer.finish(60)
    finally:
        producer.close()
    assert not producer.of("failed"), producer.of("failed")[:3]
    sent = {e["message_id"] for e in producer.of("sent")}
    assert len(sent) == 12, producer.report()
    assert set(read_back(cluster.namesrv_addr)) == sent
    consumer = Driver(
        python, tmp_path / "consumer",
        {"endpoints": proxy.address, "topic": TOPIC, "group": "simple-g", "count": 12,
         "duration_s": 40},
        script=SIMPLE,
    )  # fmt: skip
    try:
        consumer.finish(80)
    finally:
        consumer.close()
    assert not consumer.of("failed"), consumer.of("failed")[:3]
    acked = [e["message_id"] for e in consumer.of("acked")]
    assert sorted(acked) == sorted(sent), consumer.report() + proxy.log()
    attempts: dict[str, list[int]] = {}
    for event in consumer.of("received"):
        attempts.setdefault(event["message_id"], []).append(event["attempt"])
    (held,) = (e["message_id"] for e in consumer.of("held"))
    (renewed,) = (e["message_id"] for e in consumer.of("renewed"))
    assert attempts[held] == [1, 2]
    assert attempts[renewed] == [1]
    assert consumer.of("done")[0]["leftover"] == 0


def test_official_python_producer_across_a_master_kill_through_the_proxy(
    proxied: tuple[BrokerCluster, ProxyProcess], tmp_path: Path
) -> None:
    """The official Python Producer, its one endpoint the proxy: sends resume without a route
    refresh (at least 10 acknowledged more than 1 s after the kill), and every acknowledged
    send is readable afterwards."""
    python = client_python()
    cluster, proxy = proxied
    master = cluster.wait_master(GROUP)
    # 8 s of sends (it was 14): the kill comes after the first 30 (about 1 s in), the first
    # send after it is acknowledged 1.6 s later, then some 30 a second
    driver = Driver(python, tmp_path / "client", {"endpoints": proxy.address, "topic": TOPIC,
                                                   "duration_s": 8, "pause_s": 0.02})  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(driver.of("sent")) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(driver.of("sent")) >= 30, driver.report()
        acked_before = len(driver.of("sent"))
        cluster.kill9(GROUP, master)
        new_master = cluster.wait_master(GROUP, 20)
        assert new_master != master
        driver.finish(60)
    finally:
        driver.close()
    sent, failed = driver.of("sent"), driver.of("failed")
    killed_at = sent[acked_before - 1]["t"]
    after = [e["t"] - killed_at for e in sent[acked_before:]]
    print(  # the run's shape, for the report: -s shows it
        f"python through the proxy: acked before kill {acked_before}, acked in all {len(sent)}, "
        f"failed {len(failed)}; master {master} -> {new_master}; first ack after the kill at "
        f"+{after[0] if after else -1:.2f} s; "
        f"errors: {sorted({e['error'][:80] for e in failed})[:3]}"
    )
    assert len([t for t in after if t > 1.0]) >= 10, driver.report() + proxy.log()
    found = read_back(cluster.namesrv_addr)
    missing = [e["message_id"] for e in sent if e["message_id"] not in found]
    assert not missing, f"{len(missing)} acknowledged sends are not readable: {missing[:5]}"


def test_official_transactional_producer_through_the_proxy(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """The official Python client's transactional Producer, its one endpoint the proxy: each
    round commits one half message, rolls one back and leaves one open, which the master checks
    back over the proxy's remoting connection and the proxy relays to the client's Telemetry
    stream; the checker commits the even orphans. Read back: every committed message once, no
    rolled-back one."""
    python = client_python()
    cluster, _ = _cluster(broker_clusters, extra_settings=TRANSACTION_SETTINGS)
    proxy = ProxyProcess(cluster.namesrv_addr, tmp_path / "proxy")
    rounds = 3
    driver = Driver(
        python, tmp_path / "client",
        {"endpoints": proxy.address, "topic": TOPIC, "count": rounds, "wait_s": 6},
        script=TRANSACTIONS,
    )  # fmt: skip
    try:
        driver.finish(90)
    finally:
        driver.close()
        proxy.close()
    failed = driver.of("failed")
    assert not failed, f"sends or ends failed: {failed[:3]}\n{driver.report()}\n{proxy.log()}"
    sent = {e["body"]: e for e in driver.of("sent")}
    assert len(sent) == 3 * rounds, driver.report()
    assert all(e["transaction_id"].startswith(f"{GROUP}:") for e in sent.values())
    checked = {e["body"] for e in driver.of("checked")}
    assert checked == {f"orphan-{i}" for i in range(rounds)}, driver.report() + proxy.log()
    expected = sorted(
        [f"commit-{i}" for i in range(rounds)] + [f"orphan-{i}" for i in range(0, rounds, 2)]
    )
    deadline = time.monotonic() + 20
    while True:
        bodies = sorted(m.body.decode() for m in read_back(cluster.namesrv_addr).values())
        if bodies == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert bodies == expected


def test_tls_on_the_proxys_own_port(
    broker_clusters: MakeCluster, tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    """``--set tls.server.mode=enforcing`` and the certificate keys (RocketMQ's names, as a
    broker's door takes them): a client trusting the CA queries and sends through the proxy; a
    plaintext one cannot connect."""
    certs = tls_certificates
    cluster, _ = _cluster(broker_clusters)
    settings = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
    }
    extra = [f"--set={key}={value}" for key, value in settings.items()]
    proxy = ProxyProcess(cluster.namesrv_addr, tmp_path / "proxy", extra)
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
        with grpc.secure_channel(proxy.address, credentials) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = _send(stub, 1, timeout_s=10)
            assert sent.status.code == Code.OK, sent.status
        with grpc.insecure_channel(proxy.address) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                _send(stub, 2, timeout_s=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        proxy.close()
    assert set(read_back(cluster.namesrv_addr)) == {sent.entries[0].message_id}


PROXY_ACL = """\
accounts:
  - accessKey: proxy-writer
    secretKey: writer-secret
    defaultTopicPerm: DENY
    topicPerms: [GrpcTopic=PUB]
"""


def test_acl_on_the_proxys_own_port(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    """``--set aclEnable=true --set aclFilePath=...``: the proxy checks each call's
    ``authorization`` metadata against ``plain_acl.yml`` as a broker's door does: anonymous and
    forged calls are UNAUTHORIZED, a signed send to a topic the account may publish is stored,
    a receive it may not make is FORBIDDEN."""
    cluster, _ = _cluster(broker_clusters)
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PROXY_ACL)
    proxy = ProxyProcess(
        cluster.namesrv_addr,
        tmp_path / "proxy",
        ["--set=aclEnable=true", f"--set=aclFilePath={acl}"],
    )
    try:
        with grpc.insecure_channel(proxy.address) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            request = service_pb2.SendMessageRequest(messages=[_message(1)])
            anonymous = stub.SendMessage(request, timeout=5)
            assert anonymous.status.code == Code.UNAUTHORIZED, anonymous.status
            forged = stub.SendMessage(
                request, timeout=5, metadata=_grpc_metadata("proxy-writer", "nope")
            )
            assert forged.status.code == Code.UNAUTHORIZED
            signed = stub.SendMessage(
                request, timeout=5, metadata=_grpc_metadata("proxy-writer", "writer-secret")
            )
            assert signed.status.code == Code.OK, signed.status
            receive = service_pb2.ReceiveMessageRequest(
                group=definition_pb2.Resource(name="g"),
                message_queue=definition_pb2.MessageQueue(
                    topic=definition_pb2.Resource(name=TOPIC),
                    broker=definition_pb2.Broker(name=GROUP),
                ),
                batch_size=1,
            )
            (refused,) = stub.ReceiveMessage(
                receive, timeout=5, metadata=_grpc_metadata("proxy-writer", "writer-secret")
            )
            assert refused.status.code == Code.FORBIDDEN, refused.status
    finally:
        proxy.close()
    assert set(read_back(cluster.namesrv_addr)) == {signed.entries[0].message_id}


def test_pop_through_the_proxy_across_a_master_kill(
    proxied: tuple[BrokerCluster, ProxyProcess],
) -> None:
    """POP through one channel to the proxy across a kill -9 of the master: messages acked
    before the kill never come back; every other one (handed out and not acked, or never
    handed out) is received from the new master and acked."""
    cluster, proxy = proxied
    master = cluster.wait_master(GROUP)
    group = "proxy-failover"
    with grpc.insecure_channel(proxy.address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        sent = set()
        for index in range(20):
            response = _send(stub, index)
            assert response.status.code == Code.OK, response.status
            sent.add(response.entries[0].message_id)
        first: dict[str, str] = {}
        deadline = time.monotonic() + 20
        while len(first) < 10 and time.monotonic() < deadline:
            for answer in _receive(stub, group, 10 - len(first), invisible_s=3):
                if answer.HasField("message"):
                    system = answer.message.system_properties
                    first[system.message_id] = system.receipt_handle
        assert len(first) == 10
        acked_before = set(list(first)[:6])  # 4 handed out and left unacknowledged
        for message_id in acked_before:
            assert _ack(stub, group, first[message_id], message_id).status.code == Code.OK
        cluster.kill9(GROUP, master)
        killed_at = time.monotonic()
        assert cluster.wait_master(GROUP, 20) != master
        after: list[str] = []
        deadline = time.monotonic() + 45
        while set(after) < sent - acked_before and time.monotonic() < deadline:
            for answer in _receive(stub, group, 32):
                if answer.HasField("message"):
                    system = answer.message.system_properties
                    after.append(system.message_id)
                    acked = _ack(stub, group, system.receipt_handle, system.message_id)
                    assert acked.status.code == Code.OK, acked.status
    print(f"proxy POP: {len(after)} received after the kill, the last at "
          f"+{time.monotonic() - killed_at:.1f} s")  # fmt: skip
    assert set(after) == sent - acked_before, proxy.log()
    assert not set(after) & acked_before, "an acknowledged message came back"


def test_official_fifo_producer_and_simple_consumer_through_the_proxy(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """FIFO through the proxy (``test_official_client_fifo``'s drivers and checks): consumers of
    the orderly group are told ``fifo`` in their settings (others not); the proxy hashes a
    message group onto one queue, the broker's POP keeps each group in order;
    every acknowledged send received, each group in the order sent, a held message back with
    attempt 2 before its successors."""
    python = client_python()
    cluster, _ = fifo._fifo_cluster(broker_clusters)
    proxy = ProxyProcess(cluster.namesrv_addr, tmp_path / "proxy")
    groups = [f"order-{i}" for i in range(4)]
    try:
        assert _told_fifo(proxy.address, fifo.CONSUMER_GROUP, fifo.TOPIC)
        assert not _told_fifo(proxy.address, "not-orderly", fifo.TOPIC)
        _check_fifo_topic_type(proxy.address)
        producer = Driver(python, tmp_path / "producer",
                          {"endpoints": proxy.address, "topic": fifo.TOPIC, "groups": groups,
                           "per_group": 6}, script=fifo.PRODUCER)  # fmt: skip
        try:
            producer.finish(90)
        finally:
            producer.close()
        assert not producer.of("failed"), producer.of("failed")[:3]
        assert len(producer.of("sent")) == 24
        # queues=0: no leftover count (four receives long-polling 2 s each): not read here
        consumer = fifo._consumer(
            python, tmp_path / "consumer", proxy.address, hold=True, duration_s=90, count=24,
            queues=0,
        )  # fmt: skip
        try:
            consumer.finish(120)
        finally:
            consumer.close()
    finally:
        proxy.close()
    assert not consumer.of("ack_failed"), consumer.of("ack_failed")[:3]
    per_group = fifo.check_fifo(producer, consumer)
    assert sorted(per_group) == groups
    (held,) = consumer.of("held")
    attempts = [a for s, a in per_group[held["group"]] if s == held["seq"]]
    assert attempts == [1, 2], per_group[held["group"]]
    acked = [e["message_id"] for e in consumer.of("acked")]
    assert sorted(acked) == sorted(e["message_id"] for e in producer.of("sent"))


def _told_fifo(address: str, group: str, topic: str) -> bool:
    """The ``subscription.fifo`` a consumer of ``group`` is told in Telemetry settings."""
    command = service_pb2.TelemetryCommand()
    settings = command.settings
    settings.client_type = definition_pb2.SIMPLE_CONSUMER
    settings.subscription.group.name = group
    entry = settings.subscription.subscriptions.add()
    entry.topic.name = topic
    entry.expression.type = definition_pb2.TAG
    entry.expression.expression = "*"
    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        (answer,) = stub.Telemetry(iter([command]), timeout=10)
    assert answer.status.code == Code.OK, answer.status
    return bool(answer.settings.subscription.fifo)


def _check_fifo_topic_type(address: str) -> None:
    """The FIFO topic's route accepts FIFO messages only, and a NORMAL send to it is refused
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (``enableTopicMessageTypeCheck``, on by default)."""
    with grpc.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=fifo.TOPIC)),
            timeout=5,
        )
        assert route.status.code == Code.OK, route.status
        assert {tuple(q.accept_message_types) for q in route.message_queues} == {
            (definition_pb2.FIFO,)
        }
        normal = _message(0)
        normal.topic.name = fifo.TOPIC
        refused = stub.SendMessage(service_pb2.SendMessageRequest(messages=[normal]), timeout=5)
        assert refused.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, refused.status
