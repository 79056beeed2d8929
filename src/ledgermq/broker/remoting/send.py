"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the remoting door of
``SendService`` (broker.service.send), which holds what a send means.

A translator only: the request header in (``parse_send_request``: V1 names, or V2's one-letter
names, read into the messaging contract's ``SendRequest`` with the properties as the text
received, never decoded here), the service call, and the response fields out
(``send_response``: ``msgId``, ``queueId``, ``queueOffset``, ...); a refusal is answered with
the code ``broker.remoting.errors`` maps it to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.messaging.sending import SendRequest
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.ext_fields import SEND_V2_FIELD_NAMES, expand_send_v2_fields, send_v2_topic
from ledgermq.wire.headers import SendMessageRequestHeader
from ledgermq.wire.names import topic_name_problem

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.broker.errors import ServiceError
    from ledgermq.broker.service.send import SendResult, SendService
    from ledgermq.wire import RemotingCommand

__all__ = ["SendProcessor", "SendRequest", "parse_send_request", "send_response"]

_V2_CODES: Final = frozenset({MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE})
_V2_KEYS: Final = frozenset(SEND_V2_FIELD_NAMES)
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def parse_send_request(command: RemotingCommand) -> SendRequest:
    """The send's header; ``BadRequestError`` names a missing or malformed field, or the naming
    rule its topic breaks (INVALID_PARAMETER). Parsed once per request: the broker's ACL
    computes what the send needs from this very object (``acl.send_needs`` of its ``topic``)
    and hands the same object to ``SendProcessor``. A V1 header is RocketMQ's
    ``SendMessageRequestHeader`` (``wire.headers``); a V2 header must name its topic in ``b``
    and carry no V1 name (``wire.ext_fields.send_v2_topic``), and is read as V1 once renamed."""
    fields: Mapping[str, str] = command.ext_fields
    if command.code in _V2_CODES:
        if fields.keys() <= _V2_KEYS:
            request = _parse_v2_plain(fields, command.code == MQRequestCode.SEND_BATCH_MESSAGE)
            if request is not None:
                return request
        send_v2_topic(fields)  # refuses a missing b or a V1 name that would override it
        fields = expand_send_v2_fields(fields)
    header = SendMessageRequestHeader.from_ext_fields(fields)
    return SendRequest(
        producer_group=header.producer_group,
        topic=header.topic,
        default_topic=header.default_topic,
        default_topic_queue_nums=header.default_topic_queue_nums,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        flag=header.flag,
        encoded=header.properties,
        reconsume_times=header.reconsume_times,
        max_reconsume_times=header.max_reconsume_times,
        batch=command.code == MQRequestCode.SEND_BATCH_MESSAGE or header.batch,
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
    if topic is None or batch_text not in (None, "false", "true") or topic_name_problem(topic):
        return None  # (a topic that breaks the naming rules: the general reader says which)
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


def send_response(command: RemotingCommand, result: SendResult) -> RemotingCommand:
    """The SUCCESS answer to a stored send (``SendMessageResponseHeader``)."""
    ext = {
        "msgId": ",".join(result.msg_ids),
        "queueId": str(result.queue_id),
        "queueOffset": str(result.queue_offset),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    if result.unique_key is not None:
        ext["transactionId"] = result.unique_key
    if result.recall_handle is not None:
        ext["recallHandle"] = result.recall_handle  # RocketMQ 5.3's header field
    return command.response(MQResponseCode.SUCCESS, ext_fields=ext)


class SendProcessor:
    """The two ways in of ``SendService``, from a remoting request: ``process`` (a coroutine)
    and ``start`` (no task and no coroutine, for a send to a known topic)."""

    def __init__(self, service: SendService) -> None:
        self._service = service

    async def process(
        self, request: SendRequest, command: RemotingCommand, client_address: str
    ) -> RemotingCommand:
        """Store ``request``: ``command``'s header as ``parse_send_request`` read it (the object
        the ACL checked), with ``command``'s body."""
        result = await self._service.send(request, command.body, client_address)
        return send_response(command, result)

    def start(
        self,
        request: SendRequest,
        command: RemotingCommand,
        client_address: str,
        on_done: Callable[[SendResult | ServiceError], None],
    ) -> bool:
        """``SendService.start`` for ``request`` (as in ``process``): ``on_done`` gets the result
        (for ``send_response``) or the refusal once; False, having done nothing, when the send
        needs ``process``. Raises at once for a refused request."""
        return self._service.start(request, command.body, client_address, on_done)
