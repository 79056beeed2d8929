"""Redelivery: a consumer's send-back and the delay-level scheduler.

A push consumer that fails a message sends it back (remoting: CONSUMER_SEND_MSG_BACK (36),
``broker.remoting.send_back``; RocketMQ ``SendMessageProcessor.consumerSendMsgBack``): the broker
stores a copy in the group's retry topic ``%RETRY%<group>`` with ``reconsumeTimes + 1``, delayed by
level ``3 + reconsumeTimes`` (10 s, 30 s, 1 min, ...) unless the consumer asked for a level; after
``maxReconsumeTimes`` (16) the copy goes to the dead-letter topic ``%DLQ%<group>`` instead, where it
stays for an operator.

Delayed messages wait in ``SCHEDULE_TOPIC_XXXX``, one queue per level, in arrival order, so each
queue is due in order. The master's scheduler walks each level's queue, and when a message's
time has come stores it again in its real topic and queue (``ScheduleMessageService``). A head
that can never be stored (its real topic is not a valid topic, its queue id not a number) is
dropped with an ERROR line and a metric (``service.undeliverable``), never retried for ever:
that would stop its level for every group, on every master. Its progress per level is a
metadata change through the ledger, so a new master goes on where the old one stopped (a
message delivered just before a failover may be delivered twice, never lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import InvalidArgumentError, NotFoundError
from ledgermq.broker.names import require_group_name
from ledgermq.broker.service.access import record_topic
from ledgermq.broker.service.undeliverable import drop_head, is_deterministic, target_problem
from ledgermq.broker.state.ops import DelayOffsetsOp
from ledgermq.broker.state.topics import SCHEDULE_TOPIC
from ledgermq.errors import (
    IndexCompactedError,
    IndexOutOfRangeError,
    LedgerMQError,
    MessageFormatError,
)
from ledgermq.security.acl import Perm, record_needs
from ledgermq.wire.message import MessageProperty, decode_records, encode_properties

if TYPE_CHECKING:
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.message_writer import MessageWriter
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire.message import MessageExt

__all__ = ["DelayScheduler", "SendBackService"]

_log = logging.getLogger(__name__)

_IDLE_POLL_S: Final = 0.1
_PROGRESS_EVERY_S: Final = 0.2


def _read_message(state: BrokerState, offset: int) -> MessageExt:
    """The stored message at physical ``offset`` (any size up to the record's own)."""
    try:
        messages = decode_records(state.commitlog.read_record_at(offset))
    except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError) as exc:
        raise NotFoundError(f"no message at commit-log offset {offset}: {exc}") from None
    if len(messages) != 1:
        raise NotFoundError(f"no single message at commit-log offset {offset}")
    return messages[0]


class SendBackService:
    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._rng = random.Random()  # noqa: S311 - spreads retries over retry queues

    async def send_back(
        self,
        offset: int,
        group: str,
        delay_level: int = 0,
        max_reconsume_times: int | None = None,
        *,
        access: Access,
    ) -> None:
        """Store the message at commit-log ``offset`` again for ``group``: in its retry topic,
        delayed by ``delay_level`` (0: by its attempts so far), or in its dead-letter topic after
        ``max_reconsume_times`` attempts (None: the group's ``retryMaxTimes``) or for a negative
        level. Returns once stored; raises ``NotMasterError``, ``NotFoundError`` (no message at
        the offset), ``ForbiddenError`` unless ``access`` has SUB on the message's topic
        (``record_topic``: a group may copy only what it may consume into its own retry and
        dead-letter topics) or the store's refusals."""
        state = self._state
        require_group_name(group)  # its %RETRY% / %DLQ% topic must be storable (issue 25)
        state.require_master("send-back")
        message = _read_message(state, offset)
        access.require(
            record_needs(record_topic(message), Perm.SUB),
            "a message may be sent back only by a consumer with SUB on its topic",
        )
        group_config = await state.topics.ensure_group(group)
        max_times = (
            group_config.retry_max_times if max_reconsume_times is None else max_reconsume_times
        )
        properties = dict(message.properties)
        properties.setdefault(MessageProperty.RETRY_TOPIC, message.topic)
        properties.setdefault(MessageProperty.ORIGIN_MESSAGE_ID, message.msg_id)
        properties.pop(MessageProperty.DELAY, None)
        properties.pop(MessageProperty.REAL_TOPIC, None)
        properties.pop(MessageProperty.REAL_QID, None)
        times = message.reconsume_times
        if times >= max_times or delay_level < 0:
            topic_config = await state.topics.ensure_dlq_topic(group)
            topic, queue_id = topic_config.topic_name, 0
            _log.info("message %s of group %s goes to %s after %d attempts",
                      message.msg_id, group, topic, times + 1)  # fmt: skip
        else:
            retry = await state.topics.ensure_retry_topic(group)
            level = delay_level or 3 + times
            level = min(level, len(state.config.delay_levels_ms))
            properties[MessageProperty.REAL_TOPIC] = retry.topic_name
            properties[MessageProperty.REAL_QID] = str(self._rng.randrange(retry.write_queue_nums))
            properties[MessageProperty.DELAY] = str(level)
            topic, queue_id = SCHEDULE_TOPIC, level - 1
        await self._writer.put(
            topic,
            queue_id,
            [(message.body, message.flag, encode_properties(properties))],
            sys_flag=message.sys_flag & ~1,  # stored inflated
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            reconsume_times=times + 1,
        )


