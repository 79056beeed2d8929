"""The Traces page: the message trace (who sent a message, who consumed it, when, how long it
took) found by message id or by message key.

Traced clients send their records to the trace topic (``RMQ_SYS_TRACE_TOPIC`` unless they were
given another), each trace message keyed by the UNIQ_KEY msgIds it describes
(``client.trace``), so a trace is found through the key index of the trace topic: by the msgId
directly (even when the message itself has expired), by an offset msgId through the message it
names, and by a KEYS value through the messages of a topic that carry it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.client.trace import TRACE_TOPIC
from ledgermq.console import search
from ledgermq.console.messages import TraceRow, format_ms, trace_row
from ledgermq.errors import MQResponseError
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.client import Admin
    from ledgermq.wire import MessageExt

__all__ = ["TRACED_MAX", "TRACE_TOPIC", "Traced", "by_id", "by_key"]

TRACED_MAX: Final = 20
"""Most messages a key search shows the trace of (each is one more lookup)."""


@dataclass(frozen=True)
class Traced:
    """A message id and its trace; the message's own fields when it is still stored."""

    msg_id: str
    rows: list[TraceRow]
    topic: str = ""
    offset_msg_id: str = ""
    stored: str = ""
    keys: str = ""


async def _traced(admin: Admin, message: MessageExt, trace_topic: str) -> Traced:
    events = await admin.message_trace(message.msg_id, trace_topic=trace_topic)
    return Traced(
        message.msg_id,
        [trace_row(e) for e in events],
        topic=message.topic,
        offset_msg_id=message.offset_msg_id,
        stored=format_ms(message.store_timestamp),
        keys=" ".join(message.keys),
    )


async def by_id(admin: Admin, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[Traced]:
    """The trace of the message(s) ``msg_id`` names (either kind of id). A msgId whose message
    is gone still has its trace: it is looked up as it is."""
    try:
        found = await admin.find_message(msg_id)
    except MQResponseError as exc:
        if exc.code != MQResponseCode.QUERY_NOT_FOUND:
            raise
        found = []
    if not found:
        events = await admin.message_trace(msg_id, trace_topic=trace_topic)
        return [Traced(msg_id, [trace_row(e) for e in events])] if events else []
    unique = {m.msg_id: m for m in found}
    return list(await asyncio.gather(*(_traced(admin, m, trace_topic) for m in unique.values())))


async def by_key(
    admin: Admin, topic: str, key: str, trace_topic: str = TRACE_TOPIC
) -> list[Traced]:
    """The traces of the newest ``TRACED_MAX`` messages of ``topic`` carrying ``key``."""
    found = await search.by_key(admin, topic, key, TRACED_MAX)
    unique = {m.msg_id: m for m in found}
    return list(await asyncio.gather(*(_traced(admin, m, trace_topic) for m in unique.values())))
