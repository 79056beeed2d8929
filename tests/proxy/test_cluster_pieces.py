"""The stand-alone proxy's pure pieces: the writable queues a send picks from, the broker group a
receipt handle names, the transaction ids it hands out and reads back, the statuses of remoting
failures, and the ``--listen`` address."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.remoting.consumers import parse_heartbeat
from ledgermq.clock import SystemClock
from ledgermq.errors import (
    ConfigError,
    ConnectError,
    MQResponseError,
    NoRouteError,
    RequestTimeoutError,
)
from ledgermq.messaging import ClientKind, ClientSession, EndTransaction, Resolution
from ledgermq.proxy.cluster import parse_listen
from ledgermq.proxy.cluster_transactions import transaction_id
from ledgermq.proxy.forward import WriteQueue, write_queues
from ledgermq.proxy.grpc_access import signed_in_publisher
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP, Refusal
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.remote_backend import end_fields, handle_broker, recall_broker, transaction_at
from ledgermq.proxy.remote_sessions import consumer_data
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.telemetry import TelemetryStreams
from ledgermq.security.acl_files import AclFiles
from ledgermq.security.gate import AclGate
from ledgermq.wire.message import create_offset_message_id
from ledgermq.wire.route import BrokerData, QueueData, TopicRouteData

if TYPE_CHECKING:
    from pathlib import Path

Code = definition_pb2.Code


def test_write_queues_are_the_writable_ones_in_group_order() -> None:
    route = TopicRouteData(
        queue_datas=(
            QueueData("broker-b", 4, 2, 6),
            QueueData("broker-a", 4, 3, 6),
            QueueData("broker-c", 4, 4, 4),  # read-only
        ),
        broker_datas=(BrokerData("c", "broker-a", {0: "h:1"}),),
    )
    assert write_queues(route) == [
        WriteQueue("broker-a", 0), WriteQueue("broker-a", 1), WriteQueue("broker-a", 2),
        WriteQueue("broker-b", 0), WriteQueue("broker-b", 1),
    ]  # fmt: skip


def test_a_handle_names_its_broker_group() -> None:
    assert handle_broker("7 1795658549814 30000 0 0 broker-a 2 15") == "broker-a"
    assert handle_broker("not a handle") is None
    assert handle_broker("7 1 2 0 0  2 15") is None  # no broker name
    assert handle_broker("") is None


def _end(tid: str, resolution: Resolution, *, from_check: bool = False) -> EndTransaction:
    return EndTransaction(
        topic="T", transaction_id=tid, message_id="M1", resolution=resolution,
        from_check=from_check,
    )  # fmt: skip


def test_transaction_ids_name_the_group_and_where_the_half_message_is() -> None:
    offset_msg_id = create_offset_message_id("10.0.0.7", 10911, 123_456)
    tid = transaction_id("broker-a", offset_msg_id)
    assert transaction_at(tid) == ("broker-a", 123_456)
    fields = end_fields(_end(tid, Resolution.COMMIT, from_check=True), 123_456)
    assert fields["commitLogOffset"] == "123456"
    assert fields["commitOrRollback"] == "8"
    assert fields["fromTransactionCheck"] == "true"
    assert (fields["msgId"], fields["topic"], fields["transactionId"]) == ("M1", "T", tid)
    rolled = end_fields(_end(tid, Resolution.ROLLBACK), 123_456)
    assert (rolled["commitOrRollback"], rolled["fromTransactionCheck"]) == ("12", "false")
    for bad in ("", offset_msg_id, "broker-a:", "broker-a:nothex", ":" + offset_msg_id):
        with pytest.raises(Refusal) as refused:
            transaction_at(bad)
        assert refused.value.status.code == Code.INVALID_TRANSACTION_ID, bad


def test_remoting_failures_become_v2_statuses() -> None:
    def code(exc: Exception) -> int:
        return remote_status(exc).code  # type: ignore[arg-type]

    assert code(MQResponseError("busy", 2)) == Code.TOO_MANY_REQUESTS
    assert code(MQResponseError("slave", 14)) == Code.HA_NOT_AVAILABLE
    assert code(MQResponseError("no topic", 17)) == Code.TOPIC_NOT_FOUND
    assert code(MQResponseError("no perm", 16)) == Code.FORBIDDEN
    assert code(MQResponseError("stale", 208)) == Code.INVALID_RECEIPT_HANDLE
    assert code(MQResponseError("odd", 4242)) == Code.INTERNAL_ERROR
    assert code(ConnectError("refused", "h:1")) == Code.HA_NOT_AVAILABLE
    assert code(RequestTimeoutError("slow", "h:1")) == Code.HA_NOT_AVAILABLE
    assert code(NoRouteError("no master")) == Code.HA_NOT_AVAILABLE
    assert "no master reachable" in remote_status(NoRouteError("x")).message


def test_a_recall_handle_names_its_broker_group() -> None:
    handle = base64.urlsafe_b64encode(b"v1 T broker-a 1795658549814 MSGID").decode()
    assert recall_broker(handle) == "broker-a"
    assert recall_broker("not-a-handle") is None
    assert recall_broker(base64.urlsafe_b64encode(b"v2 T broker-a 1 M").decode()) is None
    assert recall_broker(base64.urlsafe_b64encode(b"v1 T broker-a soon M").decode()) is None


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert parse_listen("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_listen("[::1]:9") == ("[::1]", 9)
    for bad in ("127.0.0.1", "h:port", "h:70000", ""):
        with pytest.raises(ConfigError):
            parse_listen(bad)


_RELAY_ACL = """
accounts:
  - accessKey: tx-owner
    secretKey: owner-secret
    defaultTopicPerm: DENY
    topicPerms: [T=PUB]
  - accessKey: intruder-1
    secretKey: intruder-secret
    defaultTopicPerm: DENY
    topicPerms: [Other=PUB]
