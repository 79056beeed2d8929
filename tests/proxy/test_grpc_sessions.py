"""v5 clients are broker state (issue 26 items 4 and 5).

- A v5 consumer's Telemetry settings (its group and subscriptions), renewed by its Heartbeat,
  register it in the broker's client registry, the one remoting heartbeats feed: ``ledgermq
  admin consumer-connection`` (``Admin.consumer_connections``), the console's group page and
  the metrics list it, whether it came through a replica's door (the master's own registry; a
  follower's door also tells its master) or through the stand-alone proxy (which heartbeats the
  masters for its v5 clients, as RocketMQ's proxy does). NotifyClientTermination takes it out.
  Before, gRPC Heartbeat was a no-op and the group was "not online".
- A v5 request's messages that go to one queue are committed together: one append (RocketMQ's
  batch), not one send per message.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ledgermq.broker.service.client_registry import CLIENT_EXPIRY_MS, ConsumerManager
from ledgermq.broker.service.send import SendService
from ledgermq.client import Admin
from ledgermq.messaging import ConsumerData, Heartbeat
from ledgermq.messaging.consuming import PullQuery, QueueRef
from ledgermq.proxy.cluster import ClusterProxy
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.wire.message import decode_records

from .test_servicer import Code, Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

    from ledgermq.client import ConsumerConnection
    from ledgermq.proxy.protocol import service_pb2_grpc

GROUP = "SessionGroup"
TOPIC = "SessionTopic"


def _metadata(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


def _settings() -> service_pb2.TelemetryCommand:
    settings = definition_pb2.Settings(client_type=definition_pb2.SIMPLE_CONSUMER)
    subscription = settings.subscription
    subscription.group.name = GROUP
    entry = subscription.subscriptions.add()
    entry.topic.name = TOPIC
    entry.expression.type = definition_pb2.TAG
    entry.expression.expression = "TagA || TagB"
    return service_pb2.TelemetryCommand(settings=settings)


async def _open_session(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, client_id: str, done: asyncio.Event
) -> Any:
    """A v5 consumer's Telemetry stream (open until ``done``) and a Heartbeat, as the official
    clients start; the stream call."""

    async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
        yield _settings()
        await done.wait()

    call = stub.Telemetry(commands(), metadata=_metadata(client_id))
    answer = await call.read()
    assert isinstance(answer, service_pb2.TelemetryCommand)
    assert answer.status.code == Code.OK, answer.status
    assert answer.settings.subscription.group.name == GROUP
    beat = await stub.Heartbeat(
        service_pb2.HeartbeatRequest(
            group=definition_pb2.Resource(name=GROUP), client_type=definition_pb2.SIMPLE_CONSUMER
        ),
        metadata=_metadata(client_id),
    )
    assert beat.status.code == Code.OK, beat.status
    return call


async def _connections(namesrv_addr: str, wanted: set[str]) -> list[ConsumerConnection]:
    """The group's consumer connections once ``wanted`` are all listed (or after 5 s)."""
    async with Admin(namesrv_addr) as admin:
        rows: list[ConsumerConnection] = []
        for _ in range(100):
            rows = await admin.consumer_connections(GROUP)
            if wanted <= {row.client_id for row in rows}:
                break
            await asyncio.sleep(0.05)
        return rows


async def _terminate(stub: service_pb2_grpc.MessagingServiceAsyncStub, client_id: str) -> None:
    gone = await stub.NotifyClientTermination(
        service_pb2.NotifyClientTerminationRequest(group=definition_pb2.Resource(name=GROUP)),
        metadata=_metadata(client_id),
    )
    assert gone.status.code == Code.OK, gone.status


def test_a_v5_consumer_shows_in_consumer_connection_through_a_replicas_door(
    tmp_path: Path,
) -> None:
    """Through the master's door and a follower's door: each client is listed with its
    subscription, as CONSUME_POP; after NotifyClientTermination it is not."""

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, TOPIC)
        follower = next(b for b in group.brokers.values() if b is not master)
        done = asyncio.Event()
        channels = []
        try:
            stubs = {}
            for broker, client_id in ((master, "v5-at-master"), (follower, "v5-at-follower")):
                channel, stub = _stub(broker.grpc_address)
                channels.append(channel)
                stubs[client_id] = stub
                await _open_session(stub, client_id, done)
            rows = await _connections(group.namesrv_addr, set(stubs))
            by_id = {row.client_id: row for row in rows}
            assert set(by_id) == set(stubs), rows
            at_master = by_id["v5-at-master"]
            assert at_master.consume_type == "CONSUME_POP"
            assert at_master.topics == (TOPIC,)
            assert at_master.language == "PYTHON"
            assert at_master.client_addr.startswith("127.0.0.1:")
            assert master.consumers.subscription(GROUP, TOPIC) == ("TagA || TagB", "TAG")
            for client_id, stub in stubs.items():
                await _terminate(stub, client_id)
            async with Admin(group.namesrv_addr) as admin:
                assert await admin.consumer_connections(GROUP) == []
        finally:
            done.set()
            for channel in channels:
                await channel.close()

    _run(tmp_path, test)


