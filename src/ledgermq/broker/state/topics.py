"""Topic and subscription-group rules: auto-creation, retry and dead-letter topics, permissions.

RocketMQ semantics (protocol-remoting-and-grpc.md sections 2.5, 2.7 and 2.9): a producer that
finds no route for a topic sends with ``defaultTopic=TBW102``; a broker with
``autoCreateTopicEnable`` creates the topic then, with the client's queue count capped by
``defaultTopicQueueNums``. A consumer group gets its retry topic ``%RETRY%<group>`` when its
first heartbeat arrives, and its dead-letter topic ``%DLQ%<group>`` when a message first runs out
of retries. Every creation is a metadata change through the ledger (broker.state.metadata), so all
replicas have it and a new master keeps it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import NoSuchGroupError, NoSuchTopicError, NotStoredError
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.state.group_config import SubscriptionGroupConfig
from ledgermq.broker.state.ops import PutGroupOp, PutTopicOp
from ledgermq.wire.route import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.broker.config import BrokerConfig
    from ledgermq.broker.state.metadata import BrokerMetadata
    from ledgermq.broker.state.metadata_writer import MetadataWriter

__all__ = [
    "AUTO_CREATE_TOPIC",
    "DLQ_PREFIX",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "TopicManager",
    "dlq_topic",
    "retry_topic",
]

_log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC: Final = "TBW102"
"""RocketMQ's ``AUTO_CREATE_TOPIC_KEY_TOPIC``: its route tells clients that brokers create
topics on first use."""
RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
"""Delayed messages wait in this topic, one queue per delay level, until they are due."""


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


class TopicManager:
    """Looks up and creates topics and groups; creation is deduplicated while in flight."""

    def __init__(
        self, config: BrokerConfig, metadata: BrokerMetadata, writer: MetadataWriter
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._writer = writer
        self._creating: dict[str, asyncio.Future[None]] = {}
        self.on_topics_changed: Callable[[], Awaitable[None]] | None = None
        """Re-registers with the NameServers, so routes show a new topic at once."""

    def reconfigure(self, config: BrokerConfig) -> None:
        """Use ``config`` from now on (UPDATE_BROKER_CONFIG changed ``autoCreateTopicEnable``,
        ``autoCreateSubscriptionGroup`` or ``defaultTopicQueueNums``)."""
        self._config = config

    def find(self, topic: str) -> TopicConfig | None:
        return self._metadata.topics.get(topic)

    @property
    def topics(self) -> dict[str, TopicConfig]:
        return self._metadata.topics

    # ------------------------------------------------------------------ topics
    async def ensure_for_send(
        self, topic: str, default_topic: str | None, default_queue_nums: int
    ) -> TopicConfig:
        """The topic a producer sends to, created now if the rules allow it."""
        found = self.find(topic)
        if found is not None:
            return found
        if topic.startswith(RETRY_PREFIX):
            return await self.create(TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE))
        template = self.find(default_topic) if default_topic else None
        allowed = self._config.auto_create_topic_enable and (
            template is None or template.perm & PERM_INHERIT or default_topic == AUTO_CREATE_TOPIC
        )
        if not allowed:
            raise NoSuchTopicError(
                f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable is off)"
            )
        queues = max(1, min(default_queue_nums or 4, self._config.default_topic_queue_nums))
        _log.info("creating topic %s with %d queues on first send", topic, queues)
        return await self.create(TopicConfig(topic, queues, queues, PERM_READ | PERM_WRITE))

    async def create(self, config: TopicConfig) -> TopicConfig:
        """Create or update a topic through the ledger; returns the applied config.

        Raises ``InvalidTopicError`` for a name no replica could index: the last check before
        the ledger, whichever door or service asked (``broker.names``)."""
        name = require_topic_name(config.topic_name)
        pending = self._creating.get(name)
        if pending is not None and self.find(name) is None:
            await asyncio.shield(pending)
        else:
            future = asyncio.ensure_future(self._writer.submit(PutTopicOp(config)))
            self._creating[name] = future
            try:
                await asyncio.shield(future)
            finally:
                if self._creating.get(name) is future:
                    del self._creating[name]
            if self.on_topics_changed is not None:
                await self.on_topics_changed()
        created = self.find(name)
        if created is None:
            raise NotStoredError(f"topic {name} was not created")
        return created

    async def ensure_retry_topic(self, group: str) -> TopicConfig:
        name = retry_topic(require_group_name(group))
        found = self.find(name)
        if found is not None:
            return found
        queues = self.group(group).retry_queue_nums
        return await self.create(TopicConfig(name, queues, queues, PERM_READ | PERM_WRITE))

    async def ensure_dlq_topic(self, group: str) -> TopicConfig:
        name = dlq_topic(require_group_name(group))
        found = self.find(name)
        if found is not None:
            return found
        return await self.create(TopicConfig(name, 1, 1, PERM_READ | PERM_WRITE))

    async def ensure_system_topics(self) -> None:
        """On becoming master: TBW102 (when auto-creation is on), the trace topic (when
        ``traceTopicEnable``, one queue as RocketMQ's) and the delay-level topic."""
        levels = len(self._config.delay_levels_ms)
        if self._config.auto_create_topic_enable and self.find(AUTO_CREATE_TOPIC) is None:
            queues = self._config.default_topic_queue_nums
            await self.create(
                TopicConfig(
                    AUTO_CREATE_TOPIC, queues, queues, PERM_INHERIT | PERM_READ | PERM_WRITE
                )
            )
        trace = self._config.msg_trace_topic_name
        if self._config.trace_topic_enable and self.find(trace) is None:
            await self.create(TopicConfig(trace, 1, 1, PERM_READ | PERM_WRITE))
        schedule = self.find(SCHEDULE_TOPIC)
        if schedule is None or schedule.read_queue_nums != levels:
            await self.create(TopicConfig(SCHEDULE_TOPIC, levels, levels, PERM_READ | PERM_WRITE))

    # ------------------------------------------------------------------ groups
    def group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config, or the defaults a new group would get."""
        return self._metadata.groups.get(name) or SubscriptionGroupConfig(name)

    async def ensure_group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config, created now if ``autoCreateSubscriptionGroup`` allows it and the
        broker holds fewer than ``autoCreateGroupMax`` groups (a client naming ever new groups
        must not grow the replicated metadata without bound: issue 25, item 12)."""
        found = self._metadata.groups.get(name)
        if found is not None:
            return found
        require_group_name(name)
        if not self._config.auto_create_subscription_group:
            raise NoSuchGroupError(
                f"subscription group [{name}] does not exist (autoCreateSubscriptionGroup is off)"
            )
        limit = self._config.auto_create_group_max
        if len(self._metadata.groups) >= limit:
            raise NoSuchGroupError(
                f"subscription group [{name}] does not exist and is not created automatically: "
                f"the broker holds {len(self._metadata.groups)} groups, autoCreateGroupMax is "
                f"{limit} (create it with updateSubGroup)"
            )
        await self.put_group(SubscriptionGroupConfig(name))
        return self.group(name)

    async def put_group(self, config: SubscriptionGroupConfig) -> None:
        """Create or update a group through the ledger (``InvalidGroupError`` for a name
        whose retry or dead-letter topic could not be stored)."""
        key = "group:" + require_group_name(config.group_name)
        pending = self._creating.get(key)
        if pending is not None:
            await asyncio.shield(pending)
            return
        future = asyncio.ensure_future(self._writer.submit(PutGroupOp(config)))
        self._creating[key] = future
        try:
            await asyncio.shield(future)
        finally:
            if self._creating.get(key) is future:
                del self._creating[key]
