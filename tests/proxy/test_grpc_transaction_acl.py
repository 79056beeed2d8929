"""Transactions at the gRPC door under the ACL (issue 25 item 5): EndTransaction needs PUB on the
half message's real topic whatever topic it names, and a check-back (which carries the half
message) goes only to a Telemetry stream signed by an account with PUB on that topic, not to
any stream whose settings claim the topic.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.proxy.protocol import definition_pb2, service_pb2
from tests.proxy.test_grpc_acl import _metadata
from tests.proxy.test_servicer import Group, _run, _stub, _topic_with_route
from tests.proxy.test_transactions_grpc import TOPIC, TRANSACTION_TOPIC, _bodies, _end, _half

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import grpc.aio

    from ledgermq.proxy.protocol import service_pb2_grpc

pytestmark = pytest.mark.timeout(90)

Code = definition_pb2.Code
ACL = f"""
accounts:
  - accessKey: tx-owner
    secretKey: owner-secret
    defaultTopicPerm: DENY
    topicPerms: [{TOPIC}=PUB]
  - accessKey: intruder
    secretKey: intruder-secret
    defaultTopicPerm: DENY
    topicPerms: [Other=PUB]
"""
OWNER = ("tx-owner", "owner-secret")
INTRUDER = ("intruder", "intruder-secret")

Outbox = asyncio.Queue[service_pb2.TelemetryCommand | None]


async def _producer_stream(
    stub: service_pb2_grpc.MessagingServiceAsyncStub, who: tuple[str, str]
) -> tuple[
    grpc.aio.StreamStreamCall[service_pb2.TelemetryCommand, service_pb2.TelemetryCommand], Outbox
]:
    """A Telemetry stream signed by ``who`` whose settings publish ``TOPIC``."""
    outbox: Outbox = asyncio.Queue()

    async def commands() -> AsyncIterator[service_pb2.TelemetryCommand]:
        while (command := await outbox.get()) is not None:
            yield command

    call = stub.Telemetry(commands(), metadata=_metadata(*who))
    settings = definition_pb2.Settings(client_type=definition_pb2.PRODUCER)
    settings.publishing.topics.add(name=TOPIC)
    await outbox.put(service_pb2.TelemetryCommand(settings=settings))
    reply = await call.read()
    assert isinstance(reply, service_pb2.TelemetryCommand)
    assert reply.status.code == Code.OK, reply.status
    return call, outbox


def test_ending_and_checking_back_need_pub_on_the_half_messages_topic(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, TOPIC, TRANSACTION_TOPIC, queues=1)
        assert master.services is not None
        channel, stub = _stub(master.grpc_address)
        async with channel:
            owner_call, owner_out = await _producer_stream(stub, OWNER)
            intruder_call, intruder_out = await _producer_stream(stub, INTRUDER)  # the newest
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_half("H1", b"owner's")]),
                metadata=_metadata(*OWNER),
            )
            assert sent.status.code == Code.OK, sent.status
            transaction = sent.entries[0].transaction_id
            # ending it: the topic named is the intruder's own, or none at all
            for named in ("Other", ""):
                end = _end("H1", transaction, definition_pb2.COMMIT)
                end.topic.name = named
                refused = await stub.EndTransaction(end, metadata=_metadata(*INTRUDER))
                assert refused.status.code == Code.FORBIDDEN, (named, refused.status)
            assert master.services.transactions.open_count() == 1
            # the check-back goes to the owner's stream, not to the newer one claiming the topic
            await asyncio.sleep(0.4)  # transactionTimeOut
            assert len(await master.services.transactions.check_pass()) == 1
            command = await asyncio.wait_for(owner_call.read(), 5)
            assert isinstance(command, service_pb2.TelemetryCommand)
            assert command.recover_orphaned_transaction_command.message.body == b"owner's"
            answer = await stub.EndTransaction(
                _end("H1", transaction, definition_pb2.COMMIT, definition_pb2.SOURCE_SERVER_CHECK),
                metadata=_metadata(*OWNER),
            )
            assert answer.status.code == Code.OK, answer.status
            assert await _bodies(master) == [b"owner's"]
            await owner_out.put(None)
            await intruder_out.put(None)
            intruder_call.cancel()

    _run(tmp_path, test, acl_enable=True, acl_file_path=str(acl), transaction_time_out=300)
