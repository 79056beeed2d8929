"""The stand-alone proxy's ``maxMessageSize`` (a real proxy process in front of a 3-replica group
of real processes): a body of exactly that size goes through to the brokers, though gRPC itself
refuses received messages over 4 MiB unless told otherwise (``proxy/server_options.py``); one
byte more is answered MESSAGE_BODY_TOO_LARGE with the limit named, before anything is forwarded.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import grpc
import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from tests.proxy.proxy_process import ProxyProcess
from tests.proxy.test_official_client import TOPIC, _cluster, read_back

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Code = definition_pb2.Code
LIMIT = 5 * 1024 * 1024
"""Above gRPC's default 4 MiB, as a cluster set up for larger messages has it."""


def _message(size: int) -> definition_pb2.Message:
    message = definition_pb2.Message(body=b"m" * size)
    message.topic.name = TOPIC
    system = message.system_properties
    system.message_id = uuid.uuid4().hex.upper()
    system.message_type = definition_pb2.NORMAL
    system.born_timestamp.GetCurrentTime()
    return message


def test_a_body_of_max_message_size_goes_through_and_a_larger_one_is_refused(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    settings = {"maxMessageSize": str(LIMIT), "mappedFileSizeCommitLog": str(4 * LIMIT)}
    cluster, _ = _cluster(broker_clusters, extra_settings=settings)
    proxy = ProxyProcess(
        cluster.namesrv_addr, tmp_path / "proxy", ["--set", f"maxMessageSize={LIMIT}"]
    )
    try:
        with grpc.insecure_channel(proxy.address) as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            fits = _message(LIMIT)
            sent = stub.SendMessage(service_pb2.SendMessageRequest(messages=[fits]), timeout=20)
            assert sent.status.code == Code.OK, sent.status
            refused = stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_message(LIMIT + 1)]), timeout=20
            )
            assert refused.status.code == Code.MESSAGE_BODY_TOO_LARGE, refused.status
            assert f"exceeds maxMessageSize {LIMIT}" in refused.status.message
    finally:
        proxy.close()
    stored = read_back(cluster.namesrv_addr)
    assert [len(m.body) for m in stored.values()] == [LIMIT]
