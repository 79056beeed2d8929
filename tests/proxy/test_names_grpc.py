"""Names at the gRPC doors (issue 25, items 1, 7, 12 and 19): the in-replica door and the
stand-alone proxy refuse a topic or group that breaks RocketMQ's naming rules with ILLEGAL_TOPIC /
ILLEGAL_CONSUMER_GROUP and the rule in the message, before anything is committed or forwarded,
and a send into a system topic with FORBIDDEN.

Before the fix the official clients' ReceiveMessage and ForwardMessageToDeadLetterQueue with group
``orders.v1`` were served, and the forward committed a record for ``%DLQ%orders.v1`` that no
replica could index.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.messaging import Door
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.remote_backend import RemoteBackend

from .test_pop_grpc import _receive, _receive_request
from .test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer
    from ledgermq.proxy.protocol import service_pb2_grpc

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code
BAD_GROUP = "orders.v1"
LONG_GROUP = "g" * 125


def _end_index(broker: BrokerServer) -> int:
    return broker.ledger.store.end_index


def _consume(request: Any, topic: str, group: str) -> Any:
    request.topic.name = topic
    request.group.name = group
    return request


async def _telemetry_reply(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, settings: definition_pb2.Settings
) -> service_pb2.TelemetryCommand:
    outbox: asyncio.Queue[service_pb2.TelemetryCommand | None] = asyncio.Queue()

    async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
        while (command := await outbox.get()) is not None:
            yield command

    call = stub.Telemetry(commands())
    await outbox.put(service_pb2.TelemetryCommand(settings=settings))
    reply = await call.read()
    await outbox.put(None)
    assert isinstance(reply, service_pb2.TelemetryCommand)
    return reply


def test_group_orders_v1_is_refused_by_the_replicas_door(tmp_path: Path) -> None:
    """Item 1: ReceiveMessage, ForwardMessageToDeadLetterQueue, AckMessage and
    ChangeInvisibleDuration with group ``orders.v1`` (or a 125-character group, item 7) answer
    ILLEGAL_CONSUMER_GROUP naming the rule; nothing is committed, no ``%DLQ%`` topic made."""

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "NameT", queues=1)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_message("NameT", "M1", b"order")])
            )
            assert sent.status.code == Code.OK, sent.status
            for bad in (BAD_GROUP, LONG_GROUP):
                refused = await _receive(stub, _receive_request("NameT", group=bad))
                assert [r.status.code for r in refused] == [Code.ILLEGAL_CONSUMER_GROUP]
                assert "group name" in refused[0].status.message
            # a handle of a legal group, used under the bad name
            got = await _receive(stub, _receive_request("NameT", group="orders_v1"))
            handle = got[1].message.system_properties.receipt_handle
            assert handle
            await asyncio.sleep(0.3)
            before = _end_index(master)
            forward = _consume(
                service_pb2.ForwardMessageToDeadLetterQueueRequest(
                    receipt_handle=handle, message_id="M1", delivery_attempt=1,
                    max_delivery_attempts=16,
                ),
                "NameT", BAD_GROUP,
            )  # fmt: skip
            answer = await stub.ForwardMessageToDeadLetterQueue(forward)
            assert answer.status.code == Code.ILLEGAL_CONSUMER_GROUP, answer.status
            assert "'orders.v1' may contain only the characters" in answer.status.message
            ack = _consume(
                service_pb2.AckMessageRequest(
                    entries=[service_pb2.AckMessageEntry(message_id="M1", receipt_handle=handle)]
                ),
                "NameT", BAD_GROUP,
            )  # fmt: skip
            acked = await stub.AckMessage(ack)
            assert acked.status.code == Code.ILLEGAL_CONSUMER_GROUP, acked.status
            change = _consume(
                service_pb2.ChangeInvisibleDurationRequest(receipt_handle=handle, message_id="M1"),
                "NameT", BAD_GROUP,
            )  # fmt: skip
            change.invisible_duration.FromMilliseconds(5000)
            changed = await stub.ChangeInvisibleDuration(change)
            assert changed.status.code == Code.ILLEGAL_CONSUMER_GROUP, changed.status
            await asyncio.sleep(0.3)
            assert _end_index(master) == before  # nothing committed
            state = master.state
            assert state is not None
            assert state.topics.find("%DLQ%" + BAD_GROUP) is None
            assert BAD_GROUP not in state.metadata.groups
            assert LONG_GROUP not in state.metadata.groups

    _run(tmp_path, test)


def test_the_replicas_door_checks_every_name(tmp_path: Path) -> None:
    """Items 1, 12, 19: QueryRoute / QueryAssignment / Heartbeat / Telemetry settings / sends
    with a bad topic or group are refused with the rule; settings over the subscription bound
    are refused; a send into a system topic is FORBIDDEN."""

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "NameT")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            route = await stub.QueryRoute(
                service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="bad.topic"))
            )
            assert route.status.code == Code.ILLEGAL_TOPIC, route.status
            assert "may contain only the characters" in route.status.message
            assigned = await stub.QueryAssignment(
                service_pb2.QueryAssignmentRequest(
                    topic=definition_pb2.Resource(name="NameT"),
                    group=definition_pb2.Resource(name=BAD_GROUP),
                )
            )
            assert assigned.status.code == Code.ILLEGAL_CONSUMER_GROUP, assigned.status
            beat = await stub.Heartbeat(
                service_pb2.HeartbeatRequest(
                    client_type=definition_pb2.SIMPLE_CONSUMER,
                    group=definition_pb2.Resource(name=BAD_GROUP),
                )
            )
            assert beat.status.code == Code.ILLEGAL_CONSUMER_GROUP, beat.status

            settings = definition_pb2.Settings(client_type=definition_pb2.SIMPLE_CONSUMER)
            settings.subscription.group.name = BAD_GROUP
            reply = await _telemetry_reply(stub, settings)
            assert reply.status.code == Code.ILLEGAL_CONSUMER_GROUP, reply.status
            many = definition_pb2.Settings(client_type=definition_pb2.PUSH_CONSUMER)
            many.subscription.group.name = "G"
            for i in range(11):
                many.subscription.subscriptions.add().topic.name = f"T{i}"
            reply = await _telemetry_reply(stub, many)
            assert reply.status.code == Code.BAD_REQUEST, reply.status
            assert "at most 10" in reply.status.message

            for topic, code in (
                ("bad.topic", Code.ILLEGAL_TOPIC),
                ("SCHEDULE_TOPIC_XXXX", Code.FORBIDDEN),
                ("TBW102", Code.FORBIDDEN),
                ("RMQ_SYS_TRANS_HALF_TOPIC", Code.FORBIDDEN),
            ):
                sent = await stub.SendMessage(
                    service_pb2.SendMessageRequest(messages=[_message(topic, "S1", b"x")])
                )
                assert sent.status.code == code, (topic, sent.status)

    _run(tmp_path, test, heartbeat_max_subscriptions=10)


class _Context:
    """Enough of a grpc.aio context for the proxy's refusals (no ACL)."""

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5"

    def invocation_metadata(self) -> tuple[()]:
        return ()