"""


def test_check_backs_are_relayed_only_to_a_stream_signed_with_pub_on_the_topic(
    tmp_path: Path,
) -> None:
    """Issue 25 item 5: the masters' check-back (the half message) went to the newest stream
    whose settings claim the topic, any account's; now only to one whose account may publish
    it, and to nobody when none may."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(_RELAY_ACL)
    gate = AclGate(AclFiles([str(acl)], SystemClock()), "proxy")

    def signed_by(access_key: str) -> dict[str, str]:
        header = (
            f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature=00"
        )
        return {"authorization": header}

    producers = TelemetryStreams()
    owner_box: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()
    intruder_box: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()
    owner = producers.open(
        owner_box, signed_in_publisher(gate, "10.0.0.1:5000", signed_by("tx-owner"))
    )
    intruder = producers.open(
        intruder_box, signed_in_publisher(gate, "10.0.0.2:5000", signed_by("intruder-1"))
    )
    producers.publishes(owner, ["T"])
    producers.publishes(intruder, ["T"])  # the newest claims the topic too
    command = service_pb2.TelemetryCommand()
    assert producers.relay("T", command)
    assert (owner_box.qsize(), intruder_box.qsize()) == (1, 0)
    producers.close(owner)
    assert not producers.relay("T", command)
    assert intruder_box.empty()


def test_a_v5_session_heartbeats_the_masters_as_the_broker_reads_it() -> None:
    """The stand-alone proxy tells the masters of a v5 consumer in a remoting heartbeat
    (``remote_sessions.consumer_data``): the remoting door reads back the very announcement
    a replica's own door registers (``ClientSession.heartbeat``)."""
    session = ClientSession(
        client_id="v5-c", address="10.0.0.9:7000", kind=ClientKind.CONSUMER, group="G",
        subscriptions={"B": ("x || y", "TAG"), "A": ("a > 1", "SQL92")}, publishes=(),
        language="JAVA", version="5.0.7",
    )  # fmt: skip
    announced = session.heartbeat(GRPC_PRODUCER_GROUP)
    body = {
        "clientID": "v5-c",
        "producerDataSet": [],
        "consumerDataSet": [consumer_data(c) for c in announced.consumers],
    }
    read = parse_heartbeat(json.dumps(body).encode())
    assert read == announced
    assert read.consumers[0].expression_types == {"A": "SQL92", "B": "TAG"}
