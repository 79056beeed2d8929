"""Trace records made by the broker (``traceTopicEnable``): what a door saw, in RocketMQ's format.

RocketMQ 5's clients (the gRPC door's) record no trace of their own here; RocketMQ records their
sends and consumptions server-side. With ``traceTopicEnable=true`` the gRPC door hands this
service a ``Pub`` record for each message a SendMessage stored, a ``SubBefore`` for each message
a ReceiveMessage delivered and a ``SubAfter`` (consumed, ok) for each AckMessage entry
acknowledged, in the format our clients' trace uses
(``ledgermq.wire.trace``), so ``ledgermq admin message`` and RocketMQ's tools show them with the
others. Records are written to this broker's trace topic (``msgTraceTopicName``, created at
start) through the send service, in the background and batched (up to 100 records or 0.2 s per
trace message), each trace message keyed by the message ids it describes so the key index finds
them. Tracing never slows or fails a send or an ack: a record the topic cannot take is dropped,
counted and logged. When ``traceTopicEnable`` is off this service does not exist and a door pays
one ``is None`` test per call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import InvalidHandleError
from ledgermq.broker.service.pop import PopHandle
from ledgermq.messaging.sending import SendRequest
from ledgermq.net.trace_batches import TraceBatches
from ledgermq.wire import MessageProperty, encode_properties
from ledgermq.wire.trace import pub, sub_after, sub_before

if TYPE_CHECKING:
    from ledgermq.broker.service.pop import PoppedMessage
    from ledgermq.broker.service.send import SendService
    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["BrokerTracer"]

_log = logging.getLogger(__name__)

_CONSUMED_OK: Final = 0
"""``SubAfter``'s context code for CONSUME_SUCCESS (RocketMQ's ``ConsumeReturnType.SUCCESS``)."""


class BrokerTracer:
    """Batches the broker's trace records and stores them in the trace topic (see the module).

    Args:
        state: the replica's state (its address is the ``Pub`` store host; its clock the times).
        send: the send service the trace messages are stored through.
        topic: the trace topic (``msgTraceTopicName``).
    """

    def __init__(self, state: BrokerState, send: SendService, topic: str) -> None:
        self.topic = topic
        self._state = state
        self._send = send
        self._batches = TraceBatches(topic, self._store)

    @property
    def stored(self) -> int:
        """Records stored in the trace topic."""
        return self._batches.stored

    @property
    def dropped(self) -> int:
        """Records dropped (the queue was full, or the store refused their batch)."""
        return self._batches.dropped

    def now_ms(self) -> int:
        return int(self._state.clock.wall_time_s() * 1000)

    def pub(
        self,
        *,
        timestamp_ms: int,
        group: str,
        topic: str,
        msg_id: str,
        tags: str,
        keys: str,
        body_length: int,
        cost_ms: int,
        offset_msg_id: str,
    ) -> None:
        """A message stored for a producer (only stored sends are recorded: a refused one has
        no offset message id, and its client was told why)."""
        record = pub(
            timestamp_ms=timestamp_ms, group=group, topic=topic, msg_id=msg_id, tags=tags,
            keys=keys, store_host=self._state.config.address, body_length=body_length,
            cost_ms=cost_ms, offset_msg_id=offset_msg_id, success=True,
        )  # fmt: skip
        self._submit(record, msg_id)

    def delivered(self, *, group: str, popped: PoppedMessage) -> None:
        """A POP receive handed ``popped`` to a consumer of ``group`` (``SubBefore``; its
        request id is the receipt handle, which the ack's record carries too)."""
        message = popped.message
        record = sub_before(
            timestamp_ms=popped.handle.pop_time_ms, group=group, request_id=str(popped.handle),
            msg_id=message.msg_id, retry_times=popped.attempt - 1,
            keys=message.properties.get(MessageProperty.KEYS, ""),
        )  # fmt: skip
        self._submit(record, message.msg_id)

    def acked(self, *, group: str, msg_id: str, handle: str) -> None:
        """A consumer of ``group`` acknowledged ``msg_id`` (delivered as ``handle``):
        consumed, successfully, in the time since that delivery."""
        now = self.now_ms()
        try:
            cost_ms = max(now - PopHandle.parse(handle).pop_time_ms, 0)
        except InvalidHandleError:  # acknowledged, so it parsed: defensive only
            cost_ms = -1
        record = sub_after(
            request_id=handle, msg_id=msg_id, cost_ms=cost_ms, success=True, keys="",
            context_code=_CONSUMED_OK, timestamp_ms=now, group=group,
        )  # fmt: skip
        self._submit(record, msg_id)

    def _submit(self, record: str, msg_id: str) -> None:
        self._batches.submit(record, msg_id)

    async def _store(self, body: bytes, keys: list[str]) -> None:
        """One trace message through the normal write path."""
        request = SendRequest(
            producer_group=f"_INNER_TRACE_PRODUCER-{self.topic}",
            topic=self.topic,
            default_topic=None,
            default_topic_queue_nums=1,
            queue_id=-1,
            sys_flag=0,
            born_timestamp=self.now_ms(),
            flag=0,
            encoded=encode_properties({MessageProperty.KEYS: " ".join(keys)}),
            reconsume_times=0,
            max_reconsume_times=None,
            batch=False,
        )
        await self._send.send(request, body, self._state.config.address)

    async def flush(self) -> None:
        """Store what is queued now: one trace message per up to 100 records."""
        await self._batches.flush()

    async def close(self) -> None:
        """Store what is left (as far as the store still takes it), then stop."""
        await self._batches.close()