def test_a_v5_consumer_shows_in_consumer_connection_through_the_stand_alone_proxy(
    tmp_path: Path,
) -> None:
    """The proxy heartbeats the masters with the v5 client's own id, group and subscription;
    NotifyClientTermination unregisters it there."""

    async def test(group: Group) -> None:
        await _topic_with_route(group, TOPIC)
        proxy = ClusterProxy(group.namesrv_addr, "127.0.0.1:0")
        await proxy.start()
        done = asyncio.Event()
        channel, stub = _stub(f"127.0.0.1:{proxy.port}")
        try:
            await _open_session(stub, "v5-at-proxy", done)
            rows = await _connections(group.namesrv_addr, {"v5-at-proxy"})
            assert [(r.client_id, r.consume_type, r.topics) for r in rows] == [
                ("v5-at-proxy", "CONSUME_POP", (TOPIC,))
            ]
            await _terminate(stub, "v5-at-proxy")
            async with Admin(group.namesrv_addr) as admin:
                assert await admin.consumer_connections(GROUP) == []
        finally:
            done.set()
            await channel.close()
            await proxy.close()

    _run(tmp_path, test)


def test_a_requests_messages_for_one_queue_are_one_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three messages of one request, no message group: one send of a batch (one replicated
    entry), one entry per message in the answer, consecutive offsets; the messages read back
    in order with their own ids."""
    calls: list[bool] = []
    original = SendService.send

    async def counted(self: SendService, request: Any, body: bytes, address: str) -> Any:
        calls.append(request.batch)
        return await original(self, request, body, address)

    monkeypatch.setattr(SendService, "send", counted)

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "BatchTopic", queues=1)
        channel, stub = _stub(master.grpc_address)
        async with channel:
            messages = [_message("BatchTopic", f"B{i}", f"body-{i}".encode()) for i in range(3)]
            sent = await stub.SendMessage(service_pb2.SendMessageRequest(messages=messages))
        assert sent.status.code == Code.OK, sent.status
        assert [e.message_id for e in sent.entries] == ["B0", "B1", "B2"]
        assert [e.offset for e in sent.entries] == [0, 1, 2]
        assert calls == [True]
        assert master.services is not None
        pulled = await master.services.pull.pull(
            PullQuery("G", QueueRef("BatchTopic", "", 0), 0, 8, "*", "TAG", 0)
        )
        records = decode_records(pulled.stored)
        assert [r.body for r in records] == [b"body-0", b"body-1", b"body-2"]
        assert [r.properties["UNIQ_KEY"] for r in records] == ["B0", "B1", "B2"]

    _run(tmp_path, test)


def test_a_v5_session_expires_as_a_silent_remoting_client() -> None:
    """A session has no connection at the broker: it stays while renewed and goes, as a
    remoting client does, once silent for CLIENT_EXPIRY_MS (120 s)."""
    registry: ConsumerManager[Any] = ConsumerManager()
    data = ConsumerData(
        GROUP, "CONSUME_POP", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", {TOPIC: "*"}, {TOPIC: "TAG"}
    )
    heartbeat = Heartbeat("v5-client", (), (data,))
    assert registry.register(heartbeat, None, "PYTHON", 0, 1_000, "10.0.0.7:5555") == [GROUP]
    assert registry.groups[GROUP].members["v5-client"].client_address == "10.0.0.7:5555"
    assert registry.expire(1_000 + CLIENT_EXPIRY_MS) == []
    assert registry.register(heartbeat, None, "PYTHON", 0, 50_000, "10.0.0.7:5555") == []
    assert registry.expire(50_000 + CLIENT_EXPIRY_MS) == []
    assert registry.client_ids(GROUP) == ["v5-client"]
    assert registry.expire(50_001 + CLIENT_EXPIRY_MS) == [GROUP]
    assert registry.client_ids(GROUP) == []
