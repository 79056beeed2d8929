"""The generated RocketMQ 5 protocol stubs: private descriptor pool, coexistence, wire identity.

Spec protocol-remoting-and-grpc.md section 3.4: loading protoc's plain output beside the official
client's stubs fails with "duplicate symbol". Ours live in a private pool
(``ledgermq.proxy.protocol``'s docstring says why); these tests hold the official client's own
generated modules (test data, verbatim from its 5.1.2 wheel) against that choice, each case in a
child process so that the default pool of this one stays clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pool, timestamp_pb2

from ledgermq.proxy.protocol import POOL, Timestamp, definition_pb2, service_pb2, service_pb2_grpc

CHILD = Path(__file__).resolve().parent / "coexist_child.py"
SRC = Path(__file__).resolve().parents[2] / "src"


def run_child(mode: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(CHILD), mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_our_files_are_in_the_private_pool_only() -> None:
    assert definition_pb2.DESCRIPTOR.pool is POOL
    assert service_pb2.DESCRIPTOR.name == "apache/rocketmq/v2/service.proto"
    assert definition_pb2.Message.DESCRIPTOR.full_name == "apache.rocketmq.v2.Message"
    with pytest.raises(KeyError):
        descriptor_pool.Default().FindMessageTypeByName("apache.rocketmq.v2.Message")
    with pytest.raises(KeyError):
        descriptor_pool.Default().FindFileByName("apache/rocketmq/v2/definition.proto")


def test_well_known_types_are_the_private_pools() -> None:
    """The rule in the package docstring: our Timestamp fits, the default pool's does not."""
    props = definition_pb2.SystemProperties(born_timestamp=Timestamp(seconds=5))
    assert type(props.born_timestamp) is Timestamp
    props.born_timestamp.FromMilliseconds(1_234)
    assert props.born_timestamp.ToMilliseconds() == 1_234
    with pytest.raises(TypeError):
        props.born_timestamp.CopyFrom(timestamp_pb2.Timestamp(seconds=5))  # type: ignore[arg-type]


def test_every_rpc_of_the_spec_is_in_the_service() -> None:
    """Spec section 3.1's list; the gRPC paths keep the upstream package name."""
    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.full_name == "apache.rocketmq.v2.MessagingService"
    names = {method.name for method in service.methods}
    assert names >= {
        "QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage",
        "AckMessage", "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset",
        "GetOffset", "QueryOffset", "EndTransaction", "Telemetry", "NotifyClientTermination",
        "ChangeInvisibleDuration", "RecallMessage",
    }  # fmt: skip
    assert service_pb2_grpc.MessagingServiceServicer.__name__ == "MessagingServiceServicer"


def test_protoc_output_in_the_default_pool_would_collide() -> None:
    """The control: without the private pool the official client's modules break ours."""
    outcome = run_child("default-pool")["outcome"]
    assert "duplicate" in outcome.lower(), outcome


@pytest.mark.parametrize("order", ["ours-first", "theirs-first"])
def test_official_client_stubs_and_ours_in_one_process(order: str) -> None:
    result = run_child(order)
    assert result["service"] == ["apache.rocketmq.v2.MessagingService"] * 2
    # bytes made by our classes parse with theirs, field for field, and back unchanged
    assert result["topic"] == "TopicTest"
    assert result["body"] == b"\x00hello\xff".hex()
    assert result["user_properties"] == {"k": "v"}
    assert result["message_type"] == "FIFO"
    assert result["born_ms"] == 1_700_000_000_123
    assert result["back_equal"] is True
    # a real HTTP/2 call: their stub's method paths reach our servicer
    assert result["route_status"] == "OK"
    assert result["route_queue"] == ["TopicTest", 7]
    assert result["receive_status"] == ["MESSAGE_NOT_FOUND"]
    assert result["ack_on_base_servicer"] == "UNIMPLEMENTED"
