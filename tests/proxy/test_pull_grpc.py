"""The gRPC door's PullConsumer RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) with our
generated stub over a real ``grpc.aio`` channel to an in-process 3-replica group: the pull
stream's shape (status, messages, next offset), filters, long polling, an offset outside the
queue, offsets stored through the ledger and read back from a new master, and the statuses bad
requests get."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2

from .test_pop_grpc import _send
from .test_servicer import Group, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.proxy.protocol import service_pb2_grpc

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code


def _queue(topic: str, queue_id: int = 0, broker: str = "") -> definition_pb2.MessageQueue:
    queue = definition_pb2.MessageQueue(id=queue_id)
    queue.topic.name = topic
    queue.broker.name = broker
    return queue


def _pull_request(
    topic: str, offset: int, *, group: str = "PG", poll_ms: int = 0, **fields: Any
) -> service_pb2.PullMessageRequest:
    request = service_pb2.PullMessageRequest(
        message_queue=_queue(topic, fields.pop("queue_id", 0)),
        offset=offset,
        batch_size=fields.pop("batch_size", 32),
    )
    request.group.name = group
    request.long_polling_timeout.FromMilliseconds(poll_ms)
    for key, value in fields.items():
        getattr(request, key).CopyFrom(value)
    return request


async def _pull(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, request: service_pb2.PullMessageRequest
) -> tuple[definition_pb2.Status, list[definition_pb2.Message], int | None]:
    """(status, messages, next offset) of one pull, checking the stream's order."""
    answer = [r async for r in stub.PullMessage(request)]
    kinds = [r.WhichOneof("content") for r in answer]
    assert kinds[0] == "status", kinds
    assert all(k == "message" for k in kinds[1:-1]), kinds
    next_offset = answer[-1].next_offset if kinds[-1] == "next_offset" else None
    return answer[0].status, [r.message for r in answer[1:-1]], next_offset


def test_pull_reads_a_queue_from_an_offset_with_filters_and_long_polling(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "PullT", queues=1)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            await _send(stub, "PullT", b"p0", b"p1", b"p2", b"p3")  # tags even, odd, even, odd
            status, messages, next_offset = await _pull(stub, _pull_request("PullT", 0))
            assert status.code == Code.OK, status
            assert [m.body for m in messages] == [b"p0", b"p1", b"p2", b"p3"]
            assert [m.system_properties.queue_offset for m in messages] == [0, 1, 2, 3]
            assert messages[1].system_properties.tag == "odd"
            assert not messages[0].system_properties.receipt_handle  # a pull, not a POP
            assert next_offset == 4

            # from the middle, at most two
            status, messages, next_offset = await _pull(
                stub, _pull_request("PullT", 1, batch_size=2)
            )
            assert [m.body for m in messages] == [b"p1", b"p2"]
            assert next_offset == 3

            # a tag filter: only the odd ones, and the next offset is past the skipped ones
            odd = definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="odd")
            status, messages, next_offset = await _pull(
                stub, _pull_request("PullT", 0, filter_expression=odd)
            )
            assert [m.body for m in messages] == [b"p1", b"p3"]
            assert next_offset == 4
            none = definition_pb2.FilterExpression(type=definition_pb2.TAG, expression="nope")
            status, messages, next_offset = await _pull(
                stub, _pull_request("PullT", 0, filter_expression=none)
            )
            assert status.code == Code.MESSAGE_NOT_FOUND, status
            assert (messages, next_offset) == ([], 4)

            # at the end: nothing new, the same offset again
            status, messages, next_offset = await _pull(stub, _pull_request("PullT", 4))
            assert (status.code, messages, next_offset) == (Code.MESSAGE_NOT_FOUND, [], 4)

            # past the end: ILLEGAL_OFFSET, and where to go on
            status, messages, next_offset = await _pull(stub, _pull_request("PullT", 99))
            assert status.code == Code.ILLEGAL_OFFSET, status
            assert "go on from 4" in status.message
            assert next_offset == 4

            # long polling: a pull held at the end gets a message sent meanwhile, at once
            started = time.monotonic()
            held = asyncio.ensure_future(_pull(stub, _pull_request("PullT", 4, poll_ms=5000)))
            await asyncio.sleep(0.3)
            assert not held.done()
            await _send(stub, "PullT", b"late")
            status, messages, next_offset = await asyncio.wait_for(held, 10)
            assert status.code == Code.OK, status
            assert [m.body for m in messages] == [b"late"]
            assert next_offset == 5
            assert time.monotonic() - started < 4.5

    _run(tmp_path, test)


