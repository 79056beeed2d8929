"""Transactional messages: half messages, their end (commit or rollback), and the broker's
check-back for those left open -- one meaning for both front doors (issue 16 section 3).

A producer sends a *half* message (property ``TRAN_MSG=true``). ``SendService`` stores it, as
RocketMQ's ``TransactionalMessageBridge`` does, in queue 0 of ``RMQ_SYS_TRANS_HALF_TOPIC`` with
its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` (``as_half``): it is in the replicated
commit log, and no consumer sees it. The producer then runs its local transaction and ends it
(``end``): a commit stores the message again in its real topic and queue through the normal
write path (``MessageWriter``), then records the settlement; a rollback only records it. The
settlements and the check counts are ``txn`` ops of the metadata channel
(``broker.state.transactions``), so every replica has them in log order.

Delivered once, across a failover too: a commit writes the real message *before* it records the
settlement, with the half's queue offset in ``TRAN_PREPARED_QUEUE_OFFSET``. If the master dies
between the two, the new master finds the half message open, and before it delivers it again
(a producer's repeated commit, or the answer to a check-back) it looks the message up in the
key index by its ``UNIQ_KEY``: a copy with that half offset means the commit happened, and it
only records it. A rollback never writes anything, so a rolled-back message is never delivered.

The check-back (``TransactionChecker``, on the master only, every ``transactionCheckInterval``
ms): each half message still open ``transactionTimeOut`` ms after it was stored (or its own
``CHECK_IMMUNITY_TIME_IN_SECONDS``) gets a check-back to a connected producer of its group,
through whatever doors registered a ``CheckBackChannel`` (remoting: CHECK_TRANSACTION_STATE;
gRPC: RecoverOrphanedTransactionCommand over Telemetry); the producer answers by ending it.
After ``transactionCheckMax`` check-backs it is discarded (never delivered) and logged, as
RocketMQ does. The counts are replicated, so a new master goes on counting. A half message
whose real topic or queue no commit could ever store (not a valid topic name, a queue id that
is not a number) is discarded at once, with an ERROR line and a metric
(``service.undeliverable``): no check-back can end it any other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from ledgermq.broker.errors import (
    IllegalMessageError,
    InvalidArgumentError,
    NoSuchTopicError,
    NotFoundError,
)
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.service.access import record_topic
from ledgermq.broker.service.undeliverable import drop_head, target_problem
from ledgermq.broker.state.ops import TxnOp
from ledgermq.broker.state.transactions import (
    CHECK,
    COMMIT,
    DISCARD,
    HALF_TOPIC,
    ROLLBACK,
)
from ledgermq.errors import (
    IndexCompactedError,
    IndexOutOfRangeError,
    LedgerMQError,
    MessageFormatError,
)
from ledgermq.messaging.sending import Resolution
from ledgermq.security.acl import Perm, record_needs
from ledgermq.wire.message import (
    MessageProperty,
    decode_properties,
    decode_records,
    encode_properties,
    find_property,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.message_writer import MessageWriter
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire.message import MessageExt

__all__ = [
    "HALF_TOPIC",
    "CheckBackChannel",
    "EndTransactionRequest",
    "Resolution",
    "TransactionCheck",
    "TransactionChecker",
    "TransactionService",
    "as_half",
    "is_half",
]

_log = logging.getLogger(__name__)

_HALF_QUEUE: Final = 0
_MAX_CHECKS_PER_PASS: Final = 2000
"""Half messages looked at per check pass (the rest wait for the next pass)."""


@dataclass(frozen=True, slots=True)
class EndTransactionRequest:
    """RocketMQ's ``EndTransactionRequestHeader``, read by a door."""

    commit_log_offset: int
    """Where the half message is stored (from the send's offset msgId)."""
    resolution: Resolution
    producer_group: str = ""
    """Checked against the half message's ``PGROUP`` when both are set."""
    queue_offset: int | None = None
    """``tranStateTableOffset``: the half message's offset in the half queue; checked if set."""
    msg_id: str | None = None
    """The message's ``UNIQ_KEY``; checked if set."""
    from_check: bool = False
    """The answer to a check-back (only logged)."""
    topic: str | None = None
    """The message's real topic; checked if set (the ACL granted PUB on it)."""


