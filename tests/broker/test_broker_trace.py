"""The broker's own trace records (``broker.service.trace``): RocketMQ's format as our clients
write it, batched into trace messages keyed by the message ids, stored through the send service,
dropped and counted (never raised) when the store refuses."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pytest

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.errors import NotMasterError
from ledgermq.broker.service.pop import PopHandle, PoppedMessage
from ledgermq.broker.service.trace import BrokerTracer
from ledgermq.errors import ConfigError
from ledgermq.wire import MessageProperty
from ledgermq.wire.message import MessageExt
from ledgermq.wire.trace import TraceEvent, decode_trace

if TYPE_CHECKING:
    from ledgermq.broker.service.send import SendRequest, SendService
    from ledgermq.broker.state.broker_state import BrokerState

PEERS = "n0-127.0.0.1:40911"


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_700_000_000.0

    def wall_time_s(self) -> float:
        return self.now_s


@dataclass
class State:
    config: BrokerConfig = field(
        default_factory=lambda: BrokerConfig.from_properties(
            {"dLegerPeers": PEERS, "brokerIP1": "10.0.0.5", "listenPort": "10911"}
        )
    )
    clock: Clock = field(default_factory=Clock)


class Sends:
    """The send service: keeps what it is given, or refuses while ``refuse``."""

    def __init__(self) -> None:
        self.stored: list[tuple[SendRequest, bytes, str]] = []
        self.refuse = False

    async def send(self, request: SendRequest, body: bytes, client_address: str) -> None:
        if self.refuse:
            raise NotMasterError("this replica is not the master")
        self.stored.append((request, body, client_address))


def tracer(sends: Sends, state: State | None = None) -> BrokerTracer:
    return BrokerTracer(
        cast("BrokerState", state or State()), cast("SendService", sends), "OpsTrace"
    )


def popped(msg_id: str, attempt: int) -> PoppedMessage:
    message = MessageExt(
        topic="T", queue_id=1, flag=0, queue_offset=7, commit_log_offset=100, sys_flag=0,
        born_timestamp=0, born_host="1.2.3.4:5", store_timestamp=0, store_host="10.0.0.5:10911",
        reconsume_times=attempt - 1, prepared_transaction_offset=0, body=b"x",
        properties={MessageProperty.UNIQ_KEY: msg_id, MessageProperty.KEYS: "order-1"},
        body_crc=0, store_size=0,
    )  # fmt: skip
    handle = PopHandle(3, 1_700_000_000_000 - 250, 30_000, "broker-a", 1, 7)
    return PoppedMessage(message, handle, attempt)


def test_records_are_rocketmqs_and_batched_into_one_keyed_message() -> None:
    sends = Sends()

    async def main() -> None:
        t = tracer(sends)
        t.pub(timestamp_ms=1_700_000_000_000 - 3, group="__grpc_producer", topic="T",
              msg_id="ID1", tags="tagA", keys="k1 k2", body_length=11, cost_ms=3,
              offset_msg_id="0A00000500002A9F0000000000000064")  # fmt: skip
        t.delivered(group="G", popped=popped("ID1", attempt=2))
        t.acked(group="G", msg_id="ID1", handle=str(popped("ID1", 2).handle))
        t.acked(group="G", msg_id="ID2", handle="not a handle")
        await t.close()
        assert (t.stored, t.dropped) == (4, 0)

    asyncio.run(main())
    ((request, body, _),) = sends.stored
    assert request.topic == "OpsTrace"
    assert request.producer_group == "_INNER_TRACE_PRODUCER-OpsTrace"
    assert request.property_map()[MessageProperty.KEYS] == "ID1 ID2"
    handle = str(popped("ID1", 2).handle)
    assert decode_trace(body.decode()) == [
        TraceEvent("Pub", "ID1", 1_700_000_000_000 - 3, "__grpc_producer", "T", "tagA", "k1 k2",
                   "10.0.0.5:10911", 11, 3, "0A00000500002A9F0000000000000064", True),
        TraceEvent("SubBefore", "ID1", 1_700_000_000_000 - 250, "G", keys="order-1",
                   request_id=handle, retry_times=1),
        TraceEvent("SubAfter", "ID1", 1_700_000_000_000, "G", cost_ms=250, success=True,
                   request_id=handle),
        TraceEvent("SubAfter", "ID2", 1_700_000_000_000, "G", cost_ms=-1, success=True,
                   request_id="not a handle"),
    ]  # fmt: skip


def test_a_refused_store_drops_and_counts_and_raises_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sends = Sends()
    sends.refuse = True

    async def main() -> BrokerTracer:
        t = tracer(sends)
        for i in range(150):
            t.acked(group="G", msg_id=f"ID{i}", handle="h")
        await t.close()
        return t

    t = asyncio.run(main())
    assert (t.stored, t.dropped) == (0, 150)
    assert "100 trace records for OpsTrace dropped: this replica is not the master" in caplog.text
    assert "50 trace records for OpsTrace dropped" in caplog.text


def test_records_go_out_in_the_background_within_a_batch_wait() -> None:
    sends = Sends()

    async def main() -> None:
        t = tracer(sends)
        t.acked(group="G", msg_id="ID1", handle="h")
        for _ in range(100):
            if sends.stored:
                break
            await asyncio.sleep(0.01)
        assert len(sends.stored) == 1
        await t.close()

    asyncio.run(main())


def test_trace_settings() -> None:
    config = BrokerConfig.from_properties({"dLegerPeers": PEERS})
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (
        False,
        "RMQ_SYS_TRACE_TOPIC",
    )
    on = BrokerConfig.from_properties(
        {"dLegerPeers": PEERS, "traceTopicEnable": "true", "msgTraceTopicName": "OpsTrace"}
    )
    assert on.to_properties()["traceTopicEnable"] == "true"
    assert on.to_properties()["msgTraceTopicName"] == "OpsTrace"
    with pytest.raises(ConfigError, match="msgTraceTopicName: "):
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "msgTraceTopicName": "no spaces"})