class DelayScheduler:
    """Runs on the master only: brings delayed messages to their real topic when due."""

    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._tasks: list[asyncio.Task[None]] = []
        self._progress: dict[int, int] = {}
        self._saved: dict[int, int] = {}
        self._wake: dict[int, asyncio.Event] = {}

    def start(self) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        levels = len(self._state.config.delay_levels_ms)
        offsets = self._state.metadata.delay_offsets
        self._progress = {level: offsets.get(level, 0) for level in range(1, levels + 1)}
        self._saved = dict(self._progress)
        self._wake = {level: asyncio.Event() for level in self._progress}
        self._tasks = [loop.create_task(self._run_level(level)) for level in self._progress]
        self._tasks.append(loop.create_task(self._save_progress()))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """``ArrivalListener`` (broker.events): an arrival in a delay level's queue wakes it."""
        if topic == SCHEDULE_TOPIC:
            event = self._wake.get(queue_id + 1)
            if event is not None:
                event.set()

    async def _run_level(self, level: int) -> None:
        state = self._state
        delay_ms = state.config.delay_levels_ms[level - 1]
        while True:
            queue = state.queues.find(SCHEDULE_TOPIC, level - 1)
            offset = self._progress[level]
            unit = queue.get(offset) if queue is not None and offset < queue.max_offset else None
            if queue is not None and offset < queue.min_offset:
                self._progress[level] = queue.min_offset
                continue
            if unit is None:
                await self._sleep(level, _IDLE_POLL_S)
                continue
            phy, _size, _tags = unit
            try:
                message = _read_message(state, phy)
            except NotFoundError as exc:
                _log.error("delay level %d offset %d unreadable (%s); skipped", level, offset, exc)
                self._progress[level] = offset + 1
                continue
            due = message.store_timestamp + delay_ms
            now = state.now_ms()
            if due > now:
                await self._sleep(level, min((due - now) / 1000, 1.0))
                continue
            try:
                await self._deliver(message)
            except Exception as exc:  # noqa: BLE001 - sorted below: drop, or retry
                if is_deterministic(exc):  # never deliverable: skip it, not the level
                    drop_head(state, "delay", self._what(message, level, offset), str(exc))
                else:  # not master, no quorum, a bug: retry, never end the level's task
                    _log.warning("delayed message %s not delivered yet: %s", message.msg_id, exc,
                                 exc_info=not isinstance(exc, LedgerMQError))  # fmt: skip
                    await asyncio.sleep(1.0)
                    continue
            self._progress[level] = offset + 1

    @staticmethod
    def _what(message: MessageExt, level: int, offset: int) -> str:
        return f"delayed message {message.msg_id} (level {level}, offset {offset})"

    async def _sleep(self, level: int, seconds: float) -> None:
        event = self._wake[level]
        event.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    async def _deliver(self, message: MessageExt) -> None:
        properties = dict(message.properties)
        topic = properties.pop(MessageProperty.REAL_TOPIC, None)
        queue_text = properties.pop(MessageProperty.REAL_QID, None)
        properties.pop(MessageProperty.DELAY, None)
        problem = target_problem(topic, queue_text)
        if problem is not None:
            raise InvalidArgumentError(problem)
        assert topic is not None
        assert queue_text is not None
        await self._writer.put(
            topic,
            int(queue_text),
            [(message.body, message.flag, encode_properties(properties))],
            sys_flag=message.sys_flag & ~1,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            reconsume_times=message.reconsume_times,
        )

    async def _save_progress(self) -> None:
        while True:
            await asyncio.sleep(_PROGRESS_EVERY_S)
            changed = {k: v for k, v in self._progress.items() if self._saved.get(k) != v}
            if not changed:
                continue
            try:
                await self._state.writer.submit(DelayOffsetsOp(changed))
                self._saved.update(changed)
            except LedgerMQError as exc:
                _log.debug("delay progress not saved yet: %s", exc)
