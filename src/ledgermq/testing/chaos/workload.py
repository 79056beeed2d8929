"""The workload of a chaos run: producers that record a history, and the readers that collect
what the cluster kept once it is healed.

Producers run on their own event loop in a thread, so that the nemesis (blocking ``ip`` calls,
signals, restarts) never delays a send's invoke or completion time. Each producer sends its
messages one at a time, numbered from 0 (``history.message_body``). The client's retries are
off: each history entry is one attempt, whose outcome the client knows exactly. With retries,
an attempt of unknown outcome followed by one refused outright (no route during the election)
ends as "failed" although the first one may commit; an unsafe run (seed 8) showed three such
sends stored. A failed send moves on to the next number; it is not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Final

from ledgermq.client import ConsumeStatus, Producer, PushConsumer
from ledgermq.errors import (
    ConnectError,
    LedgerMQError,
    MQResponseError,
    NetworkError,
    NoRouteError,
)
from ledgermq.testing.chaos.history import Outcome, ReadMessage, SendOp, message_body, parse_body
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire.message import MessageExt

__all__ = ["Workload", "classify", "consume_all", "read_replica"]

_PULL_BATCH: Final = 256
_FAILURE_PAUSE_S: Final = 0.1
_SEND_TIMEOUT_S: Final = 3.0


def classify(exc: LedgerMQError) -> Outcome:
    """What a send's exception says about whether the message was stored.

    Not stored: the connection was never made, there was no route, or the broker refused it
    (any error code but SYSTEM_ERROR, which ``message_writer`` answers when a quorum did not
    acknowledge in time, the message may still commit). Anything else (a timeout, a
    connection lost after the request left) is unknown.
    """
    if isinstance(exc, ConnectError | NoRouteError):
        return Outcome.FAILED
    if isinstance(exc, MQResponseError):
        return Outcome.UNKNOWN if exc.code == MQResponseCode.SYSTEM_ERROR else Outcome.FAILED
    if isinstance(exc, NetworkError):
        return Outcome.UNKNOWN
    return Outcome.UNKNOWN


class Workload:
    """``producers`` producers sending to ``topic`` until ``stop`` (see the module docstring).

    ``origin`` is the run's ``time.monotonic()`` at time 0; ``pause_s`` is each producer's pause
    between sends (the offered load). ``sends`` grows while it runs (appends are atomic).
    """

    def __init__(
        self,
        namesrv_addr: str,
        topic: str,
        *,
        producers: int,
        origin: float,
        pause_s: float = 0.01,
        body_pad: int = 100,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.topic = topic
        self.producers = producers
        self.origin = origin
        self.pause_s = pause_s
        self.body_pad = body_pad
        self.sends: list[SendOp] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="chaos-workload", daemon=True)

    def now_ms(self) -> float:
        return (time.monotonic() - self.origin) * 1000

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop sending and wait for the sends in flight to end (each is bounded by its
        timeouts and retries)."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.errors.append(f"the workload did not stop within {timeout_s:g} s")

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception as exc:  # noqa: BLE001 - reported in the run's result, not lost
            self.errors.append(f"workload crashed: {exc!r}")

    async def _run(self) -> None:
        await asyncio.gather(*(self._producer(index) for index in range(self.producers)))

    async def _producer(self, index: int) -> None:
        producer = Producer(
            f"chaos-producer-{index}",
            self.namesrv_addr,
            send_timeout_s=_SEND_TIMEOUT_S,
            retry_times=0,
            fault_avoid_ms=500,
            route_refresh_interval_s=1.0,
            instance_name=f"chaos-{index}",
        )
        await producer.start()
        try:
            seq = 0
            while not self._stop.is_set():
                self.sends.append(await self._send(producer, index, seq))
                seq += 1
                pause = self.pause_s if self.sends[-1].outcome is Outcome.OK else _FAILURE_PAUSE_S
                await asyncio.sleep(pause)
        finally:
            await producer.shutdown()

    async def _send(self, producer: Producer, index: int, seq: int) -> SendOp:
        invoked = self.now_ms()
        body = message_body(index, seq, self.body_pad)
        try:
            result = await producer.send(self.topic, body, keys=f"{index}-{seq}")
        except LedgerMQError as exc:
            return SendOp(index, seq, invoked, self.now_ms(), classify(exc), error=str(exc)[:200])
        if not result.ok:
            return SendOp(index, seq, invoked, self.now_ms(), Outcome.UNKNOWN,
                          error=result.status.value)  # fmt: skip
        return SendOp(
            index, seq, invoked, self.now_ms(), Outcome.OK,
            result.message_queue.queue_id, result.queue_offset,
        )  # fmt: skip


def _reads(messages: list[MessageExt]) -> list[ReadMessage]:
    found = []
    for message in messages:
        key = parse_body(message.body)
        if key is not None:
            found.append(ReadMessage(message.queue_id, message.queue_offset, *key))
    return found


def read_replica(
    cluster: BrokerCluster, group: str, node: str, topic: str, queues: int
) -> list[ReadMessage]:
    """Every message of ``topic`` as replica ``node`` itself serves it (a slave serves pulls
    too), queue by queue from offset 0; LedgerMQError if the replica does not answer."""
    address = cluster.address(group, node)
    found: list[ReadMessage] = []
    for queue in range(queues):
        offset = 0
        while True:
            answer = cluster.request(
                address,
                MQRequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "chaos-replica-check",
                    "topic": topic,
                    "queueId": str(queue),
                    "queueOffset": str(offset),
                    "maxMsgNums": str(_PULL_BATCH),
                    "sysFlag": "0",
                    "commitOffset": "-1",
                    "suspendTimeoutMillis": "0",
                    "subscription": "*",
                    "subVersion": "0",
                    "expressionType": "TAG",
                },
                timeout_s=5.0,
            )
            next_offset = int(answer.ext_fields.get("nextBeginOffset", offset))
            if answer.code == MQResponseCode.PULL_OFFSET_MOVED and next_offset > offset:
                offset = next_offset
                continue
            if answer.code != MQResponseCode.SUCCESS:
                break  # PULL_NOT_FOUND / NO_NEW_MSG: the end of the queue
            found += _reads(decode_records(answer.body))
            if next_offset <= offset:
                break
            offset = next_offset
    return found


async def consume_all(
    namesrv_addr: str, topic: str, expected: set[tuple[int, int]], timeout_s: float
) -> list[ReadMessage]:
    """Run a push consumer group on ``topic`` from its first offset until every message of
    ``expected`` (producer, seq) arrived or ``timeout_s`` passed; every delivery, duplicates
    included."""
    received: list[ReadMessage] = []
    seen: set[tuple[int, int]] = set()
    complete = asyncio.Event()

    async def listener(batch: list[MessageExt]) -> ConsumeStatus:
        for read in _reads(batch):
            received.append(read)
            seen.add((read.producer, read.seq))
        if expected <= seen:
            complete.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "chaos-consumer",
        namesrv_addr,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        pull_batch_size=256,
        batch_size=64,
        suspend_timeout_ms=1000,
        pull_timeout_s=5.0,
        backoff_s=(0.2, 0.5),
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    await consumer.start()
    try:
        if not expected:
            complete.set()
        with contextlib.suppress(TimeoutError):  # what arrived is the answer; the checker judges
            await asyncio.wait_for(complete.wait(), timeout_s)
    finally:
        await consumer.shutdown()
    return received
