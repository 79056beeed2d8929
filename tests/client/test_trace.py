"""Message trace: RocketMQ's record format, and a traced send and consume found by the message's
id through the trace topic (issue 18 section 4)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, ConsumeStatus, Producer, PushConsumer
from ledgermq.client.trace import decode_trace, pub, sub_after, sub_before

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire import MessageExt

    MakeCluster = Callable[..., BrokerCluster]


def test_records_are_rocketmqs_format_and_decode_back() -> None:
    record = pub(timestamp_ms=1000, group="pg", topic="T", msg_id="ID1", tags="t", keys="k",
                 store_host="10.0.0.1:10911", body_length=5, cost_ms=3,
                 offset_msg_id="OFF", success=True)  # fmt: skip
    # TraceDataEncoder's Pub layout: type, time, region, group, topic, msgId, tags, keys,
    # storeHost, bodyLength, costTime, msgType, offsetMsgId, success; \\x01 between, \\x02 after
    assert record == (
        "Pub\x011000\x01DefaultRegion\x01pg\x01T\x01ID1\x01t\x01k\x0110.0.0.1:10911\x015\x013"
        "\x010\x01OFF\x01true\x02"
    )
    body = record + sub_before(timestamp_ms=1001, group="cg", request_id="R", msg_id="ID1",
                               retry_times=0, keys="k") + sub_after(
        request_id="R", msg_id="ID1", cost_ms=2, success=True, keys="k", context_code=0,
        timestamp_ms=1003, group="cg")  # fmt: skip
    events = decode_trace(body)
    assert [(e.kind, e.msg_id, e.group) for e in events] == [
        ("Pub", "ID1", "pg"),
        ("SubBefore", "ID1", "cg"),
        ("SubAfter", "ID1", "cg"),
    ]
    assert events[0].store_host == "10.0.0.1:10911"
    assert events[2].cost_ms == 2
    assert events[2].success is True
    assert decode_trace("Nonsense\x01x\x02") == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_traced_message_shows_who_sent_and_consumed_it(broker_clusters: MakeCluster) -> None:
    from tests.test_cli_admin import ledgermq

    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr

    async def main() -> str:
        producer = Producer("traced-producer", ns, enable_msg_trace=True)
        got = asyncio.Event()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            got.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("traced-group", ns, enable_msg_trace=True,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
        consumer.subscribe("Traced", "*")
        consumer.register_listener(listener)
        await producer.start()
        try:
            result = await producer.send("Traced", b"follow me", keys=["order-7"])
            await consumer.start()
            await asyncio.wait_for(got.wait(), 30)
        finally:
            await producer.shutdown()  # sends what is queued
            await consumer.shutdown()
        async with Admin(ns) as admin:
            for _ in range(100):
                events = await admin.message_trace(result.msg_id)
                if {e.kind for e in events} == {"Pub", "SubBefore", "SubAfter"}:
                    break
                await asyncio.sleep(0.1)
        assert [(e.kind, e.group) for e in events] == [
            ("Pub", "traced-producer"),
            ("SubBefore", "traced-group"),
            ("SubAfter", "traced-group"),
        ]
        assert events[0].topic == "Traced"
        assert events[0].keys == "order-7"
        assert events[2].success is True
        return result.offset_msg_id

    offset_msg_id = asyncio.run(main())
    shown = ledgermq("admin", "-n", ns, "message", "--id", offset_msg_id, "--json")
    assert shown.returncode == 0, shown.stderr
    [record] = json.loads(shown.stdout)
    assert [e["kind"] for e in record["trace"]] == ["Pub", "SubBefore", "SubAfter"]
    text = ledgermq("admin", "-n", ns, "message", "--id", offset_msg_id)
    assert "sent by traced-producer" in text.stdout
    assert "consumed by traced-group" in text.stdout
