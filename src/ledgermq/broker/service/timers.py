"""Timer messages: a send diverted to the timer topic, the master's driver that delivers them
when due, and RecallMessage -- one meaning for both front doors (issue 16 section 3).

A message is a timer message when it carries RocketMQ 5's ``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS`` (in that precedence, as RocketMQ's
``HookUtils.transformTimerMessage``; the gRPC door turns ``delivery_timestamp`` into
``TIMER_DELIVER_MS``) and no delay level (a ``DELAY`` level wins, as in RocketMQ, and the
message takes the delay-level path of ``broker.service.retry``). Its due time:

- not a whole number, or negative: the send is refused (``IllegalMessageError``);
- now or in the past: it is an ordinary message, stored in its topic at once;
- more than ``timerMaxDelaySec`` (3 days) ahead: refused;
- otherwise it is stored in ``rmq_sys_wheel_timer`` with its real topic and queue in
  ``REAL_TOPIC`` / ``REAL_QID`` and its due time in ``TIMER_OUT_MS``, invisible to consumers.
  The send answers with a recall handle (RocketMQ 5.3's ``RecallMessageHandle`` v1: URL-safe
  base64 of ``"v1 <topic> <brokerName> <due ms> <message id>"``).

The replicated state is ``broker.state.timer_table``; this module only decides. The driver runs
on the master: it takes the due timers from the wheel (oldest first), commits their ``Firing``
records through the metadata channel, then writes each message into its real topic through the
normal write path (``MessageWriter``) with its unique key (the message id clients see), keys,
tags, body and properties, plus ``TIMER_OUT_MS`` (when it was due), ``TIMER_ENQUEUE_MS``,
``TIMER_DEQUEUE_MS`` and ``LEDGERMQ_TIMER_ID``; that write ends the timer on every replica. A
timer left firing (its write refused, or the old master died before it) is written again. A
timer that can never be written (its real topic is not a valid topic name, its queue id not a
number, its record gone or undecodable) is ended as fired, with an ERROR line and a metric
(``service.undeliverable``), never tried again for ever.

Recall and firing are serialised by one lock on the master, so a recall that answers success
was applied before any ``Firing`` of its timer, and the message is never delivered; one that
comes too late says so. Delivery is at least once across failovers, and exactly once when the
master that fired a timer lives until its write is committed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import (
    IllegalMessageError,
    InvalidArgumentError,
    NotFoundError,
    NotRecallableError,
    ServiceError,
)
from ledgermq.broker.service.undeliverable import drop_head, is_deterministic, target_problem
from ledgermq.broker.state.ops import TimerOp
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.timers import Fired, Recalled
from ledgermq.errors import (
    IndexCompactedError,
    IndexOutOfRangeError,
    LedgerMQError,
    MessageFormatError,
)
from ledgermq.wire.message import MessageProperty, SysFlag, decode_records, encode_properties

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    from ledgermq.broker.service.message_writer import MessageWriter, PutResult
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire.message import MessageExt

__all__ = [
    "FIRE_BATCH",
    "TIMER_PROPERTIES",
    "RecallHandle",
    "TimerDiversion",
    "TimerService",
    "divert_timer",
]

_log = logging.getLogger(__name__)

FIRE_BATCH: Final = 512
"""Timers one ``Firing`` op starts (one metadata entry); more due ones go in the next round."""
_IDLE_S: Final = 1.0
"""The driver looks at the wheel at least this often (a new timer also wakes it)."""
_RETRY_MS: Final = 1000
"""A delivery whose write failed is tried again after this long (the write may still land:
the wait lets the dispatcher see it first, which ends the timer)."""

TIMER_PROPERTIES: Final = (
    MessageProperty.TIMER_DELAY_SEC,
    MessageProperty.TIMER_DELAY_MS,
    MessageProperty.TIMER_DELIVER_MS,
)
"""The properties that make a timer message, in RocketMQ's precedence."""


