"""The workload of a chaos run: producers that record a history, and the readers that collect
what the cluster kept once it is healed.

Producers run on their own event loop in a thread, so that the nemesis (blocking ``ip`` calls,
signals, restarts) never delays a send's invoke or completion time. With namespaces, that thread
(and the consumer group's, ``run_as_client``) first moves into the clients' namespace
(``netns.enter_namespace``): clients reach the cluster across the bridge, as remote ones do.

Each producer sends its messages one request at a time, numbered from 0
(``history.message_body``), in one of three modes picked by its index: ``single`` (``send``),
``batch`` (``send_batch`` of ``_BATCH`` messages, one queue, consecutive offsets) and
``orderly`` (``send_orderly`` with the producer's own sharding key: one queue for all of its
messages). The client's own retries are off: each history entry is one attempt, whose outcome
the client knows exactly (with the client's retries, an attempt of unknown outcome followed by
one refused outright ended as "failed" although the first one may commit; an unsafe run, seed
8, showed three such sends stored). A ``single`` producer retries a message of unknown outcome
itself, up to ``_RETRIES`` times, and each attempt is recorded (``SendOp.attempt``); any other
failed or unknown send moves on to the next number and is not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Final, TypeVar

from ledgermq.client import ConsumeStatus, Producer, PushConsumer
from ledgermq.errors import (
    ConnectError,
    LedgerMQError,
    MQResponseError,
    NetworkError,
    NoRouteError,
)
from ledgermq.testing.chaos.history import (
    Outcome,
    ReadMessage,
    SendOp,
    message_body,
    parse_body,
    queue_key,
)
from ledgermq.testing.chaos.netns import enter_namespace
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.testing.chaos.reader import PullReader
    from ledgermq.wire.message import MessageExt

__all__ = ["Workload", "classify", "consume_all", "read_replica", "run_as_client"]

T = TypeVar("T")

_PULL_BATCH: Final = 256
MODES: Final = ("single", "batch", "orderly")
"""Producer ``i`` sends in mode ``MODES[i % 3]``."""
_BATCH: Final = 4
_RETRIES: Final = 2
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
    ``namespace``: the network namespace the clients run in (None: this process's).
    ``reader``: a pull reader on the same loop, reading while the faults happen (or None).
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
        namespace: str | None = None,
        reader: PullReader | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.namespace = namespace
        self.reader = reader
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
            if self.namespace is not None:
                enter_namespace(self.namespace)
            asyncio.run(self._run())
        except Exception as exc:  # noqa: BLE001 - reported in the run's result, not lost
            self.errors.append(f"workload crashed: {exc!r}")

    async def _run(self) -> None:
        tasks = [self._producer(index) for index in range(self.producers)]
        if self.reader is not None:
            tasks.append(self.reader.run(self._stop))
        await asyncio.gather(*tasks)

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
        mode = MODES[index % len(MODES)]
        try:
            seq = attempt = 0
            while not self._stop.is_set():
                ops = await self._send(producer, index, seq, mode, attempt)
                self.sends.extend(ops)
                outcome = ops[0].outcome
                if mode == "single" and outcome is Outcome.UNKNOWN and attempt < _RETRIES:
                    attempt += 1  # the same message again, recorded as its own attempt
                else:
                    seq, attempt = seq + len(ops), 0
                await asyncio.sleep(self.pause_s if outcome is Outcome.OK else _FAILURE_PAUSE_S)
        finally:
            await producer.shutdown()

    async def _send(
        self, producer: Producer, index: int, seq: int, mode: str, attempt: int
    ) -> list[SendOp]:
        """One request: one message, or ``_BATCH`` numbered from ``seq`` in batch mode."""
        count = _BATCH if mode == "batch" else 1
        bodies = [message_body(index, seq + i, self.body_pad) for i in range(count)]
        invoked = self.now_ms()

        def ops(
            outcome: Outcome, queue: int = -1, offset: int = -1, error: str = ""
        ) -> list[SendOp]:
            return [
                SendOp(
                    index,
                    seq + i,
                    invoked,
                    self.now_ms(),
                    outcome,
                    queue,
                    -1 if offset < 0 else offset + i,
                    error,
                    mode,
                    attempt,
                )
                for i in range(count)
            ]

        try:
            if mode == "batch":
                result = await producer.send_batch(self.topic, bodies)
            elif mode == "orderly":
                result = await producer.send_orderly(self.topic, bodies[0], f"chaos-key-{index}")
            else:
                result = await producer.send(self.topic, bodies[0], keys=f"{index}-{seq}")
        except LedgerMQError as exc:
            return ops(classify(exc), error=str(exc)[:200])
        if not result.ok:
            return ops(Outcome.UNKNOWN, error=result.status.value)
        mq = result.message_queue
        return ops(Outcome.OK, queue_key(mq.broker_name, mq.queue_id), result.queue_offset)


def run_as_client(namespace: str | None, main: Callable[[], Coroutine[object, object, T]]) -> T:
    """``asyncio.run(main())`` on a thread of its own inside ``namespace`` (the clients'), or
    on this thread when None; its result, or its exception raised here."""
    if namespace is None:
        return asyncio.run(main())
    outcome: list[T] = []
    failure: list[BaseException] = []

    def client_thread() -> None:
        try:
            enter_namespace(namespace)
            outcome.append(asyncio.run(main()))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=client_thread, name="chaos-client", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


def _reads(messages: list[MessageExt], group: str = "broker-a") -> list[ReadMessage]:
    """The messages of the workload among ``messages`` of broker group ``group`` (the push
    consumer's deliveries keep their queue ids: the checker counts them by message)."""
    found = []
    for message in messages:
        key = parse_body(message.body)
        if key is not None:
            queue = queue_key(group, message.queue_id)
            found.append(ReadMessage(queue, message.queue_offset, *key))
    return found


def read_replica(
    cluster: BrokerCluster, group: str, node: str, topic: str, queues: int
) -> tuple[list[ReadMessage], dict[int, int]]:
    """Every message of ``topic`` (queues by ``history.queue_key``) as replica ``node`` of
    ``group`` itself serves it (a slave serves pulls
    too), queue by queue from offset 0, and each queue's first offset it still holds (above 0
    when retention deleted its oldest messages: it answers OFFSET_MOVED to offset 0);
    LedgerMQError if the replica does not answer."""
    address = cluster.address(group, node)
    found: list[ReadMessage] = []
    first: dict[int, int] = {}
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
                if offset == 0:
                    first[queue_key(group, queue)] = next_offset
                offset = next_offset
                continue
            if answer.code != MQResponseCode.SUCCESS:
                break  # PULL_NOT_FOUND / NO_NEW_MSG: the end of the queue
            found += _reads(decode_records(answer.body), group)
            if next_offset <= offset:
                break
            offset = next_offset
    return found, first


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
