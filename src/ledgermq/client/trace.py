"""Message trace (RocketMQ's ``msgTraceSwitch`` / ``enableMsgTrace``): who sent a message, who
consumed it, when, how long it took.

A producer or push consumer made with ``enable_msg_trace=True`` records one trace record per
message sent (``Pub``) and two per message consumed (``SubBefore`` when the listener gets it,
``SubAfter`` when it returns), in RocketMQ's text format (``TraceDataEncoder``: fields split
by ``\\x01``, records by ``\\x02``), so RocketMQ's tools and dashboard read them too. Records
are sent in the background, batched (up to 100 records or 0.2 s), to the trace topic
``RMQ_SYS_TRACE_TOPIC`` (or ``trace_topic``) by an internal producer, each trace message keyed
by the message ids it describes: ``Admin.message_trace(msg_id)`` finds them through the key
index. Tracing never slows or fails a send or a consume: when the trace topic cannot take the
records they are dropped (counted in ``dropped``) and a warning logged.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ledgermq.errors import LedgerMQError
from ledgermq.net.trace_batches import TraceBatches
from ledgermq.wire.trace import (
    TRACE_TOPIC,
    TraceEvent,
    decode_trace,
    pub,
    sub_after,
    sub_before,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.client.producer import Producer

__all__ = [
    "TRACE_TOPIC",
    "TraceDispatcher",
    "TraceEvent",
    "decode_trace",
    "dispatcher",
    "pub",
    "sub_after",
    "sub_before",
]

logger = logging.getLogger("ledgermq.client")


def dispatcher(trace_topic: str, namesrv_addr: str, **client_options: Any) -> TraceDispatcher:
    """A dispatcher whose internal producer (group ``_INNER_TRACE_PRODUCER-<topic>``, as
    RocketMQ names it) reaches the cluster as its client does (``client_options``: network,
    clock, credentials, tls)."""

    def make() -> Producer:
        from ledgermq.client.producer import Producer  # noqa: PLC0415 - it imports this module

        return Producer(f"_INNER_TRACE_PRODUCER-{trace_topic}", namesrv_addr, **client_options)

    return TraceDispatcher(trace_topic, make)


class TraceDispatcher:
    """Batches trace records and sends them to the trace topic in the background.

    ``make_producer`` builds the internal producer (without tracing), started on first use.
    """

    def __init__(self, trace_topic: str, make_producer: Callable[[], Producer]) -> None:
        self.trace_topic = trace_topic
        self._make_producer = make_producer
        self._producer: Producer | None = None
        self._batches = TraceBatches(trace_topic, self._send)

    @property
    def sent(self) -> int:
        """Records sent to the trace topic."""
        return self._batches.stored

    @property
    def dropped(self) -> int:
        """Records dropped (the queue was full, or their batch could not be sent)."""
        return self._batches.dropped

    def submit(self, record: str, msg_id: str) -> None:
        """Queue a record (never blocks; past the queue limit it is dropped and counted)."""
        self._batches.submit(record, msg_id)

    async def _send(self, body: bytes, keys: list[str]) -> None:
        """One trace message through the internal producer, started on first use."""
        if self._producer is None:
            self._producer = self._make_producer()
            await self._producer.start()
        await self._producer.send(self.trace_topic, body, keys=keys)

    async def flush(self) -> None:
        """Send what is queued now (one trace message per up to 100 records)."""
        await self._batches.flush()

    async def close(self) -> None:
        """Send what is left, then stop."""
        with contextlib.suppress(LedgerMQError):
            await self._batches.close()
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None
