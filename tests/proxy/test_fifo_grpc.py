"""FIFO over the gRPC door (issue 16 section 3), with our generated stub over ``grpc.aio`` to an
in-process 3-replica group: a FIFO topic (``+message.type=FIFO``) is routed as FIFO, takes
messages with a message group and refuses the rest (and a FIFO message to a NORMAL topic) with
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (a topic without a type takes every type); each group lands
in the queue the Java proxy would pick, whatever queue the client named; Telemetry tells a FIFO
group's consumer ``fifo``; receiving in the FIFO group gives each group's oldest messages in
order and nothing more of a group while they are out; unacknowledged ones come back (attempt 2)
before their successors."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import InvalidArgumentError
from ledgermq.broker.state.metadata import SubscriptionGroupConfig
from ledgermq.messaging.consuming import PullOutcome, PullQuery, QueueRef
from ledgermq.proxy.message_groups import queue_of_group
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.wire.message import decode_records
from ledgermq.wire.route import TopicConfig
from ledgermq.wire.topic_attributes import parse_changes

from .test_pop_grpc import _ack_request, _receive, _receive_request
from .test_servicer import Group, _message, _run, _stub

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code
TOPIC = "FifoT"


async def _fifo_topic(group: Group) -> BrokerServer:
    master = await group.master()
    assert master.services is not None
    await master.services.admin.create_topic(
        TopicConfig(TOPIC, 4, 4), parse_changes("+message.type=FIFO")
    )
    for _ in range(500):
        route = group.namesrv.routes.route(TOPIC)
        if route is not None and route.broker_datas[0].master_addr == master.address:
            return master
        await asyncio.sleep(0.02)
    raise AssertionError(f"no route for {TOPIC}")


def _fifo(message_id: str, body: bytes, group: str) -> definition_pb2.Message:
    message = _message(TOPIC, message_id, body, message_group=group, queue_id=0)
    message.system_properties.message_type = definition_pb2.FIFO
    return message


def test_fifo_topic_send_route_and_refusals(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _fifo_topic(group)
        assert master.services is not None
        channel, stub = _stub(master.grpc_address)
        async with channel:
            route = await stub.QueryRoute(
                service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=TOPIC))
            )
            assert {tuple(q.accept_message_types) for q in route.message_queues} == {
                (definition_pb2.FIFO,)
            }
            groups = [f"order-{i}" for i in range(6)]
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(
                    messages=[
                        _fifo(f"M{g}-{n}", f"{g}:{n}".encode(), g) for n in range(3) for g in groups
                    ]
                )
            )
            assert sent.status.code == Code.OK, sent.status
            assert [e.status.code for e in sent.entries] == [Code.OK] * 18

            for message, code in [
                (_message(TOPIC, "N1", b"n"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
                (_fifo("B1", b"b", "  "), Code.ILLEGAL_MESSAGE_GROUP),
                (_fifo("L1", b"l", "g" * 65), Code.ILLEGAL_MESSAGE_GROUP),
            ]:
                answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[message]))
                assert [e.status.code for e in answer.entries] == [code], answer
            await master.services.admin.create_topic(
                TopicConfig("PlainT", 4, 4), parse_changes("+message.type=NORMAL")
            )
            plain = _message("PlainT", "P1", b"p", message_group="order-1")
            answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[plain]))
            assert answer.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, answer.status
            assert "expected type is NORMAL, but actual type is FIFO" in answer.status.message
            # a topic that names no type takes every type
            await master.services.admin.create_topic(TopicConfig("Untyped", 4, 4))
            loose = _message("Untyped", "U1", b"u", message_group="order-1")
            answer = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[loose]))
            assert answer.status.code == Code.OK, answer.status

        # every group in the queue the Java proxy picks, in the order sent, group kept
        stored: dict[str, list[tuple[int, bytes]]] = {}
        for queue_id in range(4):
            found = await master.services.pull.pull(
                PullQuery("chk", QueueRef(TOPIC, "", queue_id), 0, 32)
            )
            if found.outcome is not PullOutcome.FOUND:
                continue
            for record in decode_records(found.stored):
                stored.setdefault(record.properties["__SHARDINGKEY"], []).append(
                    (queue_id, record.body)
                )
        assert sorted(stored) == groups
        for g in groups:
            assert stored[g] == [(queue_of_group(g, 4), f"{g}:{n}".encode()) for n in range(3)]
        assert len({queue_of_group(g, 4) for g in groups}) > 1  # not all on the client's 0

        # the type is kept by an update without attribute changes; a bad change is refused
        await master.services.admin.create_topic(TopicConfig(TOPIC, 4, 4))
        kept = master.services.admin.topics()[0][TOPIC]
        assert kept.attributes == {"message.type": "FIFO"}
        with pytest.raises(InvalidArgumentError, match="no attribute"):
            await master.services.admin.create_topic(TopicConfig("Other", 1, 1), {"x": None})

    _run(tmp_path, test)


def test_fifo_group_settings_and_ordered_receive(tmp_path: Path) -> None:
    async def test(group: Group) -> None:
        master = await _fifo_topic(group)
        assert master.services is not None
        await master.services.admin.put_group(
            SubscriptionGroupConfig("G", consume_message_orderly=True)
        )
        channel, stub = _stub(master.grpc_address)
        async with channel:
            outbox: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()

            async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
                while (command := await outbox.get()) is not None:
                    yield command

            call = stub.Telemetry(commands())
            for name, fifo in (("G", True), ("Loose", False)):
                settings = definition_pb2.Settings(client_type=definition_pb2.SIMPLE_CONSUMER)
                settings.subscription.group.name = name
                await outbox.put(service_pb2.TelemetryCommand(settings=settings))
                reply = await call.read()
                assert isinstance(reply, service_pb2.TelemetryCommand)
                assert reply.settings.subscription.fifo is fifo, name
            await outbox.put(None)

            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(
                    messages=[
                        _fifo(f"M{g}{n}", f"{g}{n}".encode(), g)
                        for n in range(3)
                        for g in ("a", "b", "c")
                    ]
                )
            )
            assert sent.status.code == Code.OK, sent.status

            async def receive(invisible_ms: int = 800) -> list[definition_pb2.Message]:
                answer = await _receive(stub, _receive_request(TOPIC, invisible_ms=invisible_ms))
                return [r.message for r in answer if r.WhichOneof("content") == "message"]

            first = await receive()
            # each group's messages, oldest first (a group's run goes out together)
            for g in ("a", "b", "c"):
                assert [m.body for m in first if m.system_properties.message_group == g] == [
                    f"{g}{n}".encode() for n in range(3)
                ]
            assert {m.system_properties.message_type for m in first} == {definition_pb2.FIFO}
            assert {m.system_properties.delivery_attempt for m in first} == {1}
            done = [m.system_properties.receipt_handle for m in first if m.body[:1] in b"bc"]
            acked = await stub.AckMessage(_ack_request(TOPIC, *done))
            assert acked.status.code == Code.OK, acked.status
            # a's three are out and invisible: a3, sent now, waits behind them
            more = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_fifo("Ma3", b"a3", "a")])
            )
            assert more.status.code == Code.OK, more.status
            assert await receive() == []
            await asyncio.sleep(0.9)  # a0, a1, a2 expire unacknowledged
            again = await receive(5000)
            assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [
                (b"a0", 2),
                (b"a1", 2),
                (b"a2", 2),
                (b"a3", 1),
            ]
            handles = [m.system_properties.receipt_handle for m in again]
            acked = await stub.AckMessage(_ack_request(TOPIC, *handles))
            assert acked.status.code == Code.OK, acked.status
            assert await receive() == []

    _run(tmp_path, test)


def test_message_type_check_turned_off(tmp_path: Path) -> None:
    """``enableTopicMessageTypeCheck=false``: routes accept every type, producers are told not
    to check, and a FIFO message goes to a NORMAL topic (still to its group's queue)."""

    async def test(group: Group) -> None:
        master = await group.master()
        assert master.services is not None
        await master.services.admin.create_topic(
            TopicConfig("PlainT", 4, 4), parse_changes("+message.type=NORMAL")
        )
        for _ in range(500):
            if group.namesrv.routes.route("PlainT") is not None:
                break
            await asyncio.sleep(0.02)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            route = await stub.QueryRoute(
                service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="PlainT"))
            )
            assert len(route.message_queues[0].accept_message_types) == 4
            message = _message("PlainT", "P1", b"p", message_group="order-1", queue_id=0)
            sent = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[message]))
            assert sent.status.code == Code.OK, sent.status
        found = await master.services.pull.pull(
            PullQuery("chk", QueueRef("PlainT", "", queue_of_group("order-1", 4)), 0, 32)
        )
        assert [r.body for r in decode_records(found.stored)] == [b"p"]

    _run(tmp_path, test, enable_topic_message_type_check=False)
