"""A request's Timestamps and Durations at the gRPC doors (issue 25 item 24): a delivery time in
milliseconds put in ``Timestamp.seconds`` (what the official Python client 5.1.2 sends when
given milliseconds, as its own tests give them) is read as milliseconds; any other value that
is not a valid Timestamp or Duration is refused with the field and the rule named, never
INTERNAL_ERROR (protobuf's ``ToMilliseconds`` raised ``ValueError`` into the doors' catch-all).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.service.timers import RecallHandle
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.proxy.cluster import ClusterProxy
from ledgermq.proxy.messages import Refusal, outgoing, receive_request
from ledgermq.proxy.protocol import Duration, Timestamp, definition_pb2, service_pb2
from ledgermq.proxy.timestamps import (
    MAX_TIMESTAMP_SECONDS,
    delivery_time_ms,
    duration_ms,
    timestamp_ms,
)
from tests.proxy.test_servicer import Group, _message, _run, _stub, _topic_with_route

if TYPE_CHECKING:
    from pathlib import Path

Code = definition_pb2.Code
NOW_MS = 1_795_000_000_000


def _refused(call: object, *args: object) -> definition_pb2.Status:
    with pytest.raises(Refusal) as refusal:
        call(*args)  # type: ignore[operator]
    return refusal.value.status


def test_a_delivery_time_past_year_9999_in_seconds_is_read_as_milliseconds() -> None:
    assert delivery_time_ms(Timestamp(seconds=NOW_MS + 60_000)) == NOW_MS + 60_000
    assert delivery_time_ms(Timestamp(seconds=NOW_MS // 1000, nanos=5_000_000)) == NOW_MS + 5
    assert delivery_time_ms(Timestamp(seconds=MAX_TIMESTAMP_SECONDS)) == (
        MAX_TIMESTAMP_SECONDS * 1000
    )
    assert delivery_time_ms(Timestamp(seconds=MAX_TIMESTAMP_SECONDS + 1)) == (
        MAX_TIMESTAMP_SECONDS + 1
    )
    for bad in (
        Timestamp(seconds=MAX_TIMESTAMP_SECONDS * 1000 + 1),  # past 9999 even as milliseconds
        Timestamp(seconds=NOW_MS // 1000, nanos=-1),
        Timestamp(seconds=NOW_MS // 1000, nanos=1_000_000_000),
        Timestamp(seconds=NOW_MS, nanos=1),  # no valid reading: ms with nanos
        Timestamp(seconds=-62_135_596_801),  # before year 1
    ):
        refused = _refused(delivery_time_ms, bad)
        assert refused.code == Code.ILLEGAL_DELIVERY_TIME, bad
        assert "delivery_timestamp is not a valid Timestamp" in refused.message


def test_other_times_and_durations_are_refused_with_their_field_named() -> None:
    assert timestamp_ms(Timestamp(seconds=1, nanos=2_500_000), "born_timestamp") == 1002
    refused = _refused(timestamp_ms, Timestamp(seconds=NOW_MS), "born_timestamp")
    assert refused.code == Code.BAD_REQUEST
    assert refused.message.startswith("born_timestamp is not a valid Timestamp: seconds")
    assert duration_ms(Duration(seconds=-1, nanos=-500_000_000), "d") == -1500
    assert duration_ms(Duration(seconds=30, nanos=1_000_000), "d") == 30_001
    for bad in (
        Duration(seconds=315_576_000_001),
        Duration(seconds=1, nanos=-1),
        Duration(seconds=-1, nanos=1),
        Duration(nanos=1_000_000_000),
    ):
        refused = _refused(duration_ms, bad, "invisible_duration", Code.ILLEGAL_INVISIBLE_TIME)
        assert refused.code == Code.ILLEGAL_INVISIBLE_TIME, bad
        assert "invisible_duration is not a valid Duration" in refused.message


def _delayed(seconds: int, nanos: int = 0) -> definition_pb2.Message:
    message = _message(
        "Timers", uuid.uuid4().hex.upper(), b"due", message_type=definition_pb2.DELAY
    )
    message.system_properties.delivery_timestamp.seconds = seconds
    message.system_properties.delivery_timestamp.nanos = nanos
    return message


def test_sends_and_receives_with_bad_times_get_their_rules_code() -> None:
    """The conversions both doors share (``proxy.messages``)."""
    born = _message("T", "ID", b"x")
    born.system_properties.born_timestamp.seconds = NOW_MS
    assert _refused(outgoing, born, "h", 1024).code == Code.BAD_REQUEST
    delayed = _delayed(NOW_MS // 1000, nanos=-1)
    assert _refused(outgoing, delayed, "h", 1024).code == Code.ILLEGAL_DELIVERY_TIME
    half = _message("T", "ID", b"x", message_type=definition_pb2.TRANSACTION)
    half.system_properties.orphaned_transaction_recovery_duration.seconds = 10**12
    assert _refused(outgoing, half, "h", 1024).code == Code.BAD_REQUEST
    receive = service_pb2.ReceiveMessageRequest(batch_size=1)
    receive.group.name = "G"
    receive.message_queue.topic.name = "T"
    receive.invisible_duration.seconds = 10**12
    assert _refused(receive_request, receive).code == Code.ILLEGAL_INVISIBLE_TIME
    receive.invisible_duration.seconds = 30
    receive.long_polling_timeout.seconds, receive.long_polling_timeout.nanos = 1, -1
    assert _refused(receive_request, receive).code == Code.ILLEGAL_POLLING_TIME


def test_the_door_reads_the_official_clients_milliseconds_and_refuses_bad_times(
    tmp_path: Path,
) -> None:
    """Through a replica's door: ``now_ms + 60_000`` in ``seconds`` (the official client's own
    test) is a timer due in a minute, not INTERNAL_ERROR "ValueError"."""

    async def test(group: Group) -> None:
        master = await _topic_with_route(group, "Timers", "+message.type=DELAY")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            now_ms = int(time.time() * 1000)
            sent = await stub.SendMessage(
                service_pb2.SendMessageRequest(messages=[_delayed(now_ms + 60_000)])
            )
            assert sent.status.code == Code.OK, sent.status
            assert RecallHandle.parse(sent.entries[0].recall_handle).due_ms == now_ms + 60_000
            for seconds, nanos in ((10**15, 0), (now_ms // 1000, -1)):
                refused = await stub.SendMessage(
                    service_pb2.SendMessageRequest(messages=[_delayed(seconds, nanos)])
                )
                assert refused.status.code == Code.ILLEGAL_DELIVERY_TIME, refused.status
                assert "delivery_timestamp is not a valid Timestamp" in refused.status.message
            query = service_pb2.QueryOffsetRequest(query_offset_policy=definition_pb2.TIMESTAMP)
            query.message_queue.topic.name = "Timers"
            query.message_queue.broker.name = "broker-a"
            query.timestamp.seconds = now_ms
            answer = await stub.QueryOffset(query)
            assert answer.status.code == Code.BAD_REQUEST, answer.status
            assert "timestamp is not a valid Timestamp" in answer.status.message

    _run(tmp_path, test)


def test_a_bad_invisible_duration_is_illegal_invisible_time_at_both_doors(tmp_path: Path) -> None:
    """ChangeInvisibleDuration reads its Duration through ``proxy.timestamps`` too, at a
    replica's door and at the stand-alone proxy (which answers before forwarding anything)."""
    change = service_pb2.ChangeInvisibleDurationRequest(
        receipt_handle="7 1795658549814 30000 0 0 broker-a 2 15", message_id="M"
    )
    change.group.name = "G"
    change.topic.name = "Timers"
    change.invisible_duration.seconds, change.invisible_duration.nanos = 1, -1

    async def replica(group: Group) -> None:
        master = await _topic_with_route(group, "Timers")
        channel, stub = _stub(master.grpc_address)
        async with channel:
            answer = await stub.ChangeInvisibleDuration(change)
        assert answer.status.code == Code.ILLEGAL_INVISIBLE_TIME, answer.status
        assert "invisible_duration is not a valid Duration" in answer.status.message

    _run(tmp_path, replica)

    async def proxy() -> None:
        namesrv = NameServer(NameServerConfig(listen_host="127.0.0.1", listen_port=0))
        await namesrv.start()
        door = ClusterProxy(f"127.0.0.1:{namesrv.port}", "127.0.0.1:0")
        try:
            await door.start()
            channel, stub = _stub(f"127.0.0.1:{door.port}")
            async with channel:
                answer = await stub.ChangeInvisibleDuration(change)
        finally:
            await door.close()
            await namesrv.close()
        assert answer.status.code == Code.ILLEGAL_INVISIBLE_TIME, answer.status

    asyncio.run(asyncio.wait_for(proxy(), 60))
