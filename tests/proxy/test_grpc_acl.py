"""The gRPC door with aclEnable: RocketMQ 5 clients' ``authorization`` metadata checked against
the broker's ACL (issue 17): the same accounts and permissions as remoting."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import inspect
from typing import TYPE_CHECKING, Any

import grpc.aio
import pytest

from ledgermq.clock import SystemClock
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.proxy.cluster import ClusterProxy
from ledgermq.proxy.door import DoorServicer
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.security.acl.grpc_auth import (
    date_time_within,
    grpc_signature,
    parse_authorization,
    signature_matches,
)
from ledgermq.security.acl_files import AclFiles
from ledgermq.security.gate import AclGate
from tests.proxy.test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

Code = definition_pb2.Code
ACL = """
accounts:
  - accessKey: grpc-writer
    secretKey: writer-secret
    defaultTopicPerm: DENY
    topicPerms: [GrpcAcl=PUB]
"""


def test_the_header_and_signature() -> None:
    auth = parse_authorization(
        "MQv2-HMAC-SHA1 Credential=grpc-writer, SignedHeaders=x-mq-date-time, Signature=ab12"
    )
    assert auth is not None
    assert (auth.access_key, auth.signed_headers, auth.signature) == (
        "grpc-writer", "x-mq-date-time", "ab12"
    )  # fmt: skip
    assert parse_authorization("Basic dXNlcg==") is None
    # the official Python client's Signature.sign: hexlify(HMAC-SHA1(sk, date-time))
    expected = hmac.new(b"writer-secret", b"20261125T101500Z", hashlib.sha1).hexdigest()
    assert grpc_signature("writer-secret", "20261125T101500Z") == expected
    signature = grpc_signature("writer-secret", "20261125T101500Z")
    assert signature_matches("writer-secret", "20261125T101500Z", signature.upper())
    assert not signature_matches("other-secret", "20261125T101500Z", signature)
    now = datetime.datetime(2026, 11, 25, 10, 15, tzinfo=datetime.UTC).timestamp()
    assert date_time_within("20261125T101500Z", now)
    assert not date_time_within("20261125T090000Z", now)  # an hour off: replayed or a bad clock
    assert not date_time_within("yesterday", now)


def _metadata(access_key: str, secret: str) -> tuple[tuple[str, str], ...]:
    now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    signature = grpc_signature(secret, now)
    return (
        ("x-mq-date-time", now),
        ("authorization", (f"MQv2-HMAC-SHA1 Credential={access_key}, "
                           f"SignedHeaders=x-mq-date-time, Signature={signature}")),
    )  # fmt: skip


def test_the_door_checks_the_authorization_of_each_call(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "GrpcAcl")
        await _topic_with_route(group, "Elsewhere")
        channel, stub = _stub(master.grpc_address)
        try:
            route = service_pb2.QueryRouteRequest()
            route.topic.name = "GrpcAcl"
            anonymous = await stub.QueryRoute(route)
            assert anonymous.status.code == Code.UNAUTHORIZED
            assert "not signed" in anonymous.status.message
            forged = await stub.QueryRoute(route, metadata=_metadata("grpc-writer", "nope"))
            assert forged.status.code == Code.UNAUTHORIZED
            signed = await stub.QueryRoute(
                route, metadata=_metadata("grpc-writer", "writer-secret")
            )
            assert signed.status.code == Code.OK

            def send(topic: str) -> service_pb2.SendMessageRequest:
                return service_pb2.SendMessageRequest(
                    messages=[_message(topic, f"ID-{topic}", b"body")]
                )

            ok = await stub.SendMessage(
                send("GrpcAcl"), metadata=_metadata("grpc-writer", "writer-secret")
            )
            assert ok.status.code == Code.OK, ok.status
            denied = await stub.SendMessage(
                send("Elsewhere"), metadata=_metadata("grpc-writer", "writer-secret")
            )
            assert denied.status.code == Code.FORBIDDEN
            assert "no PUB permission on topic 'Elsewhere'" in denied.status.message
            unsigned = await stub.SendMessage(send("GrpcAcl"))
            assert unsigned.status.code == Code.UNAUTHORIZED

            # the PullConsumer RPCs need SUB on the topic and the group: PUB is not enough
            queue = definition_pb2.MessageQueue(id=0)
            queue.topic.name = "GrpcAcl"
            pull = service_pb2.PullMessageRequest(message_queue=queue, batch_size=8)
            pull.group.name = "G"
            writer = _metadata("grpc-writer", "writer-secret")
            pulled = [r async for r in stub.PullMessage(pull, metadata=writer)]
            assert [r.status.code for r in pulled] == [Code.FORBIDDEN]
            assert "SUB" in pulled[0].status.message
            anonymous_pull = [r async for r in stub.PullMessage(pull)]
            assert [r.status.code for r in anonymous_pull] == [Code.UNAUTHORIZED]
            update = service_pb2.UpdateOffsetRequest(message_queue=queue, offset=1)
            update.group.name = "G"
            refused = await stub.UpdateOffset(update, metadata=writer)
            assert refused.status.code == Code.FORBIDDEN
            get = service_pb2.GetOffsetRequest(message_queue=queue)
            get.group.name = "G"
            assert (await stub.GetOffset(get, metadata=writer)).status.code == Code.FORBIDDEN
            query = service_pb2.QueryOffsetRequest(message_queue=queue)
            assert (await stub.QueryOffset(query)).status.code == Code.UNAUTHORIZED
        finally:
            await channel.close()
        assert master.services is not None
        stats = master.services.admin.topic_stats("GrpcAcl")
        assert sum(row.max_offset for row in stats) == 1  # only the signed send was stored

    _run(tmp_path, test, acl_enable=True, acl_file_path=str(acl))


class _Spies:
    """Replaces the servicer's methods with ones that record that they ran."""

    METHODS = ("SendMessage", "ReceiveMessage", "Telemetry")

    def __init__(self, monkeypatch: pytest.MonkeyPatch, servicer: type[Any]) -> None:
        self.ran: list[str] = []
        for name in self.METHODS:
            original = getattr(servicer, name)
            # of the same kind as the original: grpcio runs a handler by its kind
            if inspect.isasyncgenfunction(original):

                async def spy_stream(*args: Any, _name: str = name, _of: Any = original) -> Any:
                    self.ran.append(_name)
                    async for response in _of(*args):
                        yield response

                monkeypatch.setattr(servicer, name, spy_stream)
            else:

                async def spy(*args: Any, _name: str = name, _of: Any = original) -> Any:
                    self.ran.append(_name)
                    return await _of(*args)

                monkeypatch.setattr(servicer, name, spy)


