"""Message trace records in RocketMQ's text format (``TraceDataEncoder`` / ``TraceDataDecoder``).

A trace message's body is records separated by ``\\x02``, each record's fields by ``\\x01``:
``Pub`` (a send), ``SubBefore`` (a consumer got it), ``SubAfter`` (it finished with it). Our
clients write them when tracing is on (``ledgermq.client.trace``), and so does the broker's gRPC
door for the RocketMQ 5 clients it serves (``ledgermq.broker.service.trace``); RocketMQ's tools
and dashboard read the same text, and ``Admin.message_trace`` reads it back with
``decode_trace``. Kept here, below the client and the broker, so both write one format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "CONTENT",
    "FIELD",
    "REGION",
    "TRACE_TOPIC",
    "TraceEvent",
    "decode_trace",
    "pub",
    "sub_after",
    "sub_before",
]

TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
"""RocketMQ's default trace topic (``TopicValidator.RMQ_SYS_TRACE_TOPIC``)."""
REGION: Final = "DefaultRegion"
CONTENT: Final = "\x01"
FIELD: Final = "\x02"


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One decoded trace record; fields a kind does not carry are empty or -1."""

    kind: str
    """``Pub``, ``SubBefore`` or ``SubAfter``."""
    msg_id: str
    timestamp_ms: int = -1
    group: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    body_length: int = -1
    cost_ms: int = -1
    offset_msg_id: str = ""
    success: bool | None = None
    request_id: str = ""
    retry_times: int = -1


def pub(
    *,
    timestamp_ms: int,
    group: str,
    topic: str,
    msg_id: str,
    tags: str,
    keys: str,
    store_host: str,
    body_length: int,
    cost_ms: int,
    offset_msg_id: str,
    success: bool,
) -> str:
    """A ``Pub`` record (a normal message: msgType 0)."""
    fields = ("Pub", timestamp_ms, REGION, group, topic, msg_id, tags, keys, store_host,
              body_length, cost_ms, 0, offset_msg_id, "true" if success else "false")  # fmt: skip
    return CONTENT.join(map(str, fields)) + FIELD


def sub_before(
    *, timestamp_ms: int, group: str, request_id: str, msg_id: str, retry_times: int, keys: str
) -> str:
    fields = ("SubBefore", timestamp_ms, REGION, group, request_id, msg_id, retry_times, keys)
    return CONTENT.join(map(str, fields)) + FIELD


def sub_after(
    *,
    request_id: str,
    msg_id: str,
    cost_ms: int,
    success: bool,
    keys: str,
    context_code: int,
    timestamp_ms: int,
    group: str,
) -> str:
    fields = ("SubAfter", request_id, msg_id, cost_ms, "true" if success else "false", keys,
              context_code, timestamp_ms, group)  # fmt: skip
    return CONTENT.join(map(str, fields)) + FIELD


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def decode_trace(body: str) -> list[TraceEvent]:
    """The records of a trace message's body; records of unknown kinds are skipped."""
    events = []
    for record in body.split(FIELD):
        f = record.split(CONTENT)
        kind = f[0]
        if kind == "Pub" and len(f) >= 14:
            events.append(
                TraceEvent(
                    kind,
                    f[5],
                    _int(f[1]),
                    f[3],
                    f[4],
                    f[6],
                    f[7],
                    f[8],
                    _int(f[9]),
                    _int(f[10]),
                    f[12],
                    f[13] == "true",
                )
            )
        elif kind == "SubBefore" and len(f) >= 8:
            events.append(
                TraceEvent(
                    kind, f[5], _int(f[1]), f[3], keys=f[7], request_id=f[4], retry_times=_int(f[6])
                )
            )
        elif kind == "SubAfter" and len(f) >= 6:
            events.append(
                TraceEvent(
                    kind,
                    f[2],
                    _int(f[7]) if len(f) > 7 else -1,
                    f[8] if len(f) > 8 else "",
                    keys=f[5],
                    cost_ms=_int(f[3]),
                    success=f[4] == "true",
                    request_id=f[1],
                )
            )
    return events
