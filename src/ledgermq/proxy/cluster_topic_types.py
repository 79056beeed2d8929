"""The topic message types the stand-alone proxy checks sends against, and routes advertise.

A topic's type is its ``message.type`` attribute (``proxy.message_types``), held by the
brokers, not in the NameServer's route; the proxy asks the master of the topic's first broker
group (GET_ALL_TOPIC_CONFIG, 21, the topic configs a master holds) and keeps the answer for
``KEPT_S``, so a topic made FIFO is seen within that time. A master that cannot be asked, or
that does not hold the topic, makes the type MIXED (every type taken): the check is the Java
proxy's convenience to clients, the broker stores what it is given either way.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError
from ledgermq.proxy.message_types import TopicMessageType, topic_message_type
from ledgermq.wire import MQRequestCode
from ledgermq.wire.route import TopicConfig

if TYPE_CHECKING:
    from ledgermq.proxy.forward import Forwarder

__all__ = ["KEPT_S", "TopicTypes"]

_log = logging.getLogger(__name__)

KEPT_S: Final = 10.0
"""How long a topic's type is kept before a master is asked again."""


class TopicTypes:
    """``await kind(topic)``: the topic's message type, asked of a master and kept a while."""

    def __init__(self, forwarder: Forwarder) -> None:
        self._forward = forwarder
        self._known: dict[str, tuple[TopicMessageType, int]] = {}
        """topic -> (its type, monotonic ms when learnt)"""

    async def kind(self, topic: str) -> TopicMessageType:
        client = self._forward.client
        now = client.now_ms()
        known = self._known.get(topic)
        if known is not None and now - known[1] < KEPT_S * 1000:
            return known[0]
        kind = await self._ask(topic)
        self._known[topic] = (kind, now)
        return kind

    async def _ask(self, topic: str) -> TopicMessageType:
        try:
            route = await self._forward.route(topic)
            names = sorted(d.broker_name for d in route.queue_datas)
            if not names:
                return TopicMessageType.MIXED
            answer = await self._forward.call(
                topic, names[0], MQRequestCode.GET_ALL_TOPIC_CONFIG, {}, deadline_s=3.0
            )
            table = json.loads(answer.response.body or b"{}").get("topicConfigTable") or {}
            value = table.get(topic) if isinstance(table, dict) else None
            if value is None:
                return TopicMessageType.MIXED
            return topic_message_type(TopicConfig.from_object(value, f"topic {topic}"))
        except (LedgerMQError, ValueError) as exc:
            _log.info("cannot tell the message type of topic %s (taking every type): %s",
                      topic, exc)  # fmt: skip
            return TopicMessageType.MIXED