async def _unsigned_calls(stub: service_pb2_grpc.MessagingServiceAsyncStub) -> list[Any]:
    """An unsigned call of each kind (unary, server stream, bidirectional stream): the first
    answer of each."""
    send = service_pb2.SendMessageRequest(messages=[_message("GrpcAcl", "ID-1", b"x" * 1024)])
    sent = await stub.SendMessage(send)
    receive = service_pb2.ReceiveMessageRequest(batch_size=1)
    receive.group.name = "G"
    receive.message_queue.topic.name = "GrpcAcl"
    received = [r async for r in stub.ReceiveMessage(receive)]
    settings = service_pb2.TelemetryCommand(settings=definition_pb2.Settings())
    telemetry = stub.Telemetry(iter([settings]))
    told = [await telemetry.read()]
    telemetry.cancel()
    return [sent, *received, *told]


def test_an_unsigned_call_is_refused_before_its_handler_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica's door refuses an unsigned call from its metadata (``proxy.admission``):
    UNAUTHORIZED in the answer's status, and the servicer's handler never runs, so the request
    was never read (before, it was read and parsed, up to 130 MiB, and then refused)."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    spies = _Spies(monkeypatch, DoorServicer)

    async def test(group: Group) -> None:
        master = await group.master()
        channel, stub = _stub(master.grpc_address)
        try:
            answers = await _unsigned_calls(stub)
        finally:
            await channel.close()
        assert [a.status.code for a in answers] == [Code.UNAUTHORIZED] * 3
        assert all("not signed" in a.status.message for a in answers)
        assert spies.ran == []

    _run(tmp_path, test, acl_enable=True, acl_file_path=str(acl))


def test_the_proxy_refuses_an_unsigned_call_before_its_handler_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-alone proxy's port does the same (its ACL from ``aclEnable``): no handler
    runs for an unsigned call, nor for a wrongly signed one."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    spies = _Spies(monkeypatch, DoorServicer)

    async def main() -> None:
        namesrv = NameServer(NameServerConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        gate = AclGate(AclFiles([str(acl)], SystemClock()), "proxy")
        proxy = ClusterProxy(f"127.0.0.1:{namesrv.port}", "127.0.0.1:0", acl=gate)
        try:
            await proxy.start()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
                stub = service_pb2_grpc.MessagingServiceStub(channel)
                answers = await _unsigned_calls(stub)
                forged = await stub.SendMessage(
                    service_pb2.SendMessageRequest(messages=[_message("GrpcAcl", "ID-2", b"x")]),
                    metadata=_metadata("grpc-writer", "not-the-secret"),
                )
        finally:
            await proxy.close()
            await namesrv.close()
        assert [a.status.code for a in answers] == [Code.UNAUTHORIZED] * 3
        assert forged.status.code == Code.UNAUTHORIZED
        assert spies.ran == []
        assert gate.refused == 4

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_followers_door_authorizes_before_it_forwards(tmp_path: Path) -> None:
    """A follower's door forwards a send to the master (``proxy.local_send``) only after
    the ACL allowed it there, with the caller's own account; the master takes the forwarded
    request signed with the broker's account (``aclAccessKey``). A send the caller may not
    make is refused at the follower and stores nothing."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL + "  - accessKey: broker-self\n    secretKey: broker-secret\n"
                   "    admin: true\n")  # fmt: skip

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "GrpcAcl")
        await _topic_with_route(group, "Elsewhere")
        follower = next(b for b in group.brokers.values() if b is not master)
        channel, stub = _stub(follower.grpc_address)
        writer = _metadata("grpc-writer", "writer-secret")

        def send(topic: str, message_id: str) -> service_pb2.SendMessageRequest:
            return service_pb2.SendMessageRequest(messages=[_message(topic, message_id, b"b")])

        try:
            ok = await stub.SendMessage(send("GrpcAcl", "F-OK"), metadata=writer)
            assert ok.status.code == Code.OK, ok.status
            denied = await stub.SendMessage(send("Elsewhere", "F-NO"), metadata=writer)
            assert denied.status.code == Code.FORBIDDEN, denied.status
            assert "no PUB permission on topic 'Elsewhere'" in denied.status.message
            unsigned = await stub.SendMessage(send("GrpcAcl", "F-ANON"))
            assert unsigned.status.code == Code.UNAUTHORIZED, unsigned.status
        finally:
            await channel.close()
        assert master.services is not None
        stored = {
            topic: sum(row.max_offset for row in master.services.admin.topic_stats(topic))
            for topic in ("GrpcAcl", "Elsewhere")
        }
        assert stored == {"GrpcAcl": 1, "Elsewhere": 0}

    _run(tmp_path, test, acl_enable=True, acl_file_path=str(acl),
         acl_access_key="broker-self", acl_secret_key="broker-secret")  # fmt: skip