# ---------------------------------------------------------------------- the send side
@dataclass(frozen=True, slots=True)
class TimerDiversion:
    """How a timer message is stored: the properties it waits with in the timer topic."""

    properties: str
    due_ms: int
    uniq_key: str


def due_ms(props: MutableMapping[str, str], now_ms: int) -> int | None:
    """The due time the timer properties of ``props`` give (None: not a timer message);
    ``IllegalMessageError`` for a value that is not a whole number or is negative."""
    for name in TIMER_PROPERTIES:
        text = props.get(name)
        if text is None:
            continue
        digits = text.removeprefix("-")
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
            # what Java's Long.parseLong takes (Python's int would also take " 5", "5_0")
            raise IllegalMessageError(
                f"timer message illegal: property {name} must be a whole number, not {text!r:.40}"
            )
        value = int(text)
        if value < 0:
            raise IllegalMessageError(
                f"timer message illegal: property {name} must not be negative, got {value}"
            )
        if name == MessageProperty.TIMER_DELAY_SEC:
            return now_ms + value * 1000
        if name == MessageProperty.TIMER_DELAY_MS:
            return now_ms + value
        return value
    return None


def divert_timer(
    props: MutableMapping[str, str],
    topic: str,
    queue_id: int,
    now_ms: int,
    max_delay_sec: int,
) -> TimerDiversion | None:
    """Decide the fate of a single message without a delay level (module docstring); ``props``
    are its properties. None: store it as it is, in its topic."""
    due = due_ms(props, now_ms)
    if due is None or due <= now_ms:
        return None
    if due - now_ms > max_delay_sec * 1000:
        raise IllegalMessageError(
            f"timer message illegal: it is due in {(due - now_ms) // 1000} s, beyond the "
            f"broker's timerMaxDelaySec ({max_delay_sec} s)"
        )
    waiting = dict(props)
    uniq = waiting.get(MessageProperty.UNIQ_KEY) or uuid.uuid4().hex.upper()
    waiting[MessageProperty.UNIQ_KEY] = uniq
    waiting[MessageProperty.REAL_TOPIC] = topic
    waiting[MessageProperty.REAL_QID] = str(queue_id)
    waiting[MessageProperty.TIMER_OUT_MS] = str(due)
    return TimerDiversion(encode_properties(waiting), due, uniq)


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """RocketMQ 5.3's ``RecallMessageHandle.HandleV1``; ``str`` is its wire form."""

    topic: str
    broker_name: str
    due_ms: int
    message_id: str

    def __str__(self) -> str:
        raw = f"v1 {self.topic} {self.broker_name} {self.due_ms} {self.message_id}"
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def parse(cls, text: str) -> RecallHandle:
        """The handle ``str`` made; ``InvalidArgumentError`` for anything else."""
        try:
            raw = base64.urlsafe_b64decode(text.encode()).decode()
        except (binascii.Error, UnicodeError, ValueError):
            raise InvalidArgumentError(f"recall handle is invalid: {text!r:.120}") from None
        fields = raw.split(" ")
        if len(fields) < 5 or fields[0] != "v1" or not fields[3].isdigit():
            raise InvalidArgumentError(f"recall handle is invalid: {text!r:.120}")
        return cls(fields[1], fields[2], int(fields[3]), fields[4])