@dataclass(frozen=True, slots=True)
class TransactionCheck:
    """One check-back to send: the half message as its producer sent it, and where it is."""

    producer_group: str
    message: MessageExt
    """The half message with its real topic and queue id (as RocketMQ sends it back)."""
    commit_log_offset: int
    queue_offset: int
    """Its offset in the half queue (``tranStateTableOffset``)."""
    offset_msg_id: str
    transaction_id: str
    """The message's ``UNIQ_KEY`` (RocketMQ's transaction id), or its offset msgId."""


CheckBackChannel: TypeAlias = "Callable[[TransactionCheck], bool]"
"""A door's way to a producer: sends the check-back to one connected producer of the check's
group (or, gRPC, publishing its topic) and returns whether there was one."""


def is_half(properties: str) -> bool:
    """Whether a message's properties make it a transactional half message (on every send:
    one substring search, no decoding)."""
    value = find_property(properties, MessageProperty.TRAN_MSG)
    return value is not None and value.lower() == "true"


def as_half(
    topic: str, queue_id: int, properties: str, producer_group: str
) -> tuple[str, int, str]:
    """Where a half message is stored and its stored properties: the half queue, with the real
    topic and queue kept in ``REAL_TOPIC`` / ``REAL_QID`` and the producer group in ``PGROUP``.
    Raises ``IllegalMessageError`` for a half message that also asks for a delay (RocketMQ's
    clients refuse the pair; a commit is delivered at once)."""
    props = decode_properties(properties)
    if props.get(MessageProperty.DELAY, "0") not in ("", "0"):
        raise IllegalMessageError("a transactional message cannot be delayed (property DELAY)")
    props[MessageProperty.REAL_TOPIC] = topic
    props[MessageProperty.REAL_QID] = str(queue_id)
    props[MessageProperty.TRAN_MSG] = "true"
    if producer_group and not props.get(MessageProperty.PRODUCER_GROUP):
        props[MessageProperty.PRODUCER_GROUP] = producer_group
    return HALF_TOPIC, _HALF_QUEUE, encode_properties(props)


