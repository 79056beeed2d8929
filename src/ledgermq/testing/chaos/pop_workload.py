"""The POP group of a chaos run: a few receivers of one consumer group that consume the chaos
topic by POP while the faults happen, and go on after healing until everything is drained.

The receivers use the remoting POP door (``client.PopConsumer``), as our own clients do, on
their own event loop in a thread of the clients' namespace (like the producers'). Each loops
over the topic's broker groups: a receive of up to ``_BATCH`` messages invisible for
``INVISIBLE_S`` (long polling ``_POLL_S``), then an ack of each message it got, or not, by
``ack_policy``: most are acked at once, some only from their second delivery (so redeliveries
happen with nothing broken), a few never (they go to ``%DLQ%chaos-pop`` after
``MAX_ATTEMPTS``, set as the group's ``retryMaxTimes`` before the run). Every delivery and
every ack with its outcome is recorded (``history.PopDelivery`` / ``PopAck``); the checker's
rules 8 to 10 judge them (``checker_pop``).

After healing, ``drain`` keeps the receivers going until every message the checker expects was
delivered and the never-acked ones had time to be dead-lettered, then stops them and reads the
group's ``%DLQ%`` topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Final

from ledgermq.client import Admin, PullConsumer, PullStatus
from ledgermq.client.pop import PopConsumer
from ledgermq.errors import ConnectError, LedgerMQError, MQResponseError, NoRouteError
from ledgermq.testing.chaos.history import (
    Outcome,
    PopAck,
    PopDeadLetter,
    PopDelivery,
    parse_body,
    queue_key,
)
from ledgermq.testing.chaos.netns import enter_namespace
from ledgermq.testing.chaos.workload import run_as_client
from ledgermq.wire import MessageProperty, MQResponseCode

if TYPE_CHECKING:
    from ledgermq.client.pop import PoppedMessage

__all__ = [
    "INVISIBLE_S",
    "MAX_ATTEMPTS",
    "POP_GROUP",
    "PopGroup",
    "ack_policy",
    "classify_ack",
    "read_dlq",
]

POP_GROUP: Final = "chaos-pop"
MAX_ATTEMPTS: Final = 3
"""The group's ``retryMaxTimes``: a never-acked message is dead-lettered within about
``MAX_ATTEMPTS x INVISIBLE_S``."""
INVISIBLE_S: Final = 4.0
_POLL_S: Final = 1.0
_BATCH: Final = 16
_TIMEOUT_S: Final = 3.0
_PAUSE_S: Final = 0.2
_DLQ_GRACE_S: Final = 3.0
"""After a never-acked message's last delivery expires, how long a receive may take to pass
its queue and dead-letter it."""


def ack_policy(producer: int, seq: int, attempt: int) -> bool:
    """Whether a receiver acks this delivery: 88 messages in 100 at once, 10 from their second
    attempt, 2 never (deterministic by message, so a run's replay does the same)."""
    bucket = (producer * 7919 + seq * 31) % 100
    if bucket < 2:
        return False
    return bucket >= 12 or attempt >= 2


def classify_ack(exc: LedgerMQError) -> Outcome:
    """What an ack's exception says about whether it took effect: ``FAILED`` (refused) only
    when nothing was proposed: no connection or route, a stale handle (NO_MESSAGE, checked
    before proposing), or a replica that says it is a slave. Anything else is ``UNKNOWN``,
    SERVICE_NOT_AVAILABLE "the change was not stored" included: the broker answers it when
    the ack's entry was not committed in time, and that entry may still commit."""
    if isinstance(exc, ConnectError | NoRouteError):
        return Outcome.FAILED
    if isinstance(exc, MQResponseError):
        if exc.code == MQResponseCode.NO_MESSAGE:
            return Outcome.FAILED
        if exc.code == MQResponseCode.SERVICE_NOT_AVAILABLE and "is a slave" in str(exc):
            return Outcome.FAILED
    return Outcome.UNKNOWN


class PopGroup:
    """``receivers`` POP receivers of ``POP_GROUP`` on ``topic`` (module docstring); times as
    the workload's (``origin``); ``namespace``: the clients' (None: this process's)."""

    def __init__(
        self,
        namesrv_addr: str,
        topic: str,
        *,
        origin: float,
        namespace: str | None = None,
        receivers: int = 3,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.topic = topic
        self.origin = origin
        self.namespace = namespace
        self.receivers = receivers
        self.deliveries: list[PopDelivery] = []
        self.acks: list[PopAck] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="chaos-pop", daemon=True)

    def now_ms(self) -> float:
        return (time.monotonic() - self.origin) * 1000

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the receivers once the group's ``retryMaxTimes`` is set (or ``timeout_s``)."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            self.errors.append(f"the POP group was not set up within {timeout_s:g} s")

    def drain(self, expected: set[tuple[int, int]], timeout_s: float) -> bool:
        """Block until every ``(producer, seq)`` of ``expected`` was delivered and every
        never-acked delivery at its last attempt had time to be dead-lettered, or
        ``timeout_s``; then stop the receivers. Whether it drained."""
        deadline = time.monotonic() + timeout_s
        drained = False
        while time.monotonic() < deadline and self._thread.is_alive():
            delivered = {(d.producer, d.seq) for d in self.deliveries[:]}
            last = [
                d.complete_ms
                for d in self.deliveries[:]
                if d.attempt >= MAX_ATTEMPTS and not ack_policy(d.producer, d.seq, d.attempt)
            ]
            settle_ms = max(last, default=0.0) + (INVISIBLE_S + _DLQ_GRACE_S) * 1000
            if expected <= delivered and self.now_ms() >= settle_ms:
                drained = True
                break
            time.sleep(0.5)
        self.stop()
        return drained

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.errors.append(f"the POP receivers did not stop within {timeout_s:g} s")

    def _main(self) -> None:
        try:
            if self.namespace is not None:
                enter_namespace(self.namespace)
            asyncio.run(self._run())
        except Exception as exc:  # noqa: BLE001 - reported in the run's notes, not lost
            self.errors.append(f"POP receivers crashed: {exc!r}")
        finally:
            self._ready.set()

    async def _run(self) -> None:
        await self._set_up_group()
        self._ready.set()
        await asyncio.gather(*(self._receiver(index) for index in range(self.receivers)))

    async def _set_up_group(self) -> None:
        """The group's ``retryMaxTimes`` on every master, before any receive fixes it."""
        async with Admin(self.namesrv_addr) as admin:
            for _ in range(50):
                try:
                    await admin.update_group(POP_GROUP, retryMaxTimes=MAX_ATTEMPTS)
                except LedgerMQError:
                    await asyncio.sleep(_PAUSE_S)
                else:
                    return
        self.errors.append("the POP group's retryMaxTimes could not be set")

    async def _receiver(self, index: int) -> None:
        consumer = PopConsumer(
            POP_GROUP,
            self.namesrv_addr,
            request_timeout_s=_TIMEOUT_S,
            instance_name=f"chaos-pop-{index}",
            route_refresh_interval_s=1.0,
        )
        await consumer.start()
        try:
            brokers: list[str] = []
            turn = index
            while not self._stop.is_set():
                if not brokers:
                    with contextlib.suppress(LedgerMQError):
                        brokers = await consumer.broker_names(self.topic)
                    if not brokers:
                        await asyncio.sleep(_PAUSE_S)
                        continue
                broker = brokers[turn % len(brokers)]
                turn += 1
                got = await self._receive(consumer, index, broker)
                await asyncio.gather(*(self._ack(consumer, index, popped) for popped in got))
        finally:
            await consumer.shutdown()

    async def _receive(
        self, consumer: PopConsumer, index: int, broker: str
    ) -> list[tuple[PoppedMessage, PopDelivery]]:
        invoked = self.now_ms()
        try:
            result = await consumer.receive(
                self.topic,
                broker,
                max_messages=_BATCH,
                invisible_s=INVISIBLE_S,
                poll_s=_POLL_S,
            )
        except LedgerMQError:
            await asyncio.sleep(_PAUSE_S)  # a fault, most likely: the next round tries again
            return []
        now = self.now_ms()
        got = []
        for popped in result.messages:
            sent = parse_body(popped.message.body)
            if sent is None:
                continue
            delivery = PopDelivery(
                index,
                invoked,
                now,
                queue_key(broker, popped.queue_id),
                popped.queue_offset,
                *sent,
                popped.attempt,
                popped.handle,
                popped.message.msg_id,
            )
            self.deliveries.append(delivery)
            got.append((popped, delivery))
        return got

    async def _ack(
        self, consumer: PopConsumer, index: int, got: tuple[PoppedMessage, PopDelivery]
    ) -> None:
        popped, delivery = got
        if not ack_policy(delivery.producer, delivery.seq, delivery.attempt):
            return
        invoked = self.now_ms()
        error = ""
        try:
            await consumer.ack(self.topic, popped.handle)
        except LedgerMQError as exc:
            outcome, error = classify_ack(exc), str(exc)[:200]
        else:
            outcome = Outcome.OK
        self.acks.append(
            PopAck(
                index,
                invoked,
                self.now_ms(),
                delivery.queue,
                delivery.offset,
                delivery.producer,
                delivery.seq,
                popped.handle,
                outcome,
                error,
            )
        )


def read_dlq(namesrv_addr: str, namespace: str | None) -> list[PopDeadLetter]:
    """The workload's messages in ``%DLQ%chaos-pop`` as the healed cluster serves them (none
    when the topic was never created)."""
    return run_as_client(namespace, lambda: _read_dlq(namesrv_addr))


async def _read_dlq(namesrv_addr: str) -> list[PopDeadLetter]:
    topic = f"%DLQ%{POP_GROUP}"
    found: list[PopDeadLetter] = []
    async with PullConsumer("chaos-dlq-check", namesrv_addr, request_timeout_s=_TIMEOUT_S) as pull:
        try:
            queues = await pull.fetch_queues(topic)
        except LedgerMQError:
            return found  # no such topic: nothing was dead-lettered
        for mq in queues:
            offset = 0
            while True:
                result = await pull.pull(mq, offset, 64)
                for message in result.messages:
                    sent = parse_body(message.body)
                    if sent is not None:
                        origin = message.properties.get(MessageProperty.ORIGIN_MESSAGE_ID, "")
                        found.append(PopDeadLetter(*sent, origin))
                if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    return found
