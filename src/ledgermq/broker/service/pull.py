"""Pull: what reading a queue from an offset means, with long polling.

Both doors get the messaging contract's answer, ``Delivered`` (the records as stored, for the
remoting door; decoded by ``deliver`` for the gRPC door). Outcomes as RocketMQ's
PullMessageProcessor (protocol-remoting-and-grpc.md section 2.9; the remoting door,
``broker.remoting.pull``, answers each with its code): messages found -> FOUND (SUCCESS); all
filtered out -> FILTERED (PULL_RETRY_IMMEDIATELY); offset at the end of the queue -> NOT_FOUND
(PULL_NOT_FOUND); before the queue's start or past its end -> OFFSET_MOVED (PULL_OFFSET_MOVED)
with the offset to go on from. A pull that may wait
(``poll_ms``, remoting's SUSPEND flag) and finds nothing is held until a message reaches the queue
or its time passes (long polling), so a consumer gets a new message as soon as it is committed
and dispatched, without polling.

Filtering (RocketMQ's ``ExpressionMessageFilter``): a TAG subscription skips units whose tags
hash code it does not name, read from the ConsumeQueue alone; a SQL92 one (``expressionType``
SQL92, with ``enablePropertyFilter``) reads the candidate records, decodes their properties and
delivers those its selector makes TRUE (broker.storage.filter). Either way a skipped message is
one the subscription does not want, and the pull answers FILTERED past it when nothing
matched. A pull without a subscription (remoting: no SUBSCRIPTION flag and no ``subscription``
field, as Java push consumers send by default) uses what the group's heartbeat registered for
the topic.
Only SQL92 pulls pay for reading properties.

Any replica serves pulls: queues hold only committed messages, so a slave never returns one a
new leader could take back. A slave does not move a consumer's offset forward or backward (its
queues may lag the master's by a few entries); it answers "nothing yet" instead.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import ForbiddenError, InvalidArgumentError, NoSuchTopicError
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.storage.consume_queue import BLANK_SIZE
from ledgermq.broker.storage.filter.subscription import resolve
from ledgermq.errors import IndexCompactedError, IndexOutOfRangeError, MessageFormatError
from ledgermq.messaging.consuming import Delivered, PullOutcome
from ledgermq.wire.message import read_dispatch_info
from ledgermq.wire.route import is_readable

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.broker.storage.filter import Sql92Selector
    from ledgermq.messaging.consuming import PullQuery

__all__ = ["MAX_BYTES_PER_PULL", "PullService"]

MAX_MESSAGES_PER_PULL: Final = 1024
MAX_BYTES_PER_PULL: Final = 4 << 20
MAX_SUSPEND_MS: Final = 30_000


class PullService:
    def __init__(
        self,
        state: BrokerState,
        registered: Callable[[str, str], tuple[str, str] | None] | None = None,
    ) -> None:
        """``registered(group, topic)``: the (expression, expression type) the group's
        members registered for the topic by heartbeat, None if none did."""
        self._state = state
        self._registered = registered
        self._held: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = {}

    # ------------------------------------------------------------------ long polling
    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """``ArrivalListener`` (broker.events): wake pulls held on this queue below
        ``max_offset``."""
        held = self._held.get((topic, queue_id))
        if not held:
            return
        still = []
        for offset, future in held:
            if offset < max_offset:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((offset, future))
        if still:
            self._held[(topic, queue_id)] = still
        else:
            del self._held[(topic, queue_id)]

    def wake_all(self) -> None:
        """On a role change or shutdown: answer every held pull now."""
        for held in self._held.values():
            for _, future in held:
                if not future.done():
                    future.set_result(None)
        self._held.clear()

    async def _hold(self, topic: str, queue_id: int, offset: int, timeout_ms: int) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held.setdefault((topic, queue_id), []).append((offset, future))
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
        finally:
            if not future.done():
                future.cancel()
                held = self._held.get((topic, queue_id))
                if held is not None:
                    held[:] = [h for h in held if h[1] is not future]
                    if not held:
                        del self._held[(topic, queue_id)]

    # ------------------------------------------------------------------ the request
    async def deliver(self, query: PullQuery) -> Delivered:
        """``pull``, with the records decoded into ``Delivery`` values (for a door that reads
        records, not RocketMQ's bytes: the gRPC door's PullMessage)."""
        result = await self.pull(query)
        if result.count:
            result.messages = result.deliveries()
            result.stored = b""
        else:
            result.messages = []
        return result

    async def pull(self, query: PullQuery) -> Delivered:
        """Read ``query``'s queue (its topic and id: its broker group is the door's business)
        from its offset, holding the pull for up to its ``poll_ms`` when nothing is there yet;
        the records as stored (``Delivered.stored``). The one way in of both doors. Raises
        ``ForbiddenError``, ``NoSuchTopicError``, ``InvalidArgumentError`` (queue id) or the
        filter's errors."""
        state = self._state
        group, queue, offset = query.group, query.queue, query.offset
        topic, queue_id = queue.topic, queue.queue_id
        max_nums = max(1, min(query.max_messages, MAX_MESSAGES_PER_PULL))
        max_bytes = query.max_bytes
        max_bytes = (
            MAX_BYTES_PER_PULL if max_bytes is None else max(1, min(max_bytes, MAX_BYTES_PER_PULL))
        )
        suspend_ms = min(max(query.poll_ms, 0), MAX_SUSPEND_MS)
        require_group_name(group)
        require_topic_name(topic)

        if not is_readable(state.config.broker_permission):
            raise ForbiddenError(
                f"the broker[{state.config.broker_name}] pulling message is forbidden"
            )
        topic_config = state.topics.find(topic)
        if topic_config is None:
            raise NoSuchTopicError(f"topic[{topic}] not exist, apply first please!")
        if not is_readable(topic_config.perm):
            raise ForbiddenError(f"the topic[{topic}] pulling message is forbidden")
        if not 0 <= queue_id < topic_config.read_queue_nums:
            raise InvalidArgumentError(
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{topic_config.read_queue_nums}]"
            )
        group_config = state.topics.group(group)
        if not group_config.consume_enable:
            raise ForbiddenError(
                f"subscription group [{group}] does not have permission to consume"
            )
        expression, expression_type = self._subscription(
            group, topic, query.expression, query.expression_type
        )
        # Before the offset commit below: a refused subscription moves nothing.
        wanted = resolve(
            expression, expression_type, property_filter=state.config.enable_property_filter
        )
        tag_codes, sql = wanted.tag_codes, wanted.sql
        if state.is_master and group not in state.metadata.groups:
            state.spawn(state.topics.ensure_group(group))
        commit_offset = query.commit_offset
        if commit_offset is not None and commit_offset >= 0 and state.is_master:
            state.writer.stage_offset(group, topic, queue_id, commit_offset)

        result = self.read(topic, queue_id, offset, max_nums, max_bytes, tag_codes, sql)
        if result.outcome is PullOutcome.NOT_FOUND and suspend_ms > 0:
            wait_ms = (
                suspend_ms
                if state.config.long_polling_enable
                else min(suspend_ms, state.config.short_polling_time_mills)
            )
            await self._hold(topic, queue_id, offset, wait_ms)
            result = self.read(topic, queue_id, offset, max_nums, max_bytes, tag_codes, sql)
        if result.count:
            state.stats.record_get(topic, result.count)
        return result

    def _subscription(
        self, group: str, topic: str, expression: str | None, expression_type: str | None
    ) -> tuple[str, str | None]:
        """(expression, expression type) of a pull: its own, else the group's registered one
        for the topic (``ConsumerGroupInfo.findSubscriptionData``), else everything."""
        if expression is not None:
            return expression, expression_type
        registered = self._registered(group, topic) if self._registered is not None else None
        return registered if registered is not None else ("*", None)

    def read(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        max_bytes: int,
        tag_codes: frozenset[int] | None,
        sql: Sql92Selector | None = None,
    ) -> Delivered:
        """What a pull at ``offset`` gets now (RocketMQ ``DefaultMessageStore.getMessage``)."""
        state = self._state
        queue = state.queues.find(topic, queue_id)
        if queue is None:
            min_offset = max_offset = 0
        else:
            min_offset, max_offset = queue.min_offset, queue.max_offset
        master = state.is_master
        if max_offset == 0 and min_offset == 0:
            if offset == 0 or not master:
                return Delivered(PullOutcome.NOT_FOUND, (), offset, 0, 0)
            return Delivered(PullOutcome.OFFSET_MOVED, (), 0, 0, 0)
        if offset < min_offset:
            return Delivered(PullOutcome.OFFSET_MOVED, (), min_offset, min_offset, max_offset)
        if offset == max_offset:
            return Delivered(PullOutcome.NOT_FOUND, (), offset, min_offset, max_offset)
        if offset > max_offset:
            if not master:
                return Delivered(PullOutcome.NOT_FOUND, (), offset, min_offset, max_offset)
            return Delivered(PullOutcome.OFFSET_MOVED, (), max_offset, min_offset, max_offset)
        assert queue is not None
        phy_offsets: Sequence[int]
        sizes: Sequence[int]
        phy_offsets, sizes, tags_codes = queue.read_columns(offset, max_nums)
        next_offset = offset + len(sizes)
        # Most pulls want every unit read (subscription "*", no gap): they take a prefix of the
        # columns, found without a loop over the units in Python (that loop cost about 0.3 us
        # per message); only filtered pulls and gaps go unit by unit.
        if tag_codes is not None or sql is not None or BLANK_SIZE in sizes:
            phy_offsets, sizes, next_offset = _select(
                phy_offsets, sizes, tags_codes, offset, max_bytes, tag_codes
            )
        elif sum(sizes) > max_bytes:  # every unit is wanted, up to max_bytes (at least one)
            count = max(1, bisect.bisect_right(list(itertools.accumulate(sizes)), max_bytes))
            phy_offsets, sizes = phy_offsets[:count], sizes[:count]
            next_offset = offset + count
        if not sizes:
            return Delivered(PullOutcome.FILTERED, (), next_offset, min_offset, max_offset)
        try:
            body = state.commitlog.read_records(phy_offsets, sizes)
        except IndexCompactedError:
            # Retention removed these messages since the queue was read: start over after them.
            return Delivered(PullOutcome.FILTERED, (), offset, min_offset, max_offset)
        except IndexOutOfRangeError:
            return Delivered(PullOutcome.NOT_FOUND, (), offset, min_offset, max_offset)
        count = len(sizes)
        if sql is not None:
            body, count = _select_by_properties(body, sizes, sql)
            if not count:
                return Delivered(PullOutcome.FILTERED, (), next_offset, min_offset, max_offset)
        return Delivered(PullOutcome.FOUND, (), next_offset, min_offset, max_offset, 0, body, count)