class TransactionService:
    """``end`` and what the checker needs; one per broker replica."""

    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._locks: dict[int, asyncio.Lock] = {}
        self.channels: list[CheckBackChannel] = []
        """The doors' ways to producers (``CheckBackChannel``), tried in order."""

    # ------------------------------------------------------------------ end
    async def end(self, request: EndTransactionRequest, access: Access) -> str:
        """End the transaction of the half message at ``request.commit_log_offset``; returns
        how it stands now (``"commit"``, ``"rollback"``, ``"discard"``, ``"settled"`` for one
        settled long ago, or ``"unknown"`` when the producer did not decide). Ending it again
        the same way is accepted. Raises ``NotMasterError``, ``NotFoundError`` (no half message
        there), ``InvalidArgumentError`` (the request does not match the half message, or it
        was settled the other way), ``ForbiddenError`` unless ``access`` has PUB on the half
        message's real topic (checked once it is read: a request names it only by offset) or
        the store's refusals."""
        state = self._state
        if request.topic:
            require_topic_name(request.topic)
        if request.producer_group:
            require_group_name(request.producer_group)
        state.require_master("ending a transaction")
        half = self._read_half(request.commit_log_offset)
        access.require(
            record_needs(record_topic(half), Perm.PUB),
            "a transaction may be ended only by a producer with PUB on its message's topic",
        )
        _match(request, half)
        offset = half.queue_offset
        if request.resolution is Resolution.UNKNOWN:
            source = " (check-back)" if request.from_check else ""
            _log.info("transaction of %s (half offset %d) still unknown to its producer%s",
                      half.msg_id, offset, source)  # fmt: skip
            return Resolution.UNKNOWN.value
        async with self._lock(offset):
            return await self._settle(half, request.resolution)

    async def _settle(self, half: MessageExt, resolution: Resolution) -> str:
        """Commit or roll back ``half``; the caller holds its offset's lock."""
        table = self._state.metadata.transactions
        offset = half.queue_offset
        done = table.outcome(offset)
        if done == "settled":
            # settled long enough ago that the table no longer says how: the store does
            done = COMMIT if self._delivered(half) is not None else "rollback or discard"
            if done != COMMIT and resolution is Resolution.ROLLBACK:
                return ROLLBACK
        if done is not None:
            if done == resolution.value:
                return done
            raise InvalidArgumentError(
                f"the transaction of message {half.msg_id} was settled already ({done}); it "
                f"cannot be {'committed' if resolution is Resolution.COMMIT else 'rolled back'}"
            )
        if resolution is Resolution.COMMIT:
            if self._delivered(half) is None:
                await self._deliver(half)
        elif self._delivered(half) is not None:
            # The commit happened (its settlement was lost with a master): it stays committed.
            _log.warning("rollback of %s refused: it was committed and delivered", half.msg_id)
            await self._state.writer.submit(TxnOp(((offset, COMMIT),)))
            raise InvalidArgumentError(
                f"the transaction of message {half.msg_id} was committed already"
            )
        await self._state.writer.submit(TxnOp(((offset, resolution.value),)))
        return resolution.value

    async def _deliver(self, half: MessageExt) -> None:
        """Store the committed message in its real topic and queue (the normal write path)."""
        topic, queue_id, properties = _real_destination(half)
        config = self._state.topics.find(topic)
        if config is None:
            raise NoSuchTopicError(
                f"topic[{topic}] of the transactional message {half.msg_id} no longer exists"
            )
        if not 0 <= queue_id < config.write_queue_nums:
            raise InvalidArgumentError(
                f"queueId[{queue_id}] of the transactional message {half.msg_id} is illegal "
                f"now, topic {topic} has {config.write_queue_nums} write queues"
            )
        properties[MessageProperty.TRAN_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
        await self._writer.put(
            topic,
            queue_id,
            [(half.body, half.flag, encode_properties(properties))],
            sys_flag=half.sys_flag & ~1,  # the body was read inflated
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            reconsume_times=half.reconsume_times,
        )

    # ------------------------------------------------------------------ the check pass
    async def check_pass(self) -> list[TransactionCheck]:
        """One pass of the checker over the open half messages (module docstring); returns the
        check-backs it sent (or tried to: no producer may be connected). Master only."""
        state = self._state
        state.require_master("checking transactions")
        queue = state.queues.find(HALF_TOPIC, _HALF_QUEUE)
        if queue is None:
            return []
        table = state.metadata.transactions
        config = state.config
        now = state.now_ms()
        items: list[tuple[int, str]] = []
        checks: list[TransactionCheck] = []
        held: list[asyncio.Lock] = []
        start = table.progress
        end = min(queue.max_offset, start + _MAX_CHECKS_PER_PASS)
        try:
            for offset in range(start, end):
                if table.outcome(offset) is not None:
                    continue
                lock = self._lock(offset)
                if lock.locked():
                    continue  # being ended right now
                half = self._half_at(offset)
                if half is None or self._never_committable(half, offset):
                    await lock.acquire()
                    held.append(lock)
                    items.append((offset, DISCARD))
                    continue
                if now - half.store_timestamp < _immunity_ms(half, config.transaction_time_out):
                    continue
                if self._delivered(half) is not None:
                    await lock.acquire()  # committed before a failover: record it, once
                    held.append(lock)
                    items.append((offset, COMMIT))
                    continue
                times = table.check_times(offset)
                if times >= config.transaction_check_max:
                    _log.warning(
                        "transactional message %s (topic %s, producer group %s) discarded after "
                        "%d check-backs with no commit or rollback; it is never delivered",
                        half.msg_id, half.properties.get(MessageProperty.REAL_TOPIC),
                        half.properties.get(MessageProperty.PRODUCER_GROUP, ""), times,
                    )  # fmt: skip
                    await lock.acquire()
                    held.append(lock)
                    items.append((offset, DISCARD))
                    continue
                items.append((offset, CHECK))
                checks.append(_check_of(half))
            if items:
                await state.writer.submit(TxnOp(tuple(items)))
        finally:
            for lock in held:
                lock.release()
        for check in checks:
            self._send_check(check)
        return checks

    def _send_check(self, check: TransactionCheck) -> None:
        for channel in self.channels:
            try:
                if channel(check):
                    return
            except Exception:  # noqa: BLE001 - one door's failure must not stop the checker
                _log.exception("a check-back channel failed")
        _log.info("no producer of group %r (topic %s) connected to check transaction %s",
                  check.producer_group, check.message.topic, check.transaction_id)  # fmt: skip

    def open_count(self) -> int:
        """Half messages not settled (admin and tests)."""
        queue = self._state.queues.find(HALF_TOPIC, _HALF_QUEUE)
        if queue is None:
            return 0
        table = self._state.metadata.transactions
        return sum(1 for o in range(table.progress, queue.max_offset) if table.outcome(o) is None)

    # ------------------------------------------------------------------ helpers
    def _lock(self, offset: int) -> asyncio.Lock:
        lock = self._locks.get(offset)
        if lock is None:
            if len(self._locks) > 4096:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            lock = self._locks[offset] = asyncio.Lock()
        return lock

    def _read_half(self, commit_log_offset: int) -> MessageExt:
        state = self._state
        try:
            messages = decode_records(state.commitlog.read_record_at(commit_log_offset))
        except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError) as exc:
            raise NotFoundError(
                f"no half message at commit-log offset {commit_log_offset}: {exc}"
            ) from None
        if len(messages) != 1 or messages[0].topic != HALF_TOPIC:
            raise NotFoundError(
                f"the message at commit-log offset {commit_log_offset} is not a half message"
            )
        return messages[0]

    def _never_committable(self, half: MessageExt | None, offset: int) -> bool:
        """Whether the half message at ``offset`` is to be discarded without a check-back: it
        is gone from the store, or no commit could ever store it (``service.undeliverable``:
        its real topic or queue cannot hold a record)."""
        if half is None:
            _log.warning("half message %d of %s is gone from the store; discarded",
                         offset, HALF_TOPIC)  # fmt: skip
            return True
        problem = target_problem(
            half.properties.get(MessageProperty.REAL_TOPIC),
            half.properties.get(MessageProperty.REAL_QID),
        )
        if problem is None:
            return False
        drop_head(self._state, "transaction", f"half message {half.msg_id}", problem)
        return True

    def _half_at(self, offset: int) -> MessageExt | None:
        queue = self._state.queues.find(HALF_TOPIC, _HALF_QUEUE)
        unit = queue.get(offset) if queue is not None else None
        if unit is None or unit.is_blank:
            return None
        try:
            return self._read_half(unit.phy_offset)
        except NotFoundError:
            return None

    def _delivered(self, half: MessageExt) -> int | None:
        """The commit-log offset of the committed copy of ``half``, None if there is none."""
        uniq = half.properties.get(MessageProperty.UNIQ_KEY)
        topic = half.properties.get(MessageProperty.REAL_TOPIC)
        if not uniq or not topic:
            return None
        state = self._state
        marker = str(half.queue_offset)
        for offset in state.keys.query(topic, uniq, 16):
            with contextlib.suppress(
                IndexOutOfRangeError, IndexCompactedError, MessageFormatError, ValueError
            ):
                (message,) = decode_records(state.commitlog.read_record_at(offset))
                properties = message.properties
                if (
                    message.topic == topic
                    and properties.get(MessageProperty.UNIQ_KEY) == uniq
                    and properties.get(MessageProperty.TRAN_PREPARED_QUEUE_OFFSET) == marker
                ):
                    return offset
        return None


