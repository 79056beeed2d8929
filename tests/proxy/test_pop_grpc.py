"""The gRPC door's POP RPCs (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue) with our generated stub over a real ``grpc.aio`` channel to an
in-process 3-replica group: the stream's shape (status, messages, delivery timestamp), the
fields the official clients need, per-entry ack statuses, the protocol's status codes, and that
the remoting door and the gRPC door share one POP state."""

from __future__ import annotations

import asyncio
import zlib
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.messaging import Receive
from ledgermq.messaging.consuming import PullQuery, QueueRef
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.wire.message import decode_records

from .test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.proxy.protocol import service_pb2_grpc

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code


def _receive_request(
    topic: str, *, group: str = "G", invisible_ms: int = 400, poll_ms: int = 0, **fields: Any
) -> service_pb2.ReceiveMessageRequest:
    request = service_pb2.ReceiveMessageRequest(batch_size=fields.pop("batch_size", 16))
    request.group.name = group
    request.message_queue.topic.name = topic
    request.message_queue.id = fields.pop("queue_id", -1)
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromMilliseconds(poll_ms)
    for key, value in fields.items():
        getattr(request, key).CopyFrom(value)
    return request


async def _receive(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, request: service_pb2.ReceiveMessageRequest
) -> list[service_pb2.ReceiveMessageResponse]:
    return [r async for r in stub.ReceiveMessage(request)]


async def _send(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, topic: str, *bodies: bytes
) -> None:
    for i, body in enumerate(bodies):
        tag = "odd" if i % 2 else "even"
        sent = await stub.SendMessage(
            service_pb2.SendMessageRequest(
                messages=[_message(topic, f"ID{i}-{body.hex()}", body, tag=tag, queue_id=0)]
            )
        )
        assert sent.status.code == Code.OK, sent.status


def _ack_request(topic: str, *handles: str) -> service_pb2.AckMessageRequest:
    request = service_pb2.AckMessageRequest(
        entries=[
            service_pb2.AckMessageEntry(message_id=f"m{i}", receipt_handle=h)
            for i, h in enumerate(handles)
        ]
    )
    request.group.name = "G"
    request.topic.name = topic
    return request


def test_receive_ack_change_and_forward(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "PopT", queues=1)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            await _send(stub, "PopT", b"a0", b"a1", b"a2")
            answer = await _receive(stub, _receive_request("PopT"))
            assert answer[0].WhichOneof("content") == "status"
            assert answer[0].status.code == Code.OK
            assert answer[-1].WhichOneof("content") == "delivery_timestamp"
            messages = [r.message for r in answer[1:-1]]
            assert [m.body for m in messages] == [b"a0", b"a1", b"a2"]
            first = messages[0].system_properties
            assert first.message_id.startswith("ID0-")
            assert first.tag == "even"
            assert first.delivery_attempt == 1
            assert first.invisible_duration.ToMilliseconds() == 400
            assert first.body_digest.type == definition_pb2.CRC32
            assert first.body_digest.checksum == f"{zlib.crc32(b'a0'):08X}"
            assert (first.queue_id, first.queue_offset) == (0, 0)
            assert first.message_type == definition_pb2.NORMAL
            assert first.born_timestamp.ToMilliseconds() == 1_700_000_000_000
            handles = [m.system_properties.receipt_handle for m in messages]

            empty = await _receive(stub, _receive_request("PopT"))
            assert [r.status.code for r in empty] == [Code.MESSAGE_NOT_FOUND]

            # out-of-order acks, one of them stale: per-entry statuses, MULTIPLE_RESULTS
            changed = service_pb2.ChangeInvisibleDurationRequest(receipt_handle=handles[1])
            changed.group.name, changed.topic.name = "G", "PopT"
            changed.invisible_duration.FromSeconds(10)
            renewed = await stub.ChangeInvisibleDuration(changed)
            assert renewed.status.code == Code.OK, renewed.status
            assert renewed.receipt_handle not in handles
            acked = await stub.AckMessage(_ack_request("PopT", handles[2], handles[1]))
            assert acked.status.code == Code.MULTIPLE_RESULTS
            assert [e.status.code for e in acked.entries] == [Code.OK, Code.INVALID_RECEIPT_HANDLE]
            both = await stub.AckMessage(_ack_request("PopT", renewed.receipt_handle, "junk"))
            assert [e.status.code for e in both.entries] == [Code.OK, Code.INVALID_RECEIPT_HANDLE]

            # a0 comes back after its invisible time, attempt 2; then it is forwarded to the DLQ
            await asyncio.sleep(0.5)
            again = await _receive(stub, _receive_request("PopT", invisible_ms=5000))
            (back,) = [r.message for r in again if r.WhichOneof("content") == "message"]
            assert (back.body, back.system_properties.delivery_attempt) == (b"a0", 2)
            forward = service_pb2.ForwardMessageToDeadLetterQueueRequest(
                receipt_handle=back.system_properties.receipt_handle, delivery_attempt=2,
                max_delivery_attempts=16,
            )  # fmt: skip
            forward.group.name, forward.topic.name = "G", "PopT"
            forwarded = await stub.ForwardMessageToDeadLetterQueue(forward)
            assert forwarded.status.code == Code.OK, forwarded.status
            assert master.services is not None
            dlq = await master.services.pull.pull(PullQuery("x", QueueRef("%DLQ%G", "", 0), 0))
            assert [m.body for m in decode_records(dlq.stored)] == [b"a0"]

            # both doors, one state: a message handed out over gRPC is invisible to the service
            await _send(stub, "PopT", b"shared")
            shared = await _receive(stub, _receive_request("PopT", invisible_ms=5000))
            assert [r.message.body for r in shared if r.HasField("message")] == [b"shared"]
            assert (await master.services.pop.receive(Receive("G", "PopT"))).messages == []

    _run(tmp_path, test)