# ---------------------------------------------------------------------- the driver
class TimerService:
    """Runs on the master: delivers due timers (``start`` / ``stop``) and recalls them."""

    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._lock = asyncio.Lock()
        """Serialises ``Firing`` ops and recalls (module docstring)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._in_flight: set[int] = set()
        """Timers whose delivery write this master has handed to the ledger, until the
        dispatcher has ended them (a write is acknowledged before it is dispatched: a round
        in between must not write it again)."""
        self._retry_at: dict[int, int] = {}
        self._dropping: set[int] = set()
        """Timers that can never be delivered whose end (``Fired``) is being committed."""
        self._dropped: set[int] = set()
        """Timers this master has dropped (``_drop``) since it became master: each is logged
        and counted once, even when its end must be written again."""
        self.delivered = 0
        """Deliveries written by this replica while master (for tests and metrics)."""

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        if self._task is None or self._task.done():
            self._in_flight.clear()
            self._retry_at.clear()
            self._dropped.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    @property
    def running(self) -> bool:
        """Whether the driver runs (on the master, once promoted)."""
        return self._task is not None and not self._task.done()

    def wake(self) -> None:
        """A new timer was scheduled (dispatcher arrival in the timer topic): look again."""
        self._wake.set()

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """``ArrivalListener`` (broker.events): an arrival in the timer topic wakes the driver."""
        if topic == TIMER_TOPIC:
            self._wake.set()

    # ------------------------------------------------------------------ recall
    def recall_handle(self, topic: str, due: int, uniq_key: str) -> str:
        return str(RecallHandle(topic, self._state.config.broker_name, due, uniq_key))

    async def recall(self, topic: str, handle_text: str) -> str:
        """Cancel the pending timer message ``handle_text`` names; returns its message id.
        Raises ``InvalidArgumentError`` (a malformed handle, or one of another topic or
        broker), ``NotRecallableError`` (nothing pending: delivered, being delivered, recalled
        already) or ``NotMasterError``."""
        state = self._state
        state.require_master("recall")
        handle = RecallHandle.parse(handle_text)
        if handle.topic != topic:
            raise InvalidArgumentError(
                f"the recall handle is for topic {handle.topic}, not {topic}"
            )
        broker = state.config.broker_name
        if handle.broker_name != broker:
            raise InvalidArgumentError(
                f"the recall handle is for broker {handle.broker_name}; this is {broker}"
            )
        async with self._lock:
            table = state.metadata.timers
            timers = table.timers_of((topic, handle.message_id))
            pending = [t for t in timers if table.is_pending(t)]
            if not pending:
                now = state.now_ms()
                if timers:
                    reason = "it is being delivered now"
                elif handle.due_ms <= now:
                    reason = f"it was due at {handle.due_ms} and has been delivered"
                else:
                    reason = "it was recalled already"
                raise NotRecallableError(
                    f"timer message {handle.message_id} of topic {topic} cannot be recalled: "
                    f"{reason}"
                )
            now = state.now_ms()
            await state.writer.submit(TimerOp(tuple(Recalled(t, now) for t in pending)))
        _log.info("timer message %s of topic %s recalled", handle.message_id, topic)
        return handle.message_id

    # ------------------------------------------------------------------ firing
    async def _run(self) -> None:
        state = self._state
        while True:
            try:
                fired = await self._round()
            except LedgerMQError as exc:  # not stored (a leadership change, most likely)
                _log.warning("timer round failed (%s); trying again", exc)
                fired = False
                await asyncio.sleep(0.2)
            except Exception:  # noqa: BLE001 - the driver outlives a failed round; logged
                _log.exception("timer round failed; trying again")
                fired = False
                await asyncio.sleep(1.0)
            if fired:
                await asyncio.sleep(0)  # let the writes go out; more may be due
                continue
            next_due = state.metadata.timers.wheel.next_due_ms()
            wait_s = _IDLE_S
            if next_due is not None:
                wait_s = min(wait_s, max(0.0, (next_due - state.now_ms()) / 1000))
            if self._retry_at:
                wait_s = min(wait_s, _RETRY_MS / 1000)
            self._wake.clear()
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s)

    async def _round(self) -> bool:
        """Deliver what is firing and not in flight, start the due timers; whether it did."""
        state = self._state
        if not state.is_master:
            return False
        table = state.metadata.timers
        now = state.now_ms()
        did = False
        firing = table.wheel.firing()
        self._in_flight.intersection_update(firing)  # the rest were ended by their delivery
        for timer_id in firing:
            if (
                timer_id in self._in_flight
                or timer_id in self._dropping
                or self._retry_at.get(timer_id, 0) > now
            ):
                continue
            self._retry_at.pop(timer_id, None)
            self._deliver(timer_id, now)
            did = True
        plan = table.wheel.plan_fire(now, FIRE_BATCH)
        if plan:
            async with self._lock:
                # what a recall took meanwhile is refused on apply (the model's rule 3)
                await state.writer.submit(TimerOp(tuple(plan)))
            now = state.now_ms()
            for record in plan:
                if (
                    table.is_firing(record.timer_id)
                    and record.timer_id not in self._in_flight
                    and record.timer_id not in self._dropping
                ):
                    self._deliver(record.timer_id, now)
            did = True
        return did

    def _deliver(self, timer_id: int, now_ms: int) -> None:
        """Write timer ``timer_id``'s message into its real topic (no wait: the dispatcher
        ends the timer when the write is committed)."""
        state = self._state
        try:
            message = _read(state, timer_id)
            topic, queue_id, items = _delivery(message, timer_id, now_ms)
        except (NotFoundError, ValueError, KeyError) as exc:
            self._drop(timer_id, str(exc))
            return
        self._in_flight.add(timer_id)

        def done(outcome: PutResult | ServiceError) -> None:
            if isinstance(outcome, ServiceError):
                self._in_flight.discard(timer_id)
                _log.warning("timer %d not delivered yet: %s", timer_id, outcome)
                self._retry_at[timer_id] = state.now_ms() + _RETRY_MS
                self._wake.set()
            else:
                self.delivered += 1

        try:
            self._writer.submit(
                topic, queue_id, items, done,
                sys_flag=message.sys_flag & ~SysFlag.COMPRESSED,  # decoded inflated
                born_timestamp=message.born_timestamp,
                born_host=message.born_host, reconsume_times=message.reconsume_times,
            )  # fmt: skip
        except (ServiceError, LedgerMQError) as exc:
            self._in_flight.discard(timer_id)
            if is_deterministic(exc):  # refused by validation: never deliverable
                self._drop(timer_id, str(exc))
                return
            self._retry_at[timer_id] = now_ms + _RETRY_MS  # not master any more, most likely
            _log.warning("timer %d not delivered yet: %s", timer_id, exc)

    def _drop(self, timer_id: int, reason: str) -> None:
        """End a timer that can never be delivered (``service.undeliverable``): replicated as
        fired, so no master tries it again."""
        state = self._state
        if timer_id in self._dropping:
            return
        if timer_id not in self._dropped:  # logged and counted once, however often its end fails
            drop_head(state, "timer", f"timer {timer_id}", reason)
            self._dropped.add(timer_id)
        self._dropping.add(timer_id)  # no new attempt while its end is being committed

        async def end() -> None:
            try:
                await state.writer.submit(TimerOp((Fired(timer_id),)))
            finally:
                self._dropping.discard(timer_id)

        state.spawn(end())


def _read(state: BrokerState, offset: int) -> MessageExt:
    try:
        messages = decode_records(state.commitlog.read_record_at(offset))
    except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError) as exc:
        raise NotFoundError(f"no timer message at commit-log offset {offset}: {exc}") from None
    if len(messages) != 1:
        raise NotFoundError(f"no single message at commit-log offset {offset}")
    return messages[0]


def _delivery(
    message: MessageExt, timer_id: int, now_ms: int
) -> tuple[str, int, list[tuple[bytes, int, str]]]:
    """Where the timer message goes and what is written (the module docstring's properties);
    KeyError / ValueError when it lacks its real topic or queue."""
    props = dict(message.properties)
    topic = props.pop(MessageProperty.REAL_TOPIC)
    queue_text = props.pop(MessageProperty.REAL_QID)
    problem = target_problem(topic, queue_text)
    if problem is not None:  # would be refused, or committed and quarantined on every replica
        raise ValueError(problem)
    queue_id = int(queue_text)
    props[MessageProperty.TIMER_ENQUEUE_MS] = str(message.store_timestamp)
    props[MessageProperty.TIMER_DEQUEUE_MS] = str(now_ms)
    props[MessageProperty.TIMER_ID] = str(timer_id)
    return topic, queue_id, [(message.body, message.flag, encode_properties(props))]
