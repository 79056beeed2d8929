"""POP consumption: receive (messages made invisible for a time), ack, change-invisible, forward
to the dead letters -- one meaning for both front doors (issue 16 section 2).

The decisions are ``ledgermq.broker.pop.PopQueue``'s (``plan_*``); this module reads the messages,
filters them as a pull would, and commits the model's records through the ledger's metadata
channel (``broker.state.pop_table``), answering only once they are committed and applied. So the
POP state is the same on every replica, and a new master after a failover goes on from what the
old one committed: an acknowledged message is never handed out again, an unacknowledged one comes
back after its invisible time with ``attempt + 1``. The at-least-once contract: a message is
delivered again if its ack was not committed (a reply lost, a master killed before the ack's
entry committed), never lost.

Only the master serves POP (its applied state includes every committed record; a slave's may
lag): a slave answers ``NotMasterError`` like any write. One asyncio lock per queue serialises
plan, commit and apply on the master, so a plan never meets a state that moved on under it and
the outcomes the model gives on apply are the ones ``check`` foresaw.

Filtering: a message the receive's filter (TAG, or SQL92 as a pull's) does not want is delivered
and acknowledged in the same op: it is done for the group, as a pull moves past it. A message
the store no longer has (retention) is settled likewise. The max attempts are the subscription
group's ``retryMaxTimes``; both travel in every op, so a changed group setting holds from the
next receive on.

FIFO (issue 16 section 3): a consumer group with ``consumeMessageOrderly`` is a FIFO group. Its
messages are ordered by message group (``__SHARDINGKEY``, a v5 ``message_group``): a receive
hands out a group's oldest messages not done, in order, and nothing more of the group while any
of them is out and invisible; an unacknowledged one comes back (attempt + 1) first of its group,
before anything after it, until the maximum attempts send it to the dead letters and the group
moves on (``PopQueue`` rule 5). Messages without a group (a remoting producer's
orderly selector, which sets no property) are ordered by their queue, as RocketMQ's orderly
consumption orders a queue: they form one group per queue (``QUEUE_ORDER``).

Receipt handles are strings in the layout of RocketMQ 5's ``ExtraInfoUtil`` (``POP_CK``):
``"<seq> <popTime> <invisibleTime> 0 0 <brokerName> <queueId> <queueOffset>"``, where the first
field, RocketMQ's checkpoint offset, is the model's handle number: a handle names one delivery,
and is stale once its message is delivered again or re-armed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import (
    ForbiddenError,
    InvalidArgumentError,
    InvalidHandleError,
    NoSuchTopicError,
    NotStoredError,
    ServiceError,
)
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.pop import (
    Acked,
    DeadLettered,
    Delivered,
    Outcome,
    PopQueue,
    PopSettings,
    ReceiptHandle,
)
from ledgermq.broker.service.undeliverable import drop_head, is_deterministic, target_problem
from ledgermq.broker.state.ops import PopOp
from ledgermq.broker.state.topics import dlq_topic
from ledgermq.broker.storage.filter.subscription import is_tag_type, resolve
from ledgermq.errors import (
    IndexCompactedError,
    IndexOutOfRangeError,
    LedgerMQError,
    MessageFormatError,
)
from ledgermq.messaging import consuming
from ledgermq.wire.message import (
    MessageProperty,
    decode_records,
    encode_properties,
    parse_subscription,
    tags_match,
)
from ledgermq.wire.route import is_readable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.broker.pop import PopRecord
    from ledgermq.broker.service.message_writer import MessageWriter
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.broker.state.pop_table import PopKey
    from ledgermq.broker.storage.filter import Sql92Selector
    from ledgermq.messaging.consuming import Receive
    from ledgermq.wire.message import MessageExt

__all__ = ["PopHandle", "PopResult", "PopService", "PoppedMessage"]

MAX_POP_MESSAGES: Final = 32
"""Most messages one receive hands out (RocketMQ's proxy allows 32 per ReceiveMessage)."""
MAX_POLL_MS: Final = 30_000
MAX_INVISIBLE_MS: Final = 12 * 3600 * 1000
"""RocketMQ 5's ceiling on ``invisibleTime`` (12 hours)."""
_PLAN_ROUNDS: Final = 8
"""Plans per queue and receive when filters drop messages (each round settles what it drops)."""
QUEUE_ORDER: Final = ""
"""The message group the FIFO planning gives a message without one: all of a queue's ungrouped
messages are one group, so a FIFO consumer group takes them in queue order. An empty message
group is no group on either door, so no message of a real group has this one."""
_GROUP_CACHE: Final = 100_000
"""Message groups remembered by (topic, queue, offset); a FIFO receive asks for the group of
every message it walks past, and a message's group never changes."""
_POLL_STEP_S: Final = 0.2
"""Long polling looks again at least this often: expired deliveries come back on no event."""


@dataclass(frozen=True, slots=True)
class PopHandle:
    """A receipt handle's fields; ``str`` is its wire form (module docstring)."""

    seq: int
    pop_time_ms: int
    invisible_ms: int
    broker_name: str
    queue_id: int
    offset: int

    def __str__(self) -> str:
        return (
            f"{self.seq} {self.pop_time_ms} {self.invisible_ms} 0 0 {self.broker_name} "
            f"{self.queue_id} {self.offset}"
        )

    @classmethod
    def parse(cls, text: str) -> PopHandle:
        """The handle ``str`` made; ``InvalidHandleError`` for anything else."""
        fields = text.split(" ")
        numbers = fields[:5] + fields[6:]
        if len(fields) != 8 or not all(f.isdigit() for f in numbers) or not fields[5]:
            raise InvalidHandleError(f"not a receipt handle of this broker: {text!r:.120}")
        seq, pop_time, invisible, _, _, queue_id, offset = (int(f) for f in numbers)
        return cls(seq, pop_time, invisible, fields[5], queue_id, offset)


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    message: MessageExt
    handle: PopHandle
    attempt: int
    """1 for the first delivery (gRPC ``delivery_attempt``; remoting reconsume times + 1)."""


@dataclass(frozen=True, slots=True)
class PopResult:
    messages: list[PoppedMessage]
    pop_time_ms: int
    invisible_ms: int


class PopService:
    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._locks: dict[PopKey, asyncio.Lock] = {}
        self._arrivals: dict[str, asyncio.Event] = {}
        self._next_queue = itertools.count()
        self._groups: dict[tuple[str, int, int], str] = {}

    # ------------------------------------------------------------------ long polling
    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """``ArrivalListener`` (broker.events): wake receives waiting on ``topic``."""
        event = self._arrivals.pop(topic, None)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        """On a role change or shutdown: let every waiting receive look again now."""
        events, self._arrivals = self._arrivals, {}
        for event in events.values():
            event.set()

    # ------------------------------------------------------------------ receive
    async def deliver(
        self, request: Receive, delivered: Callable[[PoppedMessage], None] | None = None
    ) -> consuming.Delivered:
        """A receive in the messaging contract's terms (the gRPC door's ReceiveMessage): any
        of the topic's queues, the deliveries with their handles, FOUND or NOT_FOUND.
        ``delivered``: told of each delivery (the broker's message trace). Raises as
        ``receive``."""
        result = await self.receive(request)
        if delivered is not None:
            for popped in result.messages:
                delivered(popped)
        messages = [
            consuming.Delivery(p.message, str(p.handle), p.attempt, p.handle.invisible_ms)
            for p in result.messages
        ]
        found = consuming.PullOutcome.FOUND if messages else consuming.PullOutcome.NOT_FOUND
        return consuming.Delivered(found, messages, pop_time_ms=result.pop_time_ms)

    async def receive(self, request: Receive) -> PopResult:
        """Hand out up to ``request.max_messages`` messages (none when nothing is due within
        ``poll_ms``). Raises ``NotMasterError``, ``NoSuchTopicError``, ``ForbiddenError``,
        ``InvalidArgumentError`` or the filter's refusals."""
        state = self._state
        require_group_name(request.group)
        require_topic_name(request.topic)
        state.require_master("POP (receive)")
        if not 1 <= request.max_messages <= MAX_POP_MESSAGES:
            raise InvalidArgumentError(
                f"maxMsgNums must be 1..{MAX_POP_MESSAGES}, got {request.max_messages}"
            )
        invisible_ms = _invisible(request.invisible_ms)
        queue_ids = self._queue_ids(request)
        group_config = state.topics.group(request.group)
        if not group_config.consume_enable:
            raise ForbiddenError(f"subscription group [{request.group}] may not consume")
        expression, expression_type = request.expression, request.expression_type
        wanted = resolve(
            expression, expression_type, property_filter=state.config.enable_property_filter
        )
        tags = parse_subscription(expression)[0] if is_tag_type(expression_type) else None
        if request.group not in state.metadata.groups:
            await state.topics.ensure_group(request.group)
        settings = PopSettings(
            fifo=group_config.consume_message_orderly or request.order,
            max_attempts=max(1, group_config.retry_max_times),
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(request.poll_ms, 0), MAX_POLL_MS) / 1000
        while True:
            now = state.now_ms()
            popped: list[PoppedMessage] = []
            for queue_id in queue_ids:
                want = request.max_messages - len(popped)
                if want <= 0:
                    break
                key = (request.group, request.topic, queue_id)
                async with self._lock(key):
                    popped += await self._receive_queue(
                        key, settings, want, invisible_ms, now, tags, wanted.sql
                    )
            left = deadline - loop.time()
            if popped or left <= 0:
                state.stats.record_get(request.topic, len(popped))
                return PopResult(popped, now, invisible_ms)
            event = self._arrivals.setdefault(request.topic, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, _POLL_STEP_S))
            state.require_master("POP (receive)")

    def _queue_ids(self, request: Receive) -> list[int]:
        state = self._state
        if not is_readable(state.config.broker_permission):
            raise ForbiddenError(f"the broker[{state.config.broker_name}] may not be read now")
        config = state.topics.find(request.topic)
        if config is None:
            raise NoSuchTopicError(f"topic[{request.topic}] not exist, apply first please!")
        if not is_readable(config.perm):
            raise ForbiddenError(f"the topic[{request.topic}] may not be read")
        count = config.read_queue_nums
        if request.queue_id is not None and request.queue_id >= 0:
            if request.queue_id >= count:
                raise InvalidArgumentError(
                    f"queueId[{request.queue_id}] is illegal, topic:[{request.topic}] "
                    f"readQueueNums:[{count}]"
                )
            return [request.queue_id]
        start = next(self._next_queue) % max(count, 1)
        return [(start + i) % count for i in range(count)]

    async def _receive_queue(
        self,
        key: PopKey,
        settings: PopSettings,
        want: int,
        invisible_ms: int,
        now: int,
        tags: frozenset[str] | None,
        sql: Sql92Selector | None,
    ) -> list[PoppedMessage]:
        """One queue's part of a receive; the caller holds the queue's lock."""
        state = self._state
        group, topic, queue_id = key
        cq = state.queues.find(topic, queue_id)
        if cq is None or cq.max_offset == 0:
            return []
        popped: list[PoppedMessage] = []
        model = state.metadata.pop.find(key)
        if model is not None and model.settings != settings:
            # The group's settings changed: every replica takes them first (an op of no
            # records), so that this plan, and the apply that checks it, use them.
            await state.writer.submit(PopOp(key, settings, ()))
        for _ in range(_PLAN_ROUNDS):
            model = state.metadata.pop.find(key) or PopQueue(settings)
            # Offsets retention removed are done for everybody: settle them with the rest.
            records = model.plan_receive(
                now_ms=now,
                end_offset=cq.max_offset,
                max_messages=want - len(popped),
                invisible_ms=invisible_ms,
                group_of=lambda offset: self._message_group(topic, queue_id, offset),
            )
            if not records:
                break
            committed: list[PopRecord] = []
            handed: list[tuple[Delivered, MessageExt]] = []
            filtered = False
            for record in records:
                message = self._message(topic, queue_id, record.offset)
                if isinstance(record, DeadLettered):
                    if message is not None:
                        await self._revive_to_dead_letters(group, message, record.offset)
                    committed.append(record)
                    continue
                assert isinstance(record, Delivered)
                committed.append(record)
                if message is None or not _wanted(message, tags, sql):
                    committed.append(Acked(record.offset, record.seq))
                    filtered = True
                else:
                    handed.append((record, message))
            await self._commit(key, settings, committed)
            applied = state.metadata.pop.find(key)
            for record, message in handed:
                flight = applied.delivery(record.offset) if applied is not None else None
                if flight is None or flight.seq != record.seq:
                    continue  # refused on apply (cannot happen under the lock; never hand out)
                handle = PopHandle(
                    record.seq, now, invisible_ms, state.config.broker_name, queue_id,
                    record.offset,
                )  # fmt: skip
                popped.append(PoppedMessage(message, handle, record.attempt))
            if not filtered or len(popped) >= want:
                break
        return popped

    # ------------------------------------------------------------------ ack and friends
    async def ack(self, group: str, topic: str, handle_text: str) -> None:
        """Settle the message ``handle_text`` names. A handle of a message already settled is
        accepted (a retried ack); a stale or malformed one raises ``InvalidHandleError``."""
        handle, key = self._handle(group, topic, handle_text)
        async with self._lock(key):
            outcome = self._check(key, handle)
            if outcome is Outcome.ALREADY_DONE:
                return
            queue = self._queue(key)
            await self._commit(key, queue.settings, [queue.plan_ack(_model(handle))])
            if not self._queue(key).is_done(handle.offset):
                raise NotStoredError(f"the ack of {handle_text!r} did not take effect")

    async def ack_many(
        self, group: str, topic: str, handle_texts: Sequence[str]
    ) -> list[ServiceError | None]:
        """``ack`` each of ``handle_texts``, with one replicated op per queue instead of one
        per message: a client acknowledging a received batch (gRPC AckMessage's entries) pays
        one commit per queue. Per handle, in order: None when its message is settled (now or
        before), else the error ``ack`` would have raised for it alone."""
        results: list[ServiceError | None] = [None] * len(handle_texts)
        by_queue: dict[PopKey, list[tuple[int, PopHandle]]] = {}
        for index, text in enumerate(handle_texts):
            try:
                handle, key = self._handle(group, topic, text)
            except ServiceError as exc:
                results[index] = exc
            else:
                by_queue.setdefault(key, []).append((index, handle))
        for key, entries in by_queue.items():
            async with self._lock(key):
                to_settle: list[tuple[int, PopHandle]] = []
                for index, handle in entries:
                    try:
                        if self._check(key, handle) is not Outcome.ALREADY_DONE:
                            to_settle.append((index, handle))
                    except ServiceError as exc:
                        results[index] = exc
                if not to_settle:
                    continue
                queue = self._queue(key)
                records: list[PopRecord] = [queue.plan_ack(_model(h)) for _, h in to_settle]
                await self._commit(key, queue.settings, records)
                settled = self._queue(key)
                for index, handle in to_settle:
                    if not settled.is_done(handle.offset):
                        results[index] = NotStoredError(
                            f"the ack of {handle_texts[index]!r} did not take effect"
                        )
        return results

    async def change_invisible(
        self, group: str, topic: str, handle_text: str, invisible_ms: int
    ) -> PopHandle:
        """Re-arm the delivery ``handle_text`` names for ``invisible_ms`` from now; returns the
        new handle (the old one is stale from here on). ``InvalidHandleError`` for a handle
        that is stale, malformed or of a settled message."""
        invisible_ms = _invisible(invisible_ms)
        handle, key = self._handle(group, topic, handle_text)
        async with self._lock(key):
            if self._check(key, handle) is Outcome.ALREADY_DONE:
                raise InvalidHandleError(f"the message of {handle_text!r} is acknowledged already")
            queue = self._queue(key)
            now = self._state.now_ms()
            record = queue.plan_change_invisible(
                _model(handle), now_ms=now, invisible_ms=invisible_ms
            )
            await self._commit(key, queue.settings, [record])
            flight = self._queue(key).delivery(handle.offset)
            if flight is None or flight.seq != record.new_seq:
                raise NotStoredError(f"the change of {handle_text!r} did not take effect")
            return PopHandle(
                record.new_seq, now, invisible_ms, handle.broker_name, handle.queue_id,
                handle.offset,
            )  # fmt: skip

    async def forward_to_dead_letters(self, group: str, topic: str, handle_text: str) -> None:
        """Store the message ``handle_text`` names in ``%DLQ%<group>`` and settle it."""
        handle, key = self._handle(group, topic, handle_text)
        async with self._lock(key):
            if self._check(key, handle) is Outcome.ALREADY_DONE:
                return
            message = self._message(topic, handle.queue_id, handle.offset)
            if message is not None:
                await self._to_dead_letters(group, message)
            queue = self._queue(key)
            record = queue.plan_forward_to_dead_letter(_model(handle), now_ms=self._state.now_ms())
            await self._commit(key, queue.settings, [record])

    def in_flight(self, group: str, topic: str, queue_id: int) -> int:
        """Messages handed out and not settled (expired ones included): RocketMQ's
        ``restNum``-like figure for admin and tests."""
        queue = self._state.metadata.pop.find((group, topic, queue_id))
        return 0 if queue is None else len(queue.in_flight())

    # ------------------------------------------------------------------ helpers
    def _lock(self, key: PopKey) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _handle(self, group: str, topic: str, text: str) -> tuple[PopHandle, PopKey]:
        require_group_name(group)
        require_topic_name(topic)
        self._state.require_master("POP (ack / change invisible time)")
        handle = PopHandle.parse(text)
        if handle.broker_name != self._state.config.broker_name:
            raise InvalidHandleError(
                f"the receipt handle is of broker {handle.broker_name}, this is "
                f"{self._state.config.broker_name}"
            )
        if self._state.topics.find(topic) is None:
            raise NoSuchTopicError(f"topic[{topic}] not exist, apply first please!")
        return handle, (group, topic, handle.queue_id)

    def _check(self, key: PopKey, handle: PopHandle) -> Outcome:
        """``APPLIED`` or ``ALREADY_DONE``; ``InvalidHandleError`` otherwise."""
        queue = self._state.metadata.pop.find(key)
        outcome = Outcome.INVALID_HANDLE if queue is None else queue.check(_model(handle))
        if outcome is Outcome.INVALID_HANDLE:
            raise InvalidHandleError(
                f"receipt handle {str(handle)!r} of {key[1]}:{key[2]} for group {key[0]} is not "
                "the message's current delivery (it was handed out again or its invisible time "
                "changed since, or it never was); use the newest handle"
            )
        return outcome

    def _queue(self, key: PopKey) -> PopQueue:
        queue = self._state.metadata.pop.find(key)
        assert queue is not None, "checked before"
        return queue

    async def _commit(self, key: PopKey, settings: PopSettings, records: list[PopRecord]) -> None:
        """Propose ``records`` and return once committed and applied here."""
        if records:
            await self._state.writer.submit(PopOp(key, settings, tuple(records)))

    def _message(self, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        """The message at ``offset`` of the queue, None if the store no longer has it."""
        state = self._state
        cq = state.queues.find(topic, queue_id)
        unit = cq.get(offset) if cq is not None else None
        if unit is None or unit.is_blank:
            return None
        try:
            messages = decode_records(state.commitlog.read_record(unit.phy_offset, unit.size))
        except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError):
            return None
        return messages[0] if len(messages) == 1 else None

    def _message_group(self, topic: str, queue_id: int, offset: int) -> str | None:
        """The FIFO planning's group of a message (``QUEUE_ORDER`` for one without); None when
        the store no longer has it (it is settled on its way out, and blocks nothing)."""
        key = (topic, queue_id, offset)
        group = self._groups.get(key)
        if group is not None:
            return group
        message = self._message(topic, queue_id, offset)
        if message is None:
            return None
        group = message.properties.get(MessageProperty.SHARDING_KEY) or QUEUE_ORDER
        if len(self._groups) >= _GROUP_CACHE:
            self._groups.clear()
        self._groups[key] = group
        return group

    async def _revive_to_dead_letters(self, group: str, message: MessageExt, offset: int) -> None:
        """A message out of attempts goes to the dead letters as a receive passes it; one that
        can never be stored there (the group's ``%DLQ%`` topic is not a valid topic name) is
        dropped with an ERROR line and a metric (``service.undeliverable``), or every receive
        of the group would fail on it for good. Transient failures raise: the receive fails
        and the next one tries again."""
        try:
            await self._to_dead_letters(group, message)
        except (ServiceError, LedgerMQError) as exc:
            if not is_deterministic(exc):
                raise
            what = f"message {message.msg_id} ({message.topic}:{message.queue_id} offset {offset})"
            drop_head(self._state, "revive", what, f"no dead-letter queue for {group}: {exc}")

    async def _to_dead_letters(self, group: str, message: MessageExt) -> None:
        """Store a copy of ``message`` in ``%DLQ%<group>`` through the normal write path;
        ``InvalidArgumentError`` when that topic cannot exist."""
        state = self._state
        problem = target_problem(dlq_topic(group), 0)
        if problem is not None:
            raise InvalidArgumentError(f"group {group!r} can have no dead-letter queue: {problem}")
        dlq = await state.topics.ensure_dlq_topic(group)
        properties = dict(message.properties)
        properties.setdefault(MessageProperty.RETRY_TOPIC, message.topic)
        properties.setdefault(MessageProperty.ORIGIN_MESSAGE_ID, message.msg_id)
        await self._writer.put(
            dlq.topic_name,
            0,
            [(message.body, message.flag, encode_properties(properties))],
            sys_flag=message.sys_flag & ~1,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            reconsume_times=message.reconsume_times,
        )


def _model(handle: PopHandle) -> ReceiptHandle:
    return ReceiptHandle(handle.offset, handle.seq)


def _invisible(invisible_ms: int) -> int:
    if not 0 < invisible_ms <= MAX_INVISIBLE_MS:
        raise InvalidArgumentError(
            f"invisibleTime must be 1..{MAX_INVISIBLE_MS} ms, got {invisible_ms}"
        )
    return invisible_ms


def _wanted(message: MessageExt, tags: frozenset[str] | None, sql: Sql92Selector | None) -> bool:
    """Whether the receive's filter wants ``message`` (exact tags, then the SQL92 selector)."""
    if not tags_match(message.properties.get(MessageProperty.TAGS), tags):
        return False
    return sql is None or sql.matches(message.properties)