class TransactionChecker:
    """Runs ``TransactionService.check_pass`` every ``transactionCheckInterval`` ms on the
    master; ``start`` on becoming master, ``stop`` on losing it."""

    def __init__(self, state: BrokerState, service: TransactionService) -> None:
        self._state = state
        self._service = service
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        interval_s = self._state.config.transaction_check_interval / 1000
        while True:
            await asyncio.sleep(interval_s)
            if not self._state.is_master:
                continue
            try:
                await self._service.check_pass()
            except LedgerMQError as exc:
                _log.warning("transaction check pass failed: %s", exc)
            except Exception:  # noqa: BLE001 - the checker must go on; the next pass retries
                _log.exception("transaction check pass failed")


def _real_destination(half: MessageExt) -> tuple[str, int, dict[str, str]]:
    """The half message's real topic and queue, and the properties its committed copy gets
    (RocketMQ's ``endMessageTransaction``: the half's own markers removed)."""
    properties = dict(half.properties)
    topic = properties.pop(MessageProperty.REAL_TOPIC, "")
    queue_text = properties.pop(MessageProperty.REAL_QID, "")
    for key in (
        MessageProperty.TRAN_MSG,
        MessageProperty.TRANSACTION_CHECK_TIMES,
        MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS,
    ):
        properties.pop(key, None)
    if not topic or not queue_text.isdigit():
        raise NotFoundError(f"half message {half.msg_id} lacks its real topic or queue")
    return topic, int(queue_text), properties


