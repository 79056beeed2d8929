"""Broker-side message trace (issue 18 section 4, ``traceTopicEnable``): the gRPC door records a
RocketMQ 5 client's send (``Pub``), each delivery of a POP receive (``SubBefore``) and its ack
(``SubAfter``) in the configured trace topic, which the broker created; ``ledgermq admin message
--trace-topic`` shows them with the message. With tracing off there is no trace topic and no
tracer for the door to call. Real gRPC and remoting over TCP to an in-process 3-replica group;
the CLI runs as a process."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2
from tests.test_cli_admin import ledgermq

from .test_pop_grpc import _receive, _receive_request
from .test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(120)

Code = definition_pb2.Code


async def _routed(group: Group, topic: str) -> None:
    for _ in range(500):
        if group.namesrv.routes.route(topic) is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no route for {topic}")


async def _message_json(group: Group, *args: str) -> list[dict[str, Any]]:
    done = await asyncio.to_thread(
        ledgermq, "admin", "-n", group.namesrv_addr, "message", *args, "--json"
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_grpc_send_receive_and_ack_are_traced_by_the_broker(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Traced")
        assert master.state is not None
        await _routed(group, "OpsTrace")  # made on becoming master, in the background
        assert master.state.topics.find("OpsTrace") is not None
        assert master.state.topics.find("RMQ_SYS_TRACE_TOPIC") is None
        channel, stub = _stub(master.grpc_address)
        async with channel:
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(
                    messages=[_message("Traced", "TRACE-1", b"hello", tag="t1", keys=["order-9"])]
                )
            )
            assert sent.status.code == Code.OK, sent.status
            answers = await _receive(stub, _receive_request("Traced", group="G", poll_ms=2000))
            (delivered,) = [a.message for a in answers if a.HasField("message")]
            ack = service_pb2.AckMessageRequest(
                entries=[
                    service_pb2.AckMessageEntry(
                        message_id="TRACE-1",
                        receipt_handle=delivered.system_properties.receipt_handle,
                    )
                ]
            )
            ack.group.name = "G"
            ack.topic.name = "Traced"
            acked = await stub.AckMessage(ack)
            assert acked.status.code == Code.OK, acked.status

        lookup = ("-t", "Traced", "--key", "TRACE-1", "--trace-topic", "OpsTrace")
        for _ in range(60):
            (record,) = await _message_json(group, *lookup)
            if len(record["trace"]) == 3:
                break
            await asyncio.sleep(0.25)
        assert [e["kind"] for e in record["trace"]] == ["Pub", "SubBefore", "SubAfter"]
        pub, before, after = record["trace"]
        assert record["msgId"] == "TRACE-1"
        assert (pub["msg_id"], pub["topic"], pub["tags"], pub["keys"]) == (
            "TRACE-1", "Traced", "t1", "order-9"
        )  # fmt: skip
        assert pub["store_host"] == master.config.address
        assert pub["body_length"] == 5
        assert pub["success"] is True
        assert pub["offset_msg_id"] == record["offsetMsgId"]
        assert (before["group"], before["retry_times"], before["keys"]) == ("G", 0, "order-9")
        assert before["request_id"] == after["request_id"]
        assert (after["group"], after["success"]) == ("G", True)
        assert after["cost_ms"] >= 0
        assert pub["timestamp_ms"] <= before["timestamp_ms"] <= after["timestamp_ms"]

        # the table form; the default trace topic holds nothing of it
        text = await asyncio.to_thread(
            ledgermq, "admin", "-n", group.namesrv_addr, "message", *lookup
        )
        assert text.returncode == 0, text.stderr
        assert f"sent by __grpc_producer to {master.config.address} in " in text.stdout
        assert "delivered to G (attempt 1)" in text.stdout
        assert "consumed by G in " in text.stdout
        (untraced,) = await _message_json(group, "-t", "Traced", "--key", "TRACE-1")
        assert untraced["trace"] == []

    _run(tmp_path, test, trace_topic_enable=True, msg_trace_topic_name="OpsTrace")


def test_with_tracing_off_there_is_no_trace_topic_and_no_tracer(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Plain")
        assert master.services is not None
        assert master.services.trace is None
        assert master.state is not None
        assert master.state.topics.find("RMQ_SYS_TRACE_TOPIC") is None

    _run(tmp_path, test)
