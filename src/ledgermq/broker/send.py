"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Parses and checks the request (topic, size, permissions, queue), creates the topic if the rules
allow it, and stores the messages through ``MessageWriter`` (offsets, records, ledger append);
the producer is answered once a majority has them (spec-broker.md sections 3.3-3.6).

Messages to a retry topic that have been reconsumed ``maxReconsumeTimes`` times go to the
group's dead-letter topic; messages with a ``DELAY`` level wait in the delay topic first.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.broker.state.topics import RETRY_PREFIX, SCHEDULE_TOPIC
from ledgermq.errors import (
    BadRequestError,
    InvalidMessageError,
    MessageFormatError,
    RequestRejectedError,
)
from ledgermq.wire import MQRequestCode, MQResponseCode, ext_bool, ext_int, ext_str
from ledgermq.wire.ext_fields import SEND_V2_FIELD_NAMES, expand_send_v2_fields
from ledgermq.wire.message import (
    MessageProperty,
    SysFlag,
    decode_batch,
    decode_properties,
    encode_properties,
    find_property,
    validate_message,
    validate_topic,
)
from ledgermq.wire.route import is_writable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.broker.service.message_writer import MessageWriter, PutResult
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.route import TopicConfig

__all__ = ["SendProcessor", "SendRequest", "parse_send_request"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class SendRequest:
    """A send's header, read (not frozen: built once per send, and a frozen dataclass's
    ``__init__`` costs four times a plain one's)."""

    producer_group: str
    topic: str
    default_topic: str | None
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    max_reconsume_times: int | None
    batch: bool


_V2_CODES: Final = frozenset({MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE})
_V2_KEYS: Final = frozenset(SEND_V2_FIELD_NAMES)
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def parse_send_request(command: RemotingCommand) -> SendRequest:
    """The send's header; ``BadRequestError`` names a missing or malformed field."""
    fields: Mapping[str, str] = command.ext_fields
    if command.code in _V2_CODES:
        if fields.keys() <= _V2_KEYS:
            request = _parse_v2_plain(fields, command.code == MQRequestCode.SEND_BATCH_MESSAGE)
            if request is not None:
                return request
        fields = expand_send_v2_fields(fields)
    max_reconsume = fields.get("maxReconsumeTimes")
    return SendRequest(
        producer_group=fields.get("producerGroup", ""),
        topic=ext_str(fields, "topic"),
        default_topic=fields.get("defaultTopic") or None,
        default_topic_queue_nums=ext_int(fields, "defaultTopicQueueNums", 4),
        queue_id=ext_int(fields, "queueId", -1),
        sys_flag=ext_int(fields, "sysFlag", 0),
        born_timestamp=ext_int(fields, "bornTimestamp", 0),
        flag=ext_int(fields, "flag", 0),
        properties=fields.get("properties", ""),
        reconsume_times=ext_int(fields, "reconsumeTimes", 0),
        max_reconsume_times=int(max_reconsume) if max_reconsume not in (None, "") else None,
        batch=command.code == MQRequestCode.SEND_BATCH_MESSAGE or ext_bool(fields, "batch"),
    )


def _parse_v2_plain(fields: Mapping[str, str], batch_code: bool) -> SendRequest | None:
    """The V2 header as every client we know sends it (one-letter names, every number present
    and in range, ``batch`` spelled true or false) in one step; None for anything else, which
    the general reader then reads, or refuses with its messages. Why: the general reader
    renamed the 14 fields into a new dict and parsed each number through a checking helper,
    about a tenth of the master's Python time per single send."""
    get = fields.get
    topic = get("b")
    batch_text = get("m")
    max_reconsume = get("l")
    if topic is None or batch_text not in (None, "false", "true"):
        return None
    try:
        numbers = (
            int(fields["d"]) if "d" in fields else 4,
            int(fields["e"]) if "e" in fields else -1,
            int(fields["f"]) if "f" in fields else 0,
            int(fields["g"]) if "g" in fields else 0,
            int(fields["h"]) if "h" in fields else 0,
            int(fields["j"]) if "j" in fields else 0,
        )
        max_times = None if max_reconsume is None else int(max_reconsume)
    except ValueError:  # "" (a default) or not a number: the general reader decides
        return None
    if not (min(numbers) >= _INT64_MIN and max(numbers) <= _INT64_MAX):
        return None
    queue_nums, queue_id, sys_flag, born, flag, reconsume = numbers
    return SendRequest(
        get("a", ""), topic, get("c") or None, queue_nums, queue_id, sys_flag, born, flag,
        get("i", ""), reconsume, max_times, batch_code or batch_text == "true",
    )  # fmt: skip


@dataclass(slots=True)
class _Checked:
    """A send that passed the checks that need no topic: its request and messages."""

    request: SendRequest
    items: list[tuple[bytes, int, str]]


class SendProcessor:
    """One send, two ways in: ``process`` (a coroutine, for sends that may create a topic or
    route to a retry or dead-letter topic) and ``start`` (no task and no coroutine, for the
    common case of a known topic: its answer is made straight from the commit). Both run the
    same steps, ``_check``, ``_place`` and ``_answer``, so they cannot disagree."""

    def __init__(self, state: BrokerState, messages: MessageWriter) -> None:
        self._state = state
        self._writer = messages
        self._rng = random.Random()  # noqa: S311 - spreads sends without a queue id

    async def process(self, command: RemotingCommand, client_address: str) -> RemotingCommand:
        checked = self._check(command)
        request = checked.request
        topic = request.topic
        queue_id = request.queue_id
        if topic.startswith(RETRY_PREFIX):
            topic, queue_id = await self._route_retry(request, queue_id)
        topic_config = await self._state.topics.ensure_for_send(
            topic, request.default_topic, request.default_topic_queue_nums
        )
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

        def settle(outcome: RemotingCommand | RequestRejectedError) -> None:
            if future.done():
                return
            if isinstance(outcome, RequestRejectedError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        self._store(command, checked, topic_config, queue_id, client_address, settle)
        return await future

    def start(
        self,
        command: RemotingCommand,
        client_address: str,
        on_done: Callable[[RemotingCommand | RequestRejectedError], None],
    ) -> bool:
        """Store a send to a topic that exists and is not a retry topic, and call ``on_done``
        once with its answer (or refusal) when it is committed; False, having done nothing,
        when the send needs ``process``. Raises ``RequestRejectedError`` (and the errors of a
        malformed request) at once for a send refused before anything was stored."""
        checked = self._check(command)
        request = checked.request
        if request.topic.startswith(RETRY_PREFIX):
            return False
        topic_config = self._state.topics.find(request.topic)
        if topic_config is None:
            return False
        self._store(command, checked, topic_config, request.queue_id, client_address, on_done)
        return True

    def _check(self, command: RemotingCommand) -> _Checked:
        """Everything a send is checked for before its topic is looked at."""
        state = self._state
        request = parse_send_request(command)
        state.require_master("send")
        try:
            validate_topic(request.topic)
        except InvalidMessageError as exc:
            raise RequestRejectedError(str(exc), MQResponseCode.MESSAGE_ILLEGAL) from None
        if request.sys_flag & SysFlag.TRANSACTION_MASK == SysFlag.TRANSACTION_PREPARED:
            raise RequestRejectedError(
                "transactional (half) messages are not supported by this broker",
                MQResponseCode.NO_PERMISSION,
            )
        items = self._messages(request, command.body)
        config = state.config
        if not is_writable(config.broker_permission):
            raise RequestRejectedError(
                f"the broker[{config.broker_name}] sending message is forbidden",
                MQResponseCode.NO_PERMISSION,
            )
        return _Checked(request, items)

    def _store(
        self,
        command: RemotingCommand,
        checked: _Checked,
        topic_config: TopicConfig,
        queue_id: int,
        client_address: str,
        on_done: Callable[[RemotingCommand | RequestRejectedError], None],
    ) -> None:
        """Pick the queue, divert a delayed message to the delay topic, and store it."""
        state = self._state
        request = checked.request
        topic = topic_config.topic_name
        if not is_writable(topic_config.perm):
            raise RequestRejectedError(
                f"the topic[{topic}] sending message is forbidden", MQResponseCode.NO_PERMISSION
            )
        if queue_id < 0:
            queue_id = self._rng.randrange(topic_config.write_queue_nums)
        elif queue_id >= topic_config.write_queue_nums:
            raise RequestRejectedError(
                f"queueId[{queue_id}] is illegal, topic {topic} has "
                f"{topic_config.write_queue_nums} write queues",
                MQResponseCode.SYSTEM_ERROR,
            )
        items = checked.items
        # Delayed messages (single sends only, as RocketMQ) wait in the delay topic's queue of
        # their level, with the real destination in their properties.
        store_topic, store_queue = topic, queue_id
        if not request.batch:
            body, flag, properties = items[0]
            level = _delay_level(properties)
            if level > 0:
                props = decode_properties(properties)
                level = min(level, len(state.config.delay_levels_ms))
                props[MessageProperty.REAL_TOPIC] = topic
                props[MessageProperty.REAL_QID] = str(queue_id)
                props[MessageProperty.DELAY] = str(level)
                items = [(body, flag, encode_properties(props))]
                store_topic, store_queue = SCHEDULE_TOPIC, level - 1
        answered_queue = queue_id if store_topic == topic else store_queue

        def answer(outcome: PutResult | RequestRejectedError) -> None:
            if isinstance(outcome, RequestRejectedError):
                on_done(outcome)
                return
            ext = {
                "msgId": ",".join(outcome.msg_ids),
                "queueId": str(answered_queue),
                "queueOffset": str(outcome.first_queue_offset),
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            }
            if len(items) == 1:
                uniq = find_property(items[0][2], MessageProperty.UNIQ_KEY)
                if uniq:
                    ext["transactionId"] = uniq
            on_done(command.response(MQResponseCode.SUCCESS, ext_fields=ext))

        self._writer.submit(
            store_topic, store_queue, items, answer,
            sys_flag=request.sys_flag, born_timestamp=request.born_timestamp,
            born_host=client_address, reconsume_times=request.reconsume_times,
        )  # fmt: skip

    def _messages(self, request: SendRequest, body: bytes) -> list[tuple[bytes, int, str]]:
        max_bytes = self._state.config.max_message_size
        if request.batch:
            try:
                batch = decode_batch(body)
            except MessageFormatError as exc:
                raise BadRequestError(f"the batch body does not parse: {exc}") from None
            if not batch:
                raise RequestRejectedError("the batch is empty", MQResponseCode.MESSAGE_ILLEGAL)
            if len(body) > max_bytes:
                raise RequestRejectedError(
                    f"the batch of {len(body)} bytes exceeds maxMessageSize ({max_bytes})",
                    MQResponseCode.MESSAGE_ILLEGAL,
                )
            items = [(item.body, item.flag, item.properties) for item in batch]
        else:
            items = [(body, request.flag, request.properties)]
        for item_body, _, properties in items:
            try:
                validate_message(request.topic, item_body, properties, max_bytes)
            except InvalidMessageError as exc:
                raise RequestRejectedError(str(exc), MQResponseCode.MESSAGE_ILLEGAL) from None
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


def _delay_level(properties: str) -> int:
    text = find_property(properties, MessageProperty.DELAY)
    if not text:
        return 0
    try:
        return max(0, int(text))
    except ValueError:
        raise RequestRejectedError(
            f"property DELAY must be a delay level number, not {text!r}",
            MQResponseCode.MESSAGE_ILLEGAL,
        ) from None