def _match(request: EndTransactionRequest, half: MessageExt) -> None:
    """RocketMQ's ``checkPrepareMessage``: the request must name this half message. A refusal
    names what the request said, never what the half message holds (its topic, group and id
    may be another tenant's: the caller may be probing with a guessed offset)."""
    group = half.properties.get(MessageProperty.PRODUCER_GROUP, "")
    if request.producer_group and group and request.producer_group != group:
        raise InvalidArgumentError(
            f"the producer group {request.producer_group!r} is not the half message's"
        )
    if request.queue_offset is not None and request.queue_offset != half.queue_offset:
        raise InvalidArgumentError(
            f"tranStateTableOffset {request.queue_offset} is not the half message's "
            f"({half.queue_offset})"
        )
    real_topic = half.properties.get(MessageProperty.REAL_TOPIC)
    if request.topic and request.topic != real_topic:
        raise InvalidArgumentError(f"topic {request.topic!r} is not the half message's")
    uniq = half.properties.get(MessageProperty.UNIQ_KEY)
    if request.msg_id and uniq and request.msg_id not in (uniq, half.offset_msg_id):
        raise InvalidArgumentError(f"msgId {request.msg_id!r} is not the half message's")


def _immunity_ms(half: MessageExt, default_ms: int) -> int:
    text = half.properties.get(MessageProperty.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
    try:
        return max(int(text) * 1000, default_ms) if text else default_ms
    except ValueError:
        return default_ms


def _check_of(half: MessageExt) -> TransactionCheck:
    properties = dict(half.properties)
    topic = properties.get(MessageProperty.REAL_TOPIC, half.topic)
    queue_text = properties.get(MessageProperty.REAL_QID, "0")
    queue_id = int(queue_text) if queue_text.isdigit() else 0
    message = half._replace(topic=topic, queue_id=queue_id)
    return TransactionCheck(
        producer_group=properties.get(MessageProperty.PRODUCER_GROUP, ""),
        message=message,
        commit_log_offset=half.commit_log_offset,
        queue_offset=half.queue_offset,
        offset_msg_id=half.offset_msg_id,
        transaction_id=properties.get(MessageProperty.UNIQ_KEY) or half.offset_msg_id,
    )