def _select(
    phy_offsets: Sequence[int],
    sizes: Sequence[int],
    tags_codes: Sequence[int],
    offset: int,
    max_bytes: int,
    tag_codes: frozenset[int] | None,
) -> tuple[list[int], list[int], int]:
    """The units a pull at ``offset`` returns when some are skipped: blanks, and units whose
    tags code the subscription does not name. Returns their offsets and sizes, and the queue
    offset to go on from (after the last unit looked at)."""
    wanted_offsets: list[int] = []
    wanted_sizes: list[int] = []
    total = 0
    next_offset = offset
    for phy, size, tags_code in zip(phy_offsets, sizes, tags_codes, strict=True):
        if size == BLANK_SIZE:  # a gap the queue filled (messages lost to a crash)
            next_offset += 1
            continue
        if total + size > max_bytes and wanted_sizes:
            break
        next_offset += 1
        if tag_codes is not None and tags_code not in tag_codes:
            continue
        wanted_offsets.append(phy)
        wanted_sizes.append(size)
        total += size
    return wanted_offsets, wanted_sizes, next_offset


def _select_by_properties(
    body: bytes, sizes: Sequence[int], sql: Sql92Selector
) -> tuple[bytes, int]:
    """The records of ``body`` (of ``sizes``) whose properties ``sql`` selects, and how many.

    A record whose properties cannot be read is delivered, not skipped: the consumer's decoder
    reports it, as it would on a pull without a filter."""
    view = memoryview(body)
    kept: list[memoryview] = []
    pos = 0
    for size in sizes:
        try:
            wanted = sql.matches(read_dispatch_info(view, pos).properties)
        except MessageFormatError:
            wanted = True
        if wanted:
            kept.append(view[pos : pos + size])
        pos += size
    if len(kept) == len(sizes):
        return body, len(kept)
    return b"".join(kept), len(kept)