def test_filters_long_polling_and_refusals(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "PopF")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            await _send(stub, "PopF", b"f0", b"f1", b"f2", b"f3")
            odd = definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="odd")
            got = await _receive(stub, _receive_request("PopF", filter_expression=odd))
            assert sorted(r.message.body for r in got if r.HasField("message")) == [b"f1", b"f3"]

            # a receive pops any queue of the broker, whatever queue it names (as the Java
            # proxy; sends go to any queue too): H2 gets all four naming queue 1, then waits
            # for the next one naming queue 0
            drained = await _receive(
                stub, _receive_request("PopF", group="H2", invisible_ms=60_000, queue_id=1)
            )
            assert sorted(r.message.body for r in drained if r.HasField("message")) == [
                b"f0",
                b"f1",
                b"f2",
                b"f3",
            ]
            loop = asyncio.get_running_loop()
            started = loop.time()
            waiting = asyncio.ensure_future(
                _receive(stub, _receive_request("PopF", group="H2", poll_ms=3000, queue_id=0))
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()
            late = _message("PopF", "LATE", b"late", queue_id=1)
            await stub.SendMessage(service_pb2.SendMessageRequest(messages=[late]))
            answer = await asyncio.wait_for(waiting, 5)
            assert [r.message.body for r in answer if r.HasField("message")] == [b"late"]
            assert loop.time() - started < 2.5

            missing = await _receive(stub, _receive_request("Nope"))
            assert [r.status.code for r in missing] == [Code.TOPIC_NOT_FOUND]
            no_group = await _receive(stub, _receive_request("PopF", group=""))
            assert [r.status.code for r in no_group] == [Code.ILLEGAL_CONSUMER_GROUP]
            zero = await _receive(stub, _receive_request("PopF", invisible_ms=0))
            assert [r.status.code for r in zero] == [Code.ILLEGAL_INVISIBLE_TIME]
            bad_sql = definition_pb2.FilterExpression(type=definition_pb2.SQL, expression="a >")
            refused = await _receive(stub, _receive_request("PopF", filter_expression=bad_sql))
            assert len(refused) == 1
            assert refused[0].status.code != Code.OK

            slave = next(b for b in group.brokers.values() if b is not master)
            slave_channel, slave_stub = _stub(slave.grpc_address)
            async with slave_channel:
                # a follower's door forwards POP to the master (proxy.local_backend)
                on_slave = await _receive(slave_stub, _receive_request("PopF"))
                assert on_slave[0].status.code in (Code.OK, Code.MESSAGE_NOT_FOUND), on_slave

    _run(tmp_path, test)
