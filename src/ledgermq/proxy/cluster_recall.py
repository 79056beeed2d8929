"""RecallMessage through the stand-alone proxy: RECALL_MESSAGE (370, RocketMQ 5.3) to the master
of the broker group the recall handle names.

A recall handle is RocketMQ 5.3's ``RecallMessageHandle.HandleV1``, the protocol's own wire
form: URL-safe base64 of ``"v1 <topic> <brokerName> <due ms> <message id>"``. The proxy reads
the broker name from it (nothing else) and forwards the handle as it is; the master decides.
A recall is safe to repeat, so it is retried across a failover.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from ledgermq.errors import LedgerMQError, MQResponseError, TopicNotFoundError
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, status
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from ledgermq.proxy.forward import Forwarder
    from ledgermq.proxy.protocol import definition_pb2, service_pb2

__all__ = ["recall", "recall_broker"]


def recall_broker(handle: str) -> str | None:
    """The broker group a recall handle names; None if it is not a v1 handle."""
    try:
        raw = base64.urlsafe_b64decode(handle.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        return None
    fields = raw.split(" ")
    if len(fields) < 5 or fields[0] != "v1" or not fields[2] or not fields[3].isdigit():
        return None
    return fields[2]


async def recall(
    forwarder: Forwarder, request: service_pb2.RecallMessageRequest, deadline_s: float
) -> tuple[definition_pb2.Status | None, str]:
    """(None, the recalled message's id), or (the status refusing it, "")."""
    topic, handle = request.topic.name, request.recall_handle
    if not topic:
        return status(Code.ILLEGAL_TOPIC, "the request names no topic"), ""
    broker_name = recall_broker(handle)
    if broker_name is None:
        return status(Code.BAD_REQUEST, f"recall handle is invalid: {handle!r:.120}"), ""
    fields = {"producerGroup": GRPC_PRODUCER_GROUP, "topic": topic, "recallHandle": handle}
    try:
        forwarded = await forwarder.call(
            topic, broker_name, MQRequestCode.RECALL_MESSAGE, fields, deadline_s=deadline_s
        )
    except TopicNotFoundError:
        return status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist"), ""
    except MQResponseError as exc:
        if exc.code == MQResponseCode.NO_MESSAGE:
            return status(Code.NOT_FOUND, str(exc)), ""
        return remote_status(exc), ""
    except LedgerMQError as exc:
        return remote_status(exc), ""
    return None, forwarded.response.ext_fields.get("msgId", "")
