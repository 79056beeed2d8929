"""What the service's operations share: one object per broker, handed to each of them.

Holding the collaborators in one place keeps the constructors short and makes the broker's
parts visible at a glance; each operation still uses only what it needs. It holds state and
storage only: the message writer belongs to the service (``broker.service.message_writer``),
which uses this object, never the other way round.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledgermq.broker.errors import NotMasterError

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from ledgermq.broker.config import BrokerConfig
    from ledgermq.broker.state.metadata import BrokerMetadata
    from ledgermq.broker.state.metadata_writer import MetadataWriter
    from ledgermq.broker.state.queue_offsets import QueueOffsetTable
    from ledgermq.broker.state.topics import TopicManager
    from ledgermq.broker.storage.commitlog import CommitLog
    from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
    from ledgermq.broker.storage.dispatcher import Dispatcher
    from ledgermq.broker.storage.key_index import KeyIndex
    from ledgermq.clock import Clock

__all__ = ["BrokerRole", "BrokerState", "BrokerStats"]

_log = logging.getLogger(__name__)


class BrokerRole(enum.Enum):
    """The broker's role (RocketMQ ``BrokerRole``): only a master accepts writes."""

    MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass
class BrokerStats:
    """Counters for ``admin`` and metrics (RocketMQ's BrokerStatsManager, reduced)."""

    put_messages: dict[str, int] = field(default_factory=dict)
    put_bytes: dict[str, int] = field(default_factory=dict)
    get_messages: dict[str, int] = field(default_factory=dict)
    scheduler_dropped: dict[str, int] = field(default_factory=dict)
    """Undeliverable heads a scheduler skipped, by scheduler (``delay``, ``timer``, ...)."""

    def record_put(self, topic: str, count: int, size: int) -> None:
        self.put_messages[topic] = self.put_messages.get(topic, 0) + count
        self.put_bytes[topic] = self.put_bytes.get(topic, 0) + size

    def record_get(self, topic: str, count: int) -> None:
        self.get_messages[topic] = self.get_messages.get(topic, 0) + count

    def record_dropped(self, scheduler: str) -> None:
        self.scheduler_dropped[scheduler] = self.scheduler_dropped.get(scheduler, 0) + 1


@dataclass
class BrokerState:
    config: BrokerConfig
    clock: Clock
    commitlog: CommitLog
    metadata: BrokerMetadata
    writer: MetadataWriter
    topics: TopicManager
    queues: ConsumeQueueStore
    keys: KeyIndex
    dispatcher: Dispatcher
    queue_offsets: QueueOffsetTable
    stats: BrokerStats = field(default_factory=BrokerStats)
    role: BrokerRole = BrokerRole.SLAVE
    broker_id: int = -1
    """0 while master, selfId's number + 1 while slave, -1 before the first role event."""
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background; its failure is logged, never lost silently."""
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self._reap)

    def _reap(self, task: asyncio.Task[Any]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.warning("background task failed: %s", task.exception())

    def now_ms(self) -> int:
        return int(self.clock.wall_time_s() * 1000)

    @property
    def is_master(self) -> bool:
        return self.role is BrokerRole.MASTER

    def require_master(self, what: str) -> None:
        """Refuse a write on a slave: ``NotMasterError`` sends the client to the master."""
        if self.role is not BrokerRole.MASTER:
            raise NotMasterError(
                f"broker {self.config.broker_name} replica {self.config.dleger_self_id} is a "
                f"slave now; {what} goes to the master (look up the route again)"
            )