def test_offsets_are_stored_read_back_and_queried(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "OffT", queues=1)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            get = service_pb2.GetOffsetRequest(message_queue=_queue("OffT", 0))
            get.group.name = "OG"
            fresh = await stub.GetOffset(get)
            assert (fresh.status.code, fresh.offset) == (Code.OK, 0)  # nothing committed yet

            update = service_pb2.UpdateOffsetRequest(message_queue=_queue("OffT", 0), offset=3)
            update.group.name = "OG"
            stored = await stub.UpdateOffset(update)
            assert stored.status.code == Code.OK, stored.status
            read = await stub.GetOffset(get)
            assert (read.status.code, read.offset) == (Code.OK, 3)

            before = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            await _send(stub, "OffT", b"q0", b"q1")  # the topic's one queue
            query = service_pb2.QueryOffsetRequest(message_queue=_queue("OffT", 0))
            query.query_offset_policy = definition_pb2.END
            assert (await stub.QueryOffset(query)).offset == 2
            query.query_offset_policy = definition_pb2.BEGINNING
            assert (await stub.QueryOffset(query)).offset == 0
            query.query_offset_policy = definition_pb2.TIMESTAMP
            query.timestamp.FromMilliseconds(before)
            assert (await stub.QueryOffset(query)).offset == 0
            query.timestamp.FromMilliseconds(int(time.time() * 1000) + 60_000)
            assert (await stub.QueryOffset(query)).offset == 2
            query.ClearField("timestamp")
            untimed = await stub.QueryOffset(query)
            assert untimed.status.code == Code.BAD_REQUEST, untimed.status

            # a slave's door asks the master, not its copy (proxy.local_backend); the
            # committed offset survives a new master
            slave = next(b for b in group.brokers.values() if b is not master)
            s_channel, s_stub = _stub(slave.grpc_address)
            async with s_channel:
                forwarded_update = await s_stub.UpdateOffset(update)
                assert forwarded_update.status.code == Code.OK, forwarded_update.status
                forwarded = await s_stub.GetOffset(get)
                assert forwarded.status.code == Code.OK, forwarded.status
                assert forwarded.offset == update.offset
            await master.close()
            group.brokers = {n: b for n, b in group.brokers.items() if b is not master}
            successor = await group.master()
            n_channel, n_stub = _stub(successor.grpc_address)
            async with n_channel:
                for _ in range(200):  # until the new master has applied what it leads
                    after = await n_stub.GetOffset(get)
                    if after.status.code == Code.OK:
                        break
                    await asyncio.sleep(0.05)
                assert (after.status.code, after.offset) == (Code.OK, 3), after.status

    _run(tmp_path, test)


def test_bad_pull_and_offset_requests_get_clear_statuses(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "BadT")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            cases: list[tuple[service_pb2.PullMessageRequest, Code.ValueType | None]] = [
                (_pull_request("NoSuchTopic", 0), Code.TOPIC_NOT_FOUND),
                (_pull_request("BadT", 0, group=""), Code.ILLEGAL_CONSUMER_GROUP),
                (_pull_request("", 0), Code.ILLEGAL_TOPIC),
                (_pull_request("BadT", -1), Code.ILLEGAL_OFFSET),
                (_pull_request("BadT", 0, batch_size=0), Code.BAD_REQUEST),
                (_pull_request("BadT", 0, queue_id=9), Code.BAD_REQUEST),
                (_pull_request("BadT", 0, poll_ms=-5), Code.ILLEGAL_POLLING_TIME),
            ]
            sql = definition_pb2.FilterExpression(type=definition_pb2.SQL, expression="a >")
            cases.append((_pull_request("BadT", 0, filter_expression=sql), None))
            for request, code in cases:
                status, messages, next_offset = await _pull(stub, request)
                if code is None:  # a broken SQL92 filter, or SQL92 off: refused, never skipped
                    assert status.code in (Code.ILLEGAL_FILTER_EXPRESSION, Code.NOT_IMPLEMENTED)
                else:
                    assert status.code == code, (request, status)
                assert status.message
                assert (messages, next_offset) == ([], None)

            other = service_pb2.PullMessageRequest(
                message_queue=_queue("BadT", 0, broker="another-broker"), batch_size=1
            )
            other.group.name = "PG"
            status, _, _ = await _pull(stub, other)
            assert status.code == Code.BAD_REQUEST
            assert "another-broker" in status.message

            update = service_pb2.UpdateOffsetRequest(message_queue=_queue("BadT", 0), offset=-2)
            update.group.name = "PG"
            assert (await stub.UpdateOffset(update)).status.code == Code.ILLEGAL_OFFSET
            unknown = service_pb2.GetOffsetRequest(message_queue=_queue("Nope", 0))
            unknown.group.name = "PG"
            assert (await stub.GetOffset(unknown)).status.code == Code.TOPIC_NOT_FOUND

    _run(tmp_path, test)
