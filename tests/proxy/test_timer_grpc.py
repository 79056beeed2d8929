"""Timer messages through the gRPC door (issue 16 section 3): SendMessage with a
``delivery_timestamp`` answers a recall handle and the message is received only once it is
due (as a DELAY message carrying its delivery time); RecallMessage cancels one; the limits
answer in the status. Our stub over a real ``grpc.aio`` channel to an in-process group."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2

from .test_grpc_acl import _metadata
from .test_pop_grpc import _receive, _receive_request
from .test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code


def _timer(topic: str, message_id: str, body: bytes, due_ms: int) -> definition_pb2.Message:
    message = _message(topic, message_id, body, queue_id=0)
    message.system_properties.message_type = definition_pb2.DELAY
    message.system_properties.delivery_timestamp.FromMilliseconds(due_ms)
    return message


def _recall(topic: str, handle: str) -> service_pb2.RecallMessageRequest:
    return service_pb2.RecallMessageRequest(
        topic=definition_pb2.Resource(name=topic), recall_handle=handle
    )


def test_send_receive_when_due_and_recall(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "TimerT")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            due_ms = int(time.time() * 1000) + 1500
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(
                    messages=[
                        _timer("TimerT", "KEEP", b"kept", due_ms),
                        _timer("TimerT", "DROP", b"dropped", due_ms),
                    ]
                )
            )
            assert sent.status.code == Code.OK, sent.status
            kept, dropped = sent.entries
            assert kept.recall_handle
            assert dropped.recall_handle
            recalled = await stub.RecallMessage(_recall("TimerT", dropped.recall_handle))
            assert recalled.status.code == Code.OK, recalled.status
            assert recalled.message_id == "DROP"
            again = await stub.RecallMessage(_recall("TimerT", dropped.recall_handle))
            assert again.status.code == Code.NOT_FOUND
            assert "recalled already" in again.status.message
            bad = await stub.RecallMessage(_recall("TimerT", "garbage"))
            assert bad.status.code == Code.BAD_REQUEST
            early = await _receive(stub, _receive_request("TimerT", poll_ms=0))
            assert early[0].status.code == Code.MESSAGE_NOT_FOUND  # not visible before due
            answer = await _receive(
                stub, _receive_request("TimerT", poll_ms=5000, invisible_ms=60_000)
            )
            received_ms = int(time.time() * 1000)
            assert answer[0].status.code == Code.OK, answer[0].status
            messages = [r.message for r in answer[1:-1]]
            assert [m.body for m in messages] == [b"kept"]
            system = messages[0].system_properties
            assert system.message_id == "KEEP"
            assert system.message_type == definition_pb2.DELAY
            assert system.delivery_timestamp.ToMilliseconds() == due_ms
            assert received_ms >= due_ms
            assert system.store_timestamp.ToMilliseconds() >= due_ms
            await asyncio.sleep(2.0)  # the recalled one never comes
            late = await _receive(stub, _receive_request("TimerT", poll_ms=0))
            assert late[0].status.code == Code.MESSAGE_NOT_FOUND
            delivered = await stub.RecallMessage(_recall("TimerT", kept.recall_handle))
            assert delivered.status.code == Code.NOT_FOUND
            assert "delivered" in delivered.status.message

    _run(tmp_path, test)


def test_limits_and_past_due(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "TimerL")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            now_ms = int(time.time() * 1000)
            far = _timer("TimerL", "FAR", b"far", now_ms + 4 * 24 * 3600 * 1000)
            answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[far]))
            assert answer.status.code == Code.BAD_REQUEST
            assert "timerMaxDelaySec" in answer.status.message
            past = _timer("TimerL", "PAST", b"past", now_ms - 60_000)
            answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[past]))
            assert answer.status.code == Code.OK
            assert answer.entries[0].recall_handle == ""  # stored at once: nothing to recall
            got = await _receive(stub, _receive_request("TimerL", poll_ms=2000))
            assert [r.message.body for r in got[1:-1]] == [b"past"]
            later = _timer("TimerL", "LATER", b"later", now_ms + 60_000)
            answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[later]))
            handle = answer.entries[0].recall_handle
        # a replica that is not the master forwards the recall to the handle's master
        slave = next(b for b in group.brokers.values() if b is not master)
        channel, stub = _stub(slave.grpc_address)
        async with channel:
            recalled = await stub.RecallMessage(_recall("TimerL", handle))
            assert recalled.status.code == Code.OK, recalled.status
            assert recalled.message_id == "LATER"
            again = await stub.RecallMessage(_recall("TimerL", handle))
            assert again.status.code == Code.NOT_FOUND
            assert "recalled already" in again.status.message

    _run(tmp_path, test)


def test_recall_needs_pub_on_the_topic_with_acl(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        "  - accessKey: timer-writer\n"
        "    secretKey: timer-secret\n"
        "    defaultTopicPerm: DENY\n"
        "    topicPerms: [TimerAcl=PUB, Watched=SUB]\n"
    )

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "TimerAcl")
        await _topic_with_route(group, "Watched")
        signed = _metadata("timer-writer", "timer-secret")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            due_ms = int(time.time() * 1000) + 60_000
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_timer("TimerAcl", "A1", b"a", due_ms)]),
                metadata=signed,
            )
            assert sent.status.code == Code.OK, sent.status
            handle = sent.entries[0].recall_handle
            anonymous = await stub.RecallMessage(_recall("TimerAcl", handle))
            assert anonymous.status.code == Code.UNAUTHORIZED
            # SUB is not enough: a recall changes what is delivered, as a send does
            watched = await stub.RecallMessage(_recall("Watched", handle), metadata=signed)
            assert watched.status.code == Code.FORBIDDEN
            assert "PUB" in watched.status.message
            recalled = await stub.RecallMessage(_recall("TimerAcl", handle), metadata=signed)
            assert recalled.status.code == Code.OK, recalled.status

    _run(tmp_path, test, acl_enable=True, acl_file_path=str(acl))