class _NoForwarding:
    """A forwarder that fails the test if the proxy forwards anything."""

    def __init__(self) -> None:
        self.client = SimpleNamespace(on_check_transaction=None, producer_groups=set())
        self.after_failover: Any = None

    async def route(self, topic: str, *, refresh: bool = False) -> Any:
        raise AssertionError(f"the proxy asked for the route of {topic}")

    async def call(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the proxy forwarded a request for {topic}")


def test_the_stand_alone_proxy_refuses_bad_names_before_forwarding() -> None:
    """Item 1, the proxy's door: the same refusals, answered by the proxy itself (a broker's
    INVALID_PARAMETER would not say whether the topic or the group was wrong)."""

    async def main() -> None:
        servicer = DoorServicer(
            RemoteBackend(_NoForwarding(), Door("127.0.0.1", 8081)),  # type: ignore[arg-type]
            None,
            None,
            time.time,
        )
        context: Any = _Context()
        received = [
            r
            async for r in servicer.ReceiveMessage(
                _receive_request("NameT", group=BAD_GROUP), context
            )
        ]
        assert [r.status.code for r in received] == [Code.ILLEGAL_CONSUMER_GROUP]
        forward = _consume(
            service_pb2.ForwardMessageToDeadLetterQueueRequest(receipt_handle="h"),
            "NameT", BAD_GROUP,
        )  # fmt: skip
        answer = await servicer.ForwardMessageToDeadLetterQueue(forward, context)
        assert answer.status.code == Code.ILLEGAL_CONSUMER_GROUP, answer.status
        assert "may contain only the characters" in answer.status.message
        ack = _consume(
            service_pb2.AckMessageRequest(
                entries=[service_pb2.AckMessageEntry(message_id="M", receipt_handle="h")]
            ),
            "NameT", LONG_GROUP,
        )  # fmt: skip
        assert (await servicer.AckMessage(ack, context)).status.code == (
            Code.ILLEGAL_CONSUMER_GROUP
        )
        route = await servicer.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="bad.topic")),
            context,
        )
        assert route.status.code == Code.ILLEGAL_TOPIC, route.status
        sent = await servicer.SendMessage(
            service_pb2.SendMessageRequest(messages=[_message("SCHEDULE_TOPIC_XXXX", "S", b"x")]),
            context,
        )
        assert sent.status.code == Code.FORBIDDEN, sent.status

    asyncio.run(main())


def test_a_recall_names_a_valid_topic_at_either_door() -> None:
    """Found in review: RecallMessage checked only that a topic was named, so a bad name went on
    to the route lookup (the stand-alone proxy) or the timer service (a replica) and came back
    as whatever those said; now it is ILLEGAL_TOPIC with the rule, before anything is asked."""

    async def main() -> None:
        servicer = DoorServicer(
            RemoteBackend(_NoForwarding(), Door("127.0.0.1", 8081)),  # type: ignore[arg-type]
            None,
            None,
            time.time,
        )
        context: Any = _Context()
        answer = await servicer.RecallMessage(
            service_pb2.RecallMessageRequest(
                topic=definition_pb2.Resource(name="bad.topic"), recall_handle="h"
            ),
            context,
        )
        assert answer.status.code == Code.ILLEGAL_TOPIC, answer.status
        assert "may contain only the characters" in answer.status.message

    asyncio.run(main())
