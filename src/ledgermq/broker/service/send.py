"""Send: what storing a producer's messages means, whatever door they came in by.

Checks the send (topic, size, permissions, queue), creates the topic if the rules allow it, and
stores the messages through ``MessageWriter`` (offsets, records, ledger append); the result
comes once a majority has them (spec-broker.md sections 3.3-3.6). Every door asks in the
messaging contract's terms (``messaging.SendRequest``): the remoting door
(``broker.remoting.send``) reads it from its header, properties as the text received, and
answers with RocketMQ's fields and codes; the gRPC door's backend makes it of a ``Sending``
(``SendRequest.of``: the messages as they are, never encoded as a batch to be decoded here).
Refusals are typed (``broker.errors``).

Messages to a retry topic that have been reconsumed ``maxReconsumeTimes`` times go to the
group's dead-letter topic; messages with a ``DELAY`` level wait in the delay topic first,
timer messages (any delivery time) in the timer topic (``broker.service.timers``), and
transactional half messages in the half topic for their end (``service.transactions``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.broker.errors import (
    ForbiddenError,
    IllegalMessageError,
    InvalidArgumentError,
    ServiceError,
)
from ledgermq.broker.names import require_send_topic
from ledgermq.broker.service.timers import RecallHandle, divert_timer, due_ms
from ledgermq.broker.service.transactions import as_half, is_half
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.state.topics import RETRY_PREFIX, SCHEDULE_TOPIC
from ledgermq.errors import InvalidMessageError, MessageFormatError
from ledgermq.messaging.sending import SendRequest
from ledgermq.wire.message import (
    MessageProperty,
    SysFlag,
    decode_batch,
    decode_properties,
    encode_properties,
    find_property,
    validate_message,
)
from ledgermq.wire.route import is_writable

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.broker.service.message_writer import MessageWriter, PutResult
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire.route import TopicConfig

__all__ = ["SendRequest", "SendResult", "SendService"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class SendResult:
    """A stored send (RocketMQ's ``SendResult``). Not frozen, for the same reason."""

    msg_ids: list[str]
    """Offset message ids, one per message, in order."""
    queue_id: int
    """The queue the producer asked for or was given (a delayed message is stored in the delay
    topic's queue of its level, but answered with this one)."""
    queue_offset: int
    """Queue offset of the first message in the queue it was stored in."""
    unique_key: str | None
    """A single message's ``UNIQ_KEY`` (remoting's ``transactionId``), None for a batch."""
    recall_handle: str | None = None
    """A timer message's handle for RecallMessage (``broker.service.timers``), else None."""


@dataclass(slots=True)
class _Checked:
    """A send that passed the checks that need no topic: its request and messages."""

    request: SendRequest
    items: list[tuple[bytes, int, str]]


class SendService:
    """One send, two ways in: ``send`` (a coroutine, for sends that may create a topic or route
    to a retry or dead-letter topic) and ``start`` (no task and no coroutine, for the common case
    of a known topic: its result is made straight from the commit). Both run the same steps,
    ``_check`` and ``_store``, so they cannot disagree."""

    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._rng = random.Random()  # noqa: S311 - spreads sends without a queue id

    async def send(self, request: SendRequest, body: bytes, client_address: str) -> SendResult:
        """Store the messages of ``request`` (``body``: one message's body, or a batch's
        encoding); returns once a majority has them. Raises a ``ServiceError`` that says why
        it was refused (``broker.errors``)."""
        checked = self._check(request, body)
        topic = request.topic
        queue_id = request.queue_id
        if topic.startswith(RETRY_PREFIX):
            topic, queue_id = await self._route_retry(request, queue_id)
        topic_config = await self._state.topics.ensure_for_send(
            topic, request.default_topic, request.default_topic_queue_nums
        )
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()

        def settle(outcome: SendResult | ServiceError) -> None:
            if future.done():
                return
            if isinstance(outcome, ServiceError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        self._store(checked, topic_config, queue_id, client_address, settle)
        return await future

    def start(
        self,
        request: SendRequest,
        body: bytes,
        client_address: str,
        on_done: Callable[[SendResult | ServiceError], None],
    ) -> bool:
        """Store a send to a topic that exists and is not a retry topic, and call ``on_done``
        once with its result (or refusal) when it is committed; False, having done nothing,
        when the send needs ``send``. Raises a ``ServiceError`` at once for a send refused
        before anything was stored."""
        checked = self._check(request, body)
        if request.topic.startswith(RETRY_PREFIX):
            return False
        topic_config = self._state.topics.find(request.topic)
        if topic_config is None:
            return False
        self._store(checked, topic_config, request.queue_id, client_address, on_done)
        return True

    def _check(self, request: SendRequest, body: bytes) -> _Checked:
        """Everything a send is checked for before its topic is looked at."""
        state = self._state
        state.require_master("send")
        require_send_topic(request.topic)
        items = self._messages(request, body)
        if request.batch and any(is_half(properties) for _, _, properties in items):
            raise IllegalMessageError("a transactional (half) message cannot be sent in a batch")
        config = state.config
        if not is_writable(config.broker_permission):
            raise ForbiddenError(f"the broker[{config.broker_name}] sending message is forbidden")
        return _Checked(request, items)

    def _store(
        self,
        checked: _Checked,
        topic_config: TopicConfig,
        queue_id: int,
        client_address: str,
        on_done: Callable[[SendResult | ServiceError], None],
    ) -> None:
        """Pick the queue, divert a delayed message to the delay topic, and store it."""
        state = self._state
        request = checked.request
        topic = topic_config.topic_name
        if not is_writable(topic_config.perm):
            raise ForbiddenError(f"the topic[{topic}] sending message is forbidden")
        if queue_id < 0:
            queue_id = self._rng.randrange(topic_config.write_queue_nums)
        elif queue_id >= topic_config.write_queue_nums:
            raise InvalidArgumentError(
                f"queueId[{queue_id}] is illegal, topic {topic} has "
                f"{topic_config.write_queue_nums} write queues"
            )
        items = checked.items
        # Delayed messages (single sends only, as RocketMQ) wait in the delay topic's queue of
        # their level, with the real destination in their properties.
        store_topic, store_queue = topic, queue_id
        if not request.batch:
            body, flag, properties = items[0]
            level = _delay_level(properties)
            if _half(request, properties):
                # a half message waits, invisible, for its end (``service.transactions``)
                store_topic, store_queue, properties = as_half(
                    topic, queue_id, properties, request.producer_group
                )
                items = [(body, flag, properties)]
            elif level > 0:
                props = decode_properties(properties)
                level = min(level, len(state.config.delay_levels_ms))
                props[MessageProperty.REAL_TOPIC] = topic
                props[MessageProperty.REAL_QID] = str(queue_id)
                props[MessageProperty.DELAY] = str(level)
                items = [(body, flag, encode_properties(props))]
                store_topic, store_queue = SCHEDULE_TOPIC, level - 1
        recall: str | None = None
        if not request.batch and store_topic == topic:
            # Timer messages wait in the timer topic (broker.service.timers).
            body, flag, properties = items[0]
            if "TIMER_" in properties:
                diversion = divert_timer(
                    decode_properties(properties), topic, queue_id, state.now_ms(),
                    state.config.timer_max_delay_sec,
                )  # fmt: skip
                if diversion is not None:
                    items = [(body, flag, diversion.properties)]
                    store_topic, store_queue = TIMER_TOPIC, 0
                    recall = str(
                        RecallHandle(
                            topic, state.config.broker_name, diversion.due_ms, diversion.uniq_key
                        )
                    )
        elif request.batch and any(
            "TIMER_" in p and due_ms(decode_properties(p), 0) is not None for _, _, p in items
        ):
            raise IllegalMessageError("a batch cannot hold timer messages; send them one by one")
        answered_queue = store_queue if store_topic == SCHEDULE_TOPIC else queue_id

        def answer(outcome: PutResult | ServiceError) -> None:
            if isinstance(outcome, ServiceError):
                on_done(outcome)
                return
            uniq = find_property(items[0][2], MessageProperty.UNIQ_KEY) if len(items) == 1 else ""
            on_done(
                SendResult(
                    outcome.msg_ids,
                    answered_queue,
                    outcome.first_queue_offset,
                    uniq or None,
                    recall,
                )
            )

        self._writer.submit(
            store_topic, store_queue, items, answer,
            sys_flag=request.sys_flag, born_timestamp=request.born_timestamp,
            born_host=client_address, reconsume_times=request.reconsume_times,
        )  # fmt: skip

    def _messages(self, request: SendRequest, body: bytes) -> list[tuple[bytes, int, str]]:
        max_bytes = self._state.config.max_message_size
        if not request.batch:
            text = request.encoded  # the remoting door's single send (the hot path): as received
            items = [(body, request.flag, text)] if text is not None else _given(request, body)
        elif request.messages is not None:
            items = _given(request, body)
            # checked as their batch encoding would be (``wire.message.encode_batch``: 22
            # bytes of head per message), without making it
            size = sum(22 + len(b) + len(p.encode("utf-8", "surrogatepass")) for b, _, p in items)
            if size > max_bytes:
                raise IllegalMessageError(
                    f"the batch of {size} bytes exceeds maxMessageSize ({max_bytes})"
                )
        else:
            try:
                batch = decode_batch(body)
            except MessageFormatError as exc:
                raise InvalidArgumentError(f"the batch body does not parse: {exc}") from None
            if not batch:
                raise IllegalMessageError("the batch is empty")
            if len(body) > max_bytes:
                raise IllegalMessageError(
                    f"the batch of {len(body)} bytes exceeds maxMessageSize ({max_bytes})"
                )
            items = [(item.body, item.flag, item.properties) for item in batch]
        for item_body, _, properties in items:
            try:
                validate_message(request.topic, item_body, properties, max_bytes)
            except InvalidMessageError as exc:
                raise IllegalMessageError(str(exc)) from None
        return items

    async def _route_retry(self, request: SendRequest, queue_id: int) -> tuple[str, int]:
        """A message back in its group's retry topic: to the dead-letter topic after too many."""
        group = request.topic[len(RETRY_PREFIX) :]
        max_times = request.max_reconsume_times
        if max_times is None:
            max_times = self._state.topics.group(group).retry_max_times
        if request.reconsume_times >= max_times:
            dlq = await self._state.topics.ensure_dlq_topic(group)
            _log.info(
                "message of group %s reconsumed %d times goes to %s",
                group, request.reconsume_times, dlq.topic_name,
            )  # fmt: skip
            return dlq.topic_name, 0
        return request.topic, queue_id


def _given(request: SendRequest, body: bytes) -> list[tuple[bytes, int, str]]:
    """The messages of a request made of a door's messages (``SendRequest.of``: as they are),
    or one message with no properties (``body`` beside it)."""
    messages = request.messages
    if messages is None:
        return [(body, request.flag, "")]
    return [(m.body, request.flag, m.property_text()) for m in messages]


def _half(request: SendRequest, properties: str) -> bool:
    """A transactional half message: property ``TRAN_MSG=true`` (or the prepared sys flag)."""
    prepared = request.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED
    return prepared or is_half(properties)


def _delay_level(properties: str) -> int:
    text = find_property(properties, MessageProperty.DELAY)
    if not text:
        return 0
    try:
        return max(0, int(text))
    except ValueError:
        raise IllegalMessageError(
            f"property DELAY must be a delay level number, not {text!r}"
        ) from None
