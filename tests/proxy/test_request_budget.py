"""What one gRPC request may make a door parse, and the request bytes a door holds at once
(issue 25 items 6 and 8; ``proxy.request_budget``, ``proxy.admission``).

Before: a door read any request up to 130 MiB and parsed it on the loop that runs the replica's
Raft; a 5 MiB SendMessage of 2.6 million empty messages took 120 ms to parse, and with the ACL
off nothing bounded the request bytes a door held. The door test below was answered only after
the whole request had been parsed (and then every empty message was checked one by one).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.request_budget import (
    MAX_REQUEST_FIELDS,
    ByteBudget,
    RequestBytes,
    RequestTooComplexError,
    check_field_budget,
)
from ledgermq.proxy.server_options import max_request_bytes
from tests.proxy.test_servicer import Group, _run, _stub

if TYPE_CHECKING:
    from pathlib import Path

Code = definition_pb2.Code
SEND = service_pb2.SendMessageRequest.DESCRIPTOR


def _empty_messages(count: int) -> bytes:
    request = service_pb2.SendMessageRequest()
    for _ in range(count):
        request.messages.add()
    return request.SerializeToString()


def _message(body: bytes, properties: int = 20) -> definition_pb2.Message:
    message = definition_pb2.Message(body=body)
    message.topic.name = "T"
    message.system_properties.message_id = "01"
    for i in range(properties):
        message.user_properties[f"k{i}"] = "v"
    return message


def test_a_request_of_many_tiny_fields_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(RequestTooComplexError, match=f"more than {MAX_REQUEST_FIELDS} protobuf"):
        check_field_budget(_empty_messages(2_600_000), SEND)
    # user properties are counted inside each message (a map entry and its key and value)
    many = service_pb2.SendMessageRequest(messages=[_message(b"x", properties=3000)])
    with pytest.raises(RequestTooComplexError):
        check_field_budget(many.SerializeToString(), SEND)


def test_real_requests_pass_and_a_large_body_is_one_field() -> None:
    batch = service_pb2.SendMessageRequest(messages=[_message(b"x" * 100) for _ in range(100)])
    check_field_budget(batch.SerializeToString(), SEND)
    large = service_pb2.SendMessageRequest(messages=[_message(b"x" * (8 * 1024 * 1024))])
    check_field_budget(large.SerializeToString(), SEND)
    check_field_budget(_empty_messages(MAX_REQUEST_FIELDS - 1), SEND)  # small: not walked


def test_a_request_that_is_not_protobuf_is_refused() -> None:
    raw = b"\x0a\xff\xff\xff\x0f" + b"\x00" * (4 * MAX_REQUEST_FIELDS)
    with pytest.raises(RequestTooComplexError, match="not protobuf"):
        check_field_budget(raw, SEND)


def test_the_byte_budget_makes_calls_wait_in_order_and_gives_back_on_cancel() -> None:
    async def scenario() -> None:
        budget = ByteBudget(100)
        assert await budget.reserve(60) == 60
        second = asyncio.ensure_future(budget.reserve(60))
        third = asyncio.ensure_future(budget.reserve(10))
        await asyncio.sleep(0)
        assert not second.done()
        assert not third.done(), "a later, smaller call went ahead of a waiting one"
        budget.release(60)
        assert await second == 60
        assert await third == 10
        assert budget.available == 30
        fourth = asyncio.ensure_future(budget.reserve(50))
        await asyncio.sleep(0)
        fourth.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fourth
        budget.release(70)
        assert budget.available == 100
        assert await budget.reserve(1000) == 100  # never more than the whole budget

    asyncio.run(scenario())


def test_one_source_holds_at_most_a_quarter_and_others_go_on() -> None:
    async def scenario() -> None:
        budget = RequestBytes(400, max_request=25)
        async with contextlib.AsyncExitStack() as held:
            for _ in range(2):  # the greedy source's share: 100 bytes
                await held.enter_async_context(budget.reserved("10.0.0.1", 50))
            third = asyncio.ensure_future(held.enter_async_context(budget.reserved("10.0.0.1", 50)))
            await asyncio.sleep(0)
            assert not third.done(), "one source took more than its share"
            async with budget.reserved("10.0.0.2", 50) as other:  # another source goes on
                assert other.size == 50
                other.shrink(10)
                assert budget.whole.available == 400 - 100 - 10
            third.cancel()
            with pytest.raises(asyncio.CancelledError):
                await third
        assert budget.whole.idle
        assert not budget._sources  # idle sources are forgotten

    asyncio.run(scenario())


def test_the_door_answers_a_request_of_too_many_fields_bad_request(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await group.master()
        channel, stub = _stub(master.grpc_address)
        async with channel:
            request = service_pb2.SendMessageRequest.FromString(_empty_messages(100_000))
            reply = await stub.SendMessage(request, timeout=30)
            assert reply.status.code == Code.BAD_REQUEST, reply.status
            assert f"more than {MAX_REQUEST_FIELDS} protobuf fields" in reply.status.message

    _run(tmp_path, test)


def test_a_door_reads_at_most_twice_max_message_size() -> None:
    assert max_request_bytes(4 * 1024 * 1024) == 9 * 1024 * 1024
