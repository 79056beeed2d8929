"""Consumers: ``PullConsumer`` (the caller owns queues and offsets) and ``PushConsumer``
(queues are shared out in a group, messages are pulled and handed to a listener).

Push consumer, theory of operation (RocketMQ's ``DefaultMQPushConsumerImpl`` and
``RebalanceImpl``):

- **Rebalance** every ``rebalance_interval_s`` (20 s), at once when a broker says the group's
  members changed (NOTIFY_CONSUMER_IDS_CHANGED), and when a subscribed topic's route changes.
  Clustering: the group's client ids come from a broker of the topic (38) and
  ``allocate_averagely`` gives this client its share; broadcasting: every client takes every
  queue. Queues lost are *dropped* (pulling stops, in-flight consumption is given
  ``drop_wait_s`` to finish, the offset is committed, an orderly lock is released); queues won
  start at the committed offset (14) or, without one, where ``consume_from_where`` says.
- **Pulling**: one task per queue, long polling (SUSPEND, 15 s, request timeout 20 s), carrying
  the offset to commit (COMMIT_OFFSET) when there is one. Errors and timeouts back off 1-3 s and
  refresh the route: after a master failover the queue's group is the same, the new master is
  found by name, and the offsets carry on.
- **Offsets never skip an unconsumed message.** Each queue has a ``ProcessQueue`` of offsets in
  flight; the offset kept for the queue is the lowest one still in flight (or the next offset to
  pull). Committed to the broker (15) every ``persist_interval_s`` (5 s), when a queue is dropped
  and on shutdown (clustering), or to a local JSON file (broadcasting). Delivery is therefore
  at-least-once: after a crash or a rebalance, messages consumed after the last commit come again.
- **Concurrent listener**: batches of ``batch_size`` run concurrently, at most
  ``consume_concurrency`` (20) at a time over all queues (this also stops pulling when the
  listener is slow, with ``pull_threshold_per_queue`` per queue). RECONSUME_LATER (or an
  exception) sends each message back (36) to ``%RETRY%<group>``, which this consumer also
  subscribes to; if the send-back fails the batch is consumed again here after
  ``retry_local_delay_s``. A message is never dropped.
- **Orderly listener**: a queue is consumed only while this client holds the broker's lock on it
  (41, renewed every 20 s, considered lost after 30 s without renewal; released with 42 when the
  queue is dropped), one batch at a time, in offset order. RECONSUME_LATER retries the same batch
  after ``suspend_orderly_s`` (1 s), forever: nothing later in the queue is consumed before it.
- Sync listeners run in a thread pool (``consume_concurrency`` threads) so they cannot stall the
  event loop; ``async def`` listeners run on the loop. A listener that returns anything but
  ``ConsumeStatus.CONSUME_SUCCESS`` (including None) asked for the batch to be consumed later, as
  in RocketMQ. The result of a call that ends after its queue was dropped is ignored (neither
  committed nor sent back): the queue's next holder consumes those messages again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import inspect
import json
import logging
import os
import random
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ledgermq import __version__
from ledgermq.client import trace
from ledgermq.client._group_client import GroupClient
from ledgermq.client._queue_api import (
    PullResult,
    PullStatus,
    PullSysFlag,
    QueueApi,
    RecordsPullResult,
)
from ledgermq.client._remoting import ClientInstance
from ledgermq.client._routing import (
    MessageQueue,
    ProcessQueue,
    allocate_averagely,
    retry_topic,
    subscribe_queues,
)
from ledgermq.client._selector import MessageSelector, Subscription, as_selector
from ledgermq.client.trace import TRACE_TOPIC, TraceDispatcher
from ledgermq.errors import ConfigError, LedgerMQError, MQResponseError, TopicNotFoundError
from ledgermq.wire import MessageProperty, validate_topic
from ledgermq.wire.names import group_name_problem
from ledgermq.wire.route import MASTER_ID
from ledgermq.wire.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumerRunningInfo,
    QueueRunningInfo,
    SubscriptionInfo,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from ledgermq.client.credentials import Credentials
    from ledgermq.clock import Clock
    from ledgermq.net import Network, TlsClientConfig
    from ledgermq.wire import MessageExt

__all__ = [
    "ConsumeStatus",
    "Listener",
    "MessageSelector",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RecordsPullResult",
]

logger = logging.getLogger("ledgermq.client.consumer")

MESSAGE_MODELS: Final = ("CLUSTERING", "BROADCASTING")
CONSUME_FROM: Final = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)
_LOCK_MAX_LIVE_MS: Final = 30_000
"""``REBALANCE_LOCK_MAX_LIVE_TIME``: a lock not renewed for this long is presumed lost."""


class ConsumeStatus(enum.Enum):
    """What a listener says about a batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener: TypeAlias = (
    "Callable[[list[MessageExt]], ConsumeStatus | Awaitable[ConsumeStatus | None] | None]"
)


# ====================================================================== pull consumer
class PullConsumer(GroupClient):
    """A consumer whose caller chooses queues and offsets (RocketMQ's ``DefaultMQPullConsumer``).

    Every method talks to the broker of the queue's group (master, or a slave for reads while
    the group has none) and retries once after a route refresh when the broker fails.

    Args:
        group: the consumer group (offsets are stored per group).
        namesrv_addr: ``"host:port;host:port"``.
        request_timeout_s: timeout of one request (default 3 s).
        network, client_id, instance_name, clock: see ``ClientInstance``.
        credentials: sign every request with this ACL account (``aclEnable=true`` clusters).
        tls: dial the NameServers and brokers with TLS (``TlsClientConfig``: the CA to
            trust, a client certificate for mutual TLS); None: plain connections.
    """

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted (looked up at the NameServer now)."""
        validate_topic(topic)
        route = await self._client.topic_route(topic, refresh=True)
        return subscribe_queues(topic, route)

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: Subscription = "*",
        *,
        timeout_s: float | None = None,
        suspend_ms: int = 0,
    ) -> PullResult:
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` that match ``subscription``.

        ``subscription`` is a tag expression (``"*"``, ``"a || b"``) or a ``MessageSelector``
        (``MessageSelector.by_sql("a > 1")``: the broker filters by properties; a broker
        without SQL92 or a bad selector raises ``MQResponseError``). With ``suspend_ms`` > 0
        the broker holds the request until a message arrives or that many ms pass (long
        polling); otherwise it answers at once (NO_NEW_MSG when there is nothing).
        """
        sys_flag = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if suspend_ms > 0 else 0)
        timeout = timeout_s if timeout_s is not None else self.request_timeout_s
        return await self._api.pull(
            mq,
            offset,
            max_nums,
            subscription,
            sys_flag=sys_flag,
            suspend_ms=suspend_ms,
            timeout_s=timeout + suspend_ms / 1000,
        )

    async def pull_records(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: Subscription = "*",
        *,
        timeout_s: float | None = None,
    ) -> RecordsPullResult:
        """``pull`` without decoding: the records as the broker sent them, for readers that
        decode them their own way. Only the broker's tag-hash filter applies (check the tags
        again when ``subscription`` names any: different tags can share a hash)."""
        timeout = timeout_s if timeout_s is not None else self.request_timeout_s
        return await self._api.pull_records(mq, offset, max_nums, subscription, timeout_s=timeout)

    async def min_offset(self, mq: MessageQueue) -> int:
        """The lowest offset still stored in ``mq``."""
        return await self._api.min_offset(mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of ``mq`` will get (one past the last stored)."""
        return await self._api.max_offset(mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (epoch ms)."""
        return await self._api.search_offset(mq, timestamp_ms)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return await self._api.earliest_msg_store_time(mq)

    async def fetch_committed_offset(self, mq: MessageQueue) -> int | None:
        """The group's committed offset of ``mq``, None when it never committed one."""
        return await self._api.committed_offset(mq)

    async def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        """Store ``offset`` (the next offset to consume) as the group's offset of ``mq``."""
        if offset < 0:
            raise ValueError(f"an offset cannot be negative, got {offset}")
        await self._api.commit_offset(mq, offset)


# ====================================================================== push consumer
@dataclass(frozen=True, slots=True)
class _Subscription:
    topic: str
    selector: MessageSelector
    version: int

    def heartbeat_data(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "subString": self.selector.expression,
            "tagsSet": sorted(self.selector.tags or ()),
            "codeSet": sorted(self.selector.tag_codes),
            "subVersion": self.version,
            "expressionType": self.selector.expression_type,
            "classFilterMode": False,
        }


@dataclass(slots=True)
class _QueueState:
    """One queue this consumer holds."""

    mq: MessageQueue
    pq: ProcessQueue
    pull_task: asyncio.Task[None] | None = None
    consuming: set[asyncio.Task[Any]] = field(default_factory=set)
    retrying: set[asyncio.Task[None]] = field(default_factory=set)


class PushConsumer:
    """A consumer that shares a topic's queues within its group and calls a listener.

    See the module docstring for the behaviour. Args (defaults as RocketMQ's):

    Args:
        group: the consumer group.
        namesrv_addr: ``"host:port;host:port"``.
        message_model: ``"CLUSTERING"`` (each message to one member) or ``"BROADCASTING"``.
        consume_from_where: where a queue without committed offset starts:
            ``"CONSUME_FROM_LAST_OFFSET"`` (default; retry topics start at 0),
            ``"CONSUME_FROM_FIRST_OFFSET"`` or ``"CONSUME_FROM_TIMESTAMP"``.
        consume_timestamp: epoch ms for CONSUME_FROM_TIMESTAMP (default: 30 minutes ago).
        orderly: consume each queue in order, under the broker's lock.
        batch_size: messages per listener call (``consumeMessageBatchMaxSize``, 1).
        pull_batch_size: messages per pull (``pullBatchSize``, 32; up to 1024).
        max_reconsume_times: send-backs before the broker dead-letters a message (16).
        consume_concurrency: listener calls in flight over all queues (20).
        pull_threshold_per_queue: pulling of a queue pauses above this many unconsumed (1000).
        offset_store_path: broadcasting: the JSON file of local offsets (default
            ``~/.ledgermq_offsets/<instance_name or DEFAULT>/<group>/offsets.json``).
        suspend_timeout_ms: long-polling time of a pull (15 000); the request times out
            ``pull_timeout_s`` (20 s) after being sent.
        rebalance_interval_s, persist_interval_s, lock_interval_s, heartbeat_interval_s,
        route_refresh_interval_s: periods (20, 5, 20, 30, 30 s).
        backoff_s: range of the pause after a failed pull (1-3 s).
        retry_local_delay_s: pause before consuming again a batch whose send-back failed (5 s).
        suspend_orderly_s: pause before an orderly batch is retried (1 s).
        drop_wait_s: how long a dropped queue waits for its consumption in flight (3 s).
        network, client_id, instance_name, clock: see ``ClientInstance``.
        credentials: sign every request with this ACL account (``aclEnable=true`` clusters).
        tls: dial the NameServers and brokers with TLS (``TlsClientConfig``: the CA to
            trust, a client certificate for mutual TLS); None: plain connections.
        rng: randomness of the back-offs.
    """

    def __init__(  # noqa: PLR0915 - one assignment per setting
        self,
        group: str,
        namesrv_addr: str,
        *,
        message_model: str = "CLUSTERING",
        consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
        consume_timestamp: int | None = None,
        orderly: bool = False,
        batch_size: int = 1,
        pull_batch_size: int = 32,
        max_reconsume_times: int = 16,
        consume_concurrency: int = 20,
        pull_threshold_per_queue: int = 1000,
        offset_store_path: str | os.PathLike[str] | None = None,
        suspend_timeout_ms: int = 15_000,
        pull_timeout_s: float = 20.0,
        rebalance_interval_s: float = 20.0,
        persist_interval_s: float = 5.0,
        lock_interval_s: float = 20.0,
        heartbeat_interval_s: float = 30.0,
        route_refresh_interval_s: float = 30.0,
        backoff_s: tuple[float, float] = (1.0, 3.0),
        retry_local_delay_s: float = 5.0,
        suspend_orderly_s: float = 1.0,
        drop_wait_s: float = 3.0,
        request_timeout_s: float = 3.0,
        network: Network | None = None,
        client_id: str | None = None,
        instance_name: str | None = None,
        clock: Clock | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
        rng: random.Random | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str = TRACE_TOPIC,
    ) -> None:
        if (problem := group_name_problem(group)) is not None:
            raise ConfigError(f"consumer group: {problem}")  # Validators.checkGroup
        if message_model not in MESSAGE_MODELS:
            raise ConfigError(
                f"message_model must be one of {MESSAGE_MODELS}, not {message_model!r}"
            )
        if consume_from_where not in CONSUME_FROM:
            raise ConfigError(
                f"consume_from_where must be one of {CONSUME_FROM}, not {consume_from_where!r}"
            )
        if not 1 <= batch_size <= 1024 or not 1 <= pull_batch_size <= 1024:
            raise ConfigError("batch_size and pull_batch_size must be between 1 and 1024")
        if consume_concurrency < 1:
            raise ConfigError("consume_concurrency must be at least 1")
        self.group = group
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp
        self.orderly = orderly
        self.batch_size = batch_size
        self.pull_batch_size = pull_batch_size
        self.max_reconsume_times = max_reconsume_times
        self.consume_concurrency = consume_concurrency
        self.pull_threshold_per_queue = pull_threshold_per_queue
        self.suspend_timeout_ms = suspend_timeout_ms
        self.pull_timeout_s = pull_timeout_s
        self.rebalance_interval_s = rebalance_interval_s
        self.persist_interval_s = persist_interval_s
        self.lock_interval_s = lock_interval_s
        self.backoff_s = backoff_s
        self.retry_local_delay_s = retry_local_delay_s
        self.suspend_orderly_s = suspend_orderly_s
        self.drop_wait_s = drop_wait_s
        self._rng = rng if rng is not None else random.Random()  # noqa: S311 - back-off jitter
        self.trace: TraceDispatcher | None = (
            trace.dispatcher(
                trace_topic,
                namesrv_addr,
                network=network,
                clock=clock,
                credentials=credentials,
                tls=tls,
            )
            if enable_msg_trace
            else None
        )
        """The trace records' sender when ``enable_msg_trace`` (SubBefore / SubAfter)."""
        self._client = ClientInstance(
            namesrv_addr,
            credentials=credentials,
            tls=tls,
            client_id=client_id,
            instance_name=instance_name,
            network=network,
            clock=clock,
            request_timeout_s=request_timeout_s,
            route_refresh_interval_s=route_refresh_interval_s,
            heartbeat_interval_s=heartbeat_interval_s,
            rng=self._rng,
        )
        self._api = QueueApi(self._client, group)
        if offset_store_path is None:
            offset_store_path = (
                Path.home() / ".ledgermq_offsets" / (instance_name or "DEFAULT") / group
            ) / "offsets.json"
        self.offset_store_path = Path(offset_store_path)
        self._subs: dict[str, _Subscription] = {}
        self._listener: Listener | None = None
        self._is_async_listener = False
        self._queues: dict[MessageQueue, _QueueState] = {}
        # The offset kept for each queue held (next to consume) and the last one committed.
        self._offsets: dict[MessageQueue, int] = {}
        self._committed: dict[MessageQueue, int] = {}
        self._local_offsets: dict[MessageQueue, int] = {}
        self._semaphore = asyncio.Semaphore(consume_concurrency)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._rebalance_event = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._started_ms = 0
        self._closing = False
        #: Messages handed to the listener, batches sent back, batches retried locally.
        self.stats = {"consumed": 0, "sent_back": 0, "retried_locally": 0, "rebalances": 0}

    # ------------------------------------------------------------------ configuration
    @property
    def client_id(self) -> str:
        return self._client.client_id

    @property
    def clustering(self) -> bool:
        return self.message_model == "CLUSTERING"

    def subscribe(self, topic: str, expression: Subscription = "*") -> None:
        """Consume messages of ``topic`` whose tag matches ``expression`` (``"a || b"``, ``*``),
        or that a ``MessageSelector`` selects (``MessageSelector.by_sql("a > 1")``: filtered
        by the broker on message properties; ``start`` checks the brokers take it)."""
        validate_topic(topic)
        selector = as_selector(expression)
        version = self._client.wall_ms()
        self._subs[topic] = _Subscription(topic, selector, version)
        if self._started:
            self._rebalance_event.set()

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        if self._started:
            self._rebalance_event.set()

    def register_listener(self, listener: Listener) -> None:
        """``listener(messages) -> ConsumeStatus``, a plain or an ``async`` callable."""
        self._listener = listener
        self._is_async_listener = inspect.iscoroutinefunction(listener) or (
            inspect.iscoroutinefunction(getattr(listener, "__call__", None))  # noqa: B004
        )

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer holds now, sorted."""
        return sorted(self._queues)

    # ------------------------------------------------------------------ ConsumerHandle
    def heartbeat_data(self) -> dict[str, object]:
        return {
            "groupName": self.group,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [self._subs[t].heartbeat_data() for t in sorted(self._subs)],
            "unitMode": False,
        }

    def topics(self) -> Collection[str]:
        return self._subs.keys()

    def running_info(self) -> ConsumerRunningInfo:
        """What GET_CONSUMER_RUNNING_INFO answers (``mqadmin consumerStatus``): settings under
        RocketMQ's property names, subscriptions, and per queue held its offset, cache, lock and
        the times of its last pull and consumption. Built on request: nothing is kept for it."""
        properties = {
            PROP_CONSUME_TYPE: "CONSUME_PASSIVELY",
            PROP_CONSUME_ORDERLY: "true" if self.orderly else "false",
            PROP_CLIENT_VERSION: f"LedgerMQ {__version__}",
            PROP_CONSUMER_START_TIMESTAMP: str(self._started_ms),
            PROP_NAMESERVER_ADDR: ";".join(self._client.namesrv_addrs),
            PROP_THREADPOOL_CORE_SIZE: str(self.consume_concurrency),
            "consumerGroup": self.group,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "consumeMessageBatchMaxSize": str(self.batch_size),
            "pullBatchSize": str(self.pull_batch_size),
            "maxReconsumeTimes": str(self.max_reconsume_times),
            "pullThresholdForQueue": str(self.pull_threshold_per_queue),
        }
        queues = []
        # last_lock_ms is on the monotonic clock (lock expiry); the answer wants wall time
        mono_now, wall_now = self._client.now_ms(), self._client.wall_ms()
        for mq, state in sorted(self._queues.items()):
            pq = state.pq
            low, high = pq.cached_range()
            queues.append(
                QueueRunningInfo(
                    mq.topic,
                    mq.broker_name,
                    mq.queue_id,
                    commit_offset=self._offsets.get(mq, pq.consumed_offset),
                    cached_count=pq.count,
                    cached_min_offset=low,
                    cached_max_offset=high,
                    locked=pq.locked,
                    dropped=pq.dropped,
                    last_lock_ms=wall_now - (mono_now - pq.last_lock_ms) if pq.last_lock_ms else 0,
                    last_pull_ms=pq.last_pull_ms,
                    last_consume_ms=pq.last_consume_ms,
                )
            )
        return ConsumerRunningInfo(
            properties=properties,
            subscriptions=tuple(
                SubscriptionInfo(s.topic, s.selector.expression, s.selector.expression_type)
                for s in self._subs.values()
            ),
            queues=tuple(queues),
        )

    def on_consumer_ids_changed(self) -> None:
        self._rebalance_event.set()

    def on_route_changed(self, topic: str) -> None:
        self._rebalance_event.set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Look up routes, heartbeat, rebalance, and start pulling."""
        if self._started:
            return
        if self._listener is None:
            raise ConfigError("register a listener before starting the consumer")
        if not self._subs:
            raise ConfigError("subscribe to a topic before starting the consumer")
        self._started = True
        self._started_ms = self._client.wall_ms()
        if self.clustering:
            retry = retry_topic(self.group)
            if retry not in self._subs:
                self._subs[retry] = _Subscription(retry, MessageSelector.by_tag("*"), 0)
        else:
            self._local_offsets = self._load_local_offsets()
        if not self._is_async_listener:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.consume_concurrency, thread_name_prefix=f"consume-{self.group}"
            )
        self._client.consumers[self.group] = self
        await self._client.start()
        for topic in sorted(self._subs):
            try:
                await self._client.topic_route(topic)
            except TopicNotFoundError:
                # A new group's retry topic is made at its first heartbeat, just below: normal.
                level = logging.DEBUG if topic.startswith("%RETRY%") else logging.WARNING
                logger.log(level, "topic %s has no route yet; waiting for it", topic)
            except LedgerMQError as exc:
                logger.warning("route of %s: %s", topic, exc)
        try:
            await self._check_subscriptions()
        except MQResponseError:
            self._started = False
            self._client.consumers.pop(self.group, None)
            await self._client.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            raise
        await self._client.send_heartbeat()
        await self._rebalance()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._rebalance_loop(), name=f"rebalance {self.group}"),
            loop.create_task(self._persist_loop(), name=f"persist {self.group}"),
        ]
        if self.orderly and self.clustering:
            self._tasks.append(loop.create_task(self._lock_loop(), name=f"lock {self.group}"))

    async def _check_subscriptions(self) -> None:
        """Java's ``checkClientInBroker``: each broker of a SQL92 subscription's topic is asked
        (CHECK_CLIENT_CONFIG) whether it takes it; a refusal fails ``start`` with the broker's
        reason instead of a consumer that never receives anything."""
        for topic in sorted(self._subs):
            sub = self._subs[topic]
            route = self._client.cached_route(topic)
            if sub.selector.is_tag or route is None:
                continue
            for data in route.broker_datas:
                address = data.broker_addrs.get(MASTER_ID) or next(
                    iter(data.broker_addrs.values()), None
                )
                if address is None:
                    continue
                try:
                    await self._api.check_client_config(address, topic, sub.selector)
                except MQResponseError as exc:
                    raise MQResponseError(
                        f"broker {data.broker_name} ({address}) refuses the SQL92 subscription "
                        f"{sub.selector.expression!r} of {topic}: {exc}",
                        exc.code,
                        address,
                    ) from None

    async def shutdown(self) -> None:
        """Stop pulling, let consumption in flight finish, commit offsets, leave the group."""
        if self._closing:
            return
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._started:
            await asyncio.gather(*(self._drop(mq) for mq in list(self._queues)))
            await self._persist_all()
            self._client.consumers.pop(self.group, None)
            await self._client.unregister(consumer_group=self.group)
        if self.trace is not None:
            await self.trace.close()
        await self._client.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ rebalance
    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.rebalance_interval_s):
                    await self._rebalance_event.wait()
            self._rebalance_event.clear()
            try:
                await self._rebalance()
            except Exception:
                logger.exception("rebalance of %s failed; retrying later", self.group)

    async def rebalance_now(self) -> None:
        """Rebalance at once (tests, operators); normally it happens by itself."""
        await self._rebalance()

    async def _rebalance(self) -> None:
        async with self._rebalance_lock:
            if self._closing:
                return
            self.stats["rebalances"] += 1
            for topic in sorted(self._subs):
                wanted = await self._allocate(topic)
                if wanted is not None:
                    await self._update_queues(topic, wanted)
            for mq in [mq for mq in self._queues if mq.topic not in self._subs]:
                await self._drop(mq)

    async def _allocate(self, topic: str) -> set[MessageQueue] | None:
        """This client's queues of ``topic`` now; None when that cannot be known now."""
        route = self._client.cached_route(topic)
        if route is None:
            try:
                route = await self._client.topic_route(topic)
            except LedgerMQError as exc:
                logger.debug("no route for %s yet: %s", topic, exc)
                return None
        queues = subscribe_queues(topic, route)
        if not self.clustering:
            return set(queues)
        masters = sorted(
            (b.broker_name, addr)
            for b in route.broker_datas
            for i, addr in b.broker_addrs.items()
            if i == MASTER_ID
        )
        members = sorted({addr for b in route.broker_datas for addr in b.broker_addrs.values()})
        candidates = [a for _, a in masters] or members
        if not candidates:
            return None
        address = candidates[self._rng.randrange(len(candidates))]
        try:
            try:
                cids = await self._api.consumer_ids(address)
            except MQResponseError:  # a broker that knows none of the group refuses the list
                cids = []
            if self.client_id not in cids:  # the broker has not heard our heartbeat yet
                await self._client.send_heartbeat()
                cids = await self._api.consumer_ids(address)
        except LedgerMQError as exc:
            logger.info("consumer list of %s from %s failed: %s", self.group, address, exc)
            return None
        return set(allocate_averagely(self.client_id, cids, queues))

    async def _update_queues(self, topic: str, wanted: set[MessageQueue]) -> None:
        held = {mq for mq in self._queues if mq.topic == topic}
        for mq in sorted(held - wanted):
            logger.info("%s drops %s", self.client_id, mq)
            await self._drop(mq)
        added = sorted(wanted - held)
        if added and self.orderly and self.clustering:
            locked = await self._lock(added)
            added = [mq for mq in added if mq in locked]
        for mq in added:
            try:
                offset = await self._start_offset(mq)
            except LedgerMQError as exc:
                logger.info("cannot find where to start %s: %s; next rebalance", mq, exc)
                continue
            pq = ProcessQueue(offset)
            if self.orderly and self.clustering:
                pq.locked, pq.last_lock_ms = True, self._client.now_ms()
            state = _QueueState(mq, pq)
            self._queues[mq] = state
            self._offsets[mq] = offset
            state.pull_task = asyncio.get_running_loop().create_task(
                self._pull_loop(state), name=f"pull {mq}"
            )
            logger.info("%s takes %s from offset %d", self.client_id, mq, offset)

    async def _start_offset(self, mq: MessageQueue) -> int:
        """``computePullFromWhere``: the committed offset, else where consumption starts."""
        if self.clustering:
            stored = await self._api.committed_offset(mq)
        else:
            stored = self._local_offsets.get(mq)
        if stored is not None and stored >= 0:
            return stored
        is_retry = mq.topic.startswith("%RETRY%")
        if self.consume_from_where == "CONSUME_FROM_FIRST_OFFSET":
            return 0
        if self.consume_from_where == "CONSUME_FROM_LAST_OFFSET":
            return 0 if is_retry else await self._api.max_offset(mq)
        if is_retry:
            return await self._api.max_offset(mq)
        timestamp = self.consume_timestamp
        if timestamp is None:
            timestamp = self._client.wall_ms() - 30 * 60 * 1000
        return await self._api.search_offset(mq, timestamp)

    async def _drop(self, mq: MessageQueue) -> None:
        """Stop consuming ``mq``: stop pulling, wait a little for consumption, commit, unlock."""
        state = self._queues.pop(mq, None)
        if state is None:
            return
        if state.pull_task is not None:
            state.pull_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await state.pull_task
        for task in state.retrying:
            task.cancel()
        if state.consuming:
            await asyncio.wait(set(state.consuming), timeout=self.drop_wait_s)
        state.pq.dropped = True
        offset = state.pq.consumed_offset
        self._offsets[mq] = offset
        await self._persist(mq)
        self._offsets.pop(mq, None)
        self._committed.pop(mq, None)
        if self.orderly and self.clustering and state.pq.locked:
            try:
                await self._api.unlock([mq])
            except LedgerMQError as exc:
                logger.debug("unlock of %s failed: %s", mq, exc)

    # ------------------------------------------------------------------ pulling
    async def _pull_loop(self, state: _QueueState) -> None:
        mq, pq = state.mq, state.pq
        while not pq.dropped:
            if pq.count >= self.pull_threshold_per_queue:
                await asyncio.sleep(0.05)  # flow control: the listener is behind
                continue
            if self.orderly and self.clustering and not self._lock_valid(pq):
                locked = await self._lock([mq])
                if mq not in locked:
                    await asyncio.sleep(self.suspend_orderly_s)
                    continue
            sub = self._subs.get(mq.topic)
            if sub is None:
                return
            sys_flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
            commit = self._offsets.get(mq, -1) if self.clustering else -1
            if commit > 0:
                sys_flag |= PullSysFlag.COMMIT_OFFSET
            try:
                result = await self._api.pull(
                    mq,
                    pq.next_offset,
                    self.pull_batch_size,
                    sub.selector,
                    sys_flag=sys_flag,
                    commit_offset=commit,
                    suspend_ms=self.suspend_timeout_ms,
                    timeout_s=self.pull_timeout_s,
                    attempts=1,
                )
            except LedgerMQError as exc:
                logger.info("pull of %s failed: %s; backing off", mq, exc)
                self._client.request_route_refresh(mq.topic)
                await asyncio.sleep(self._rng.uniform(*self.backoff_s))
                continue
            if _dropped(state):  # while the pull was out
                return
            await self._handle_pull(state, result)

    async def _handle_pull(self, state: _QueueState, result: PullResult) -> None:
        mq, pq = state.mq, state.pq
        pq.last_pull_ms = self._client.wall_ms()
        status = result.status
        if status is PullStatus.FOUND:
            messages = [_reset_retry_topic(m) for m in result.messages]
            pq.put([m.queue_offset for m in messages], result.next_begin_offset)
            if messages:
                if self.orderly:
                    await self._consume_orderly(state, messages)
                else:
                    await self._dispatch(state, messages)
            else:
                self._update_offset(mq, pq)
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            pq.skip_to(result.next_begin_offset)
            self._update_offset(mq, pq)
        else:  # OFFSET_ILLEGAL: the offset is outside what the queue holds
            logger.warning(
                "offset %d of %s is illegal (queue holds %d..%d); moving to %d",
                pq.next_offset, mq, result.min_offset, result.max_offset,
                result.next_begin_offset,
            )  # fmt: skip
            pq.skip_to(result.next_begin_offset)
            self._update_offset(mq, pq)
            await self._persist(mq)

    def _update_offset(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if not pq.dropped and mq in self._queues:
            self._offsets[mq] = pq.consumed_offset

    # ------------------------------------------------------------------ consuming
    async def _call_listener(self, batch: list[MessageExt]) -> ConsumeStatus:
        if self.trace is None:
            return await self._listen(batch)
        request_id = uuid.uuid4().hex
        started = self._client.wall_ms()
        for message in batch:
            self.trace.submit(
                trace.sub_before(
                    timestamp_ms=started,
                    group=self.group,
                    request_id=request_id,
                    msg_id=message.msg_id,
                    retry_times=message.reconsume_times,
                    keys=message.properties.get(MessageProperty.KEYS, ""),
                ),
                message.msg_id,
            )
        status = await self._listen(batch)
        cost = self._client.wall_ms() - started
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        for message in batch:
            self.trace.submit(
                trace.sub_after(
                    request_id=request_id,
                    msg_id=message.msg_id,
                    cost_ms=cost,
                    success=ok,
                    keys=message.properties.get(MessageProperty.KEYS, ""),
                    context_code=0 if ok else 1,  # RocketMQ's SUCCESS / FAILED
                    timestamp_ms=started + cost,
                    group=self.group,
                ),
                message.msg_id,
            )
        return status

    async def _listen(self, batch: list[MessageExt]) -> ConsumeStatus:
        listener = self._listener
        assert listener is not None
        try:
            if self._is_async_listener:
                result: Any = await listener(batch)  # type: ignore[misc]
            elif self._executor is not None:
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(self._executor, listener, batch)
                if inspect.isawaitable(result):
                    result = await result
            else:
                result = listener(batch)
        except Exception:
            logger.exception("the listener of %s failed; the batch is consumed later", self.group)
            return ConsumeStatus.RECONSUME_LATER
        self.stats["consumed"] += len(batch)
        if result is ConsumeStatus.CONSUME_SUCCESS:
            return result
        return ConsumeStatus.RECONSUME_LATER

    async def _dispatch(self, state: _QueueState, messages: list[MessageExt]) -> None:
        loop = asyncio.get_running_loop()
        for i in range(0, len(messages), self.batch_size):
            batch = messages[i : i + self.batch_size]
            await self._semaphore.acquire()
            task = loop.create_task(self._consume_concurrently(state, batch))
            state.consuming.add(task)
            task.add_done_callback(state.consuming.discard)

    async def _consume_concurrently(self, state: _QueueState, batch: list[MessageExt]) -> None:
        """One listener call (the caller acquired the semaphore; released here)."""
        try:
            status = await self._call_listener(batch)
            if state.pq.dropped:
                # The queue was dropped (rebalance, shutdown) while the listener ran, and its
                # offset committed below this batch: whoever holds the queue next consumes
                # it again. Sending it back too would deliver it twice (RocketMQ's
                # ConsumeRequest ignores a dropped queue's result the same way).
                return
            done = batch
            if status is not ConsumeStatus.CONSUME_SUCCESS:
                done, failed = await self._send_back_all(state.mq, batch)
                if failed:
                    self._retry_later(state, failed)
            if done:
                self._consumed(state, done)
        finally:
            self._semaphore.release()

    def _consumed(self, state: _QueueState, messages: list[MessageExt]) -> None:
        state.pq.remove(m.queue_offset for m in messages)
        state.pq.last_consume_ms = self._client.wall_ms()
        self._update_offset(state.mq, state.pq)

    async def _send_back_all(
        self, mq: MessageQueue, batch: list[MessageExt]
    ) -> tuple[list[MessageExt], list[MessageExt]]:
        """Send each message back to the retry topic; (sent back, not sent back)."""
        if not self.clustering:
            return [], batch  # broadcasting has no retry topic: consume again here
        sent: list[MessageExt] = []
        failed: list[MessageExt] = []
        for message in batch:
            try:
                await self._api.send_back(
                    mq, message, delay_level=0, max_reconsume_times=self.max_reconsume_times
                )
            except LedgerMQError as exc:
                logger.info(
                    "send-back of %s failed: %s; consuming it again here", message.msg_id, exc
                )
                failed.append(message)
            else:
                sent.append(message)
        self.stats["sent_back"] += len(sent)
        return sent, failed

    def _retry_later(self, state: _QueueState, batch: list[MessageExt]) -> None:
        self.stats["retried_locally"] += 1
        again = [m._replace(reconsume_times=m.reconsume_times + 1) for m in batch]

        async def retry() -> None:
            await asyncio.sleep(self.retry_local_delay_s)
            if state.pq.dropped:
                return
            await self._semaphore.acquire()
            task = asyncio.get_running_loop().create_task(self._consume_concurrently(state, again))
            state.consuming.add(task)
            task.add_done_callback(state.consuming.discard)

        task = asyncio.get_running_loop().create_task(retry())
        state.retrying.add(task)
        task.add_done_callback(state.retrying.discard)

    async def _consume_orderly(self, state: _QueueState, messages: list[MessageExt]) -> None:
        """Consume ``messages`` one batch at a time, in order; a failed batch is retried."""
        pq = state.pq
        i = 0
        while i < len(messages):
            if pq.dropped:
                return
            if (
                self.clustering
                and not self._lock_valid(pq)
                and state.mq not in await self._lock([state.mq])
            ):
                await asyncio.sleep(self.suspend_orderly_s)
                continue
            batch = messages[i : i + self.batch_size]
            async with self._semaphore:
                task = asyncio.get_running_loop().create_task(self._call_listener(batch))
                state.consuming.add(task)
                task.add_done_callback(state.consuming.discard)
                status = await asyncio.shield(task)
            if status is ConsumeStatus.CONSUME_SUCCESS:
                self._consumed(state, batch)
                i += len(batch)
            else:
                self.stats["retried_locally"] += 1
                messages[i : i + len(batch)] = [
                    m._replace(reconsume_times=m.reconsume_times + 1) for m in batch
                ]
                await asyncio.sleep(self.suspend_orderly_s)

    # ------------------------------------------------------------------ orderly locks
    def _lock_valid(self, pq: ProcessQueue) -> bool:
        return pq.locked and self._client.now_ms() - pq.last_lock_ms < _LOCK_MAX_LIVE_MS

    async def _lock(self, mqs: Collection[MessageQueue]) -> set[MessageQueue]:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        held: set[MessageQueue] = set()
        now = self._client.now_ms()
        for broker_name in sorted(by_broker):
            group = by_broker[broker_name]
            try:
                locked = await self._api.lock(broker_name, group)
            except LedgerMQError as exc:
                logger.info("lock of %s at %s failed: %s", self.group, broker_name, exc)
                locked = set()
            for mq in group:
                state = self._queues.get(mq)
                if state is not None:
                    state.pq.locked = mq in locked
                    if mq in locked:
                        state.pq.last_lock_ms = now
            held |= locked
        return held

    async def _lock_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lock_interval_s)
            try:
                await self._lock(list(self._queues))
            except Exception:
                logger.exception("lock renewal of %s failed", self.group)

    # ------------------------------------------------------------------ offsets
    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_s)
            try:
                await self._persist_all()
            except Exception:
                logger.exception("offset persistence of %s failed", self.group)

    async def _persist(self, mq: MessageQueue) -> None:
        offset = self._offsets.get(mq)
        if offset is None:
            return
        if not self.clustering:
            self._local_offsets[mq] = offset
            self._save_local_offsets()
            return
        if self._committed.get(mq) == offset:
            return
        try:
            await self._api.commit_offset(mq, offset)
        except LedgerMQError as exc:
            logger.info("commit of offset %d of %s failed: %s", offset, mq, exc)
        else:
            self._committed[mq] = offset

    async def _persist_all(self) -> None:
        if not self.clustering:
            self._local_offsets.update(self._offsets)
            self._save_local_offsets()
            return
        for mq in sorted(self._offsets):
            await self._persist(mq)

    def _load_local_offsets(self) -> dict[MessageQueue, int]:
        try:
            data = json.loads(self.offset_store_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read offsets from {self.offset_store_path}: {exc}") from exc
        return {
            MessageQueue(row["topic"], row["brokerName"], int(row["queueId"])): int(row["offset"])
            for row in data.get("offsetTable", [])
        }

    def _save_local_offsets(self) -> None:
        rows = [
            {**mq.to_object(), "offset": offset}
            for mq, offset in sorted(self._local_offsets.items())
        ]
        path = self.offset_store_path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".offsets-")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump({"offsetTable": rows}, out)
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _dropped(state: _QueueState) -> bool:
    """``state.pq.dropped`` as a call: it changes while a coroutine waits."""
    return state.pq.dropped


def _reset_retry_topic(message: MessageExt) -> MessageExt:
    """A message from ``%RETRY%<group>`` shows its original topic (``resetRetryAndNamespace``)."""
    original = message.properties.get(MessageProperty.RETRY_TOPIC)
    if original and message.topic.startswith("%RETRY%"):
        return message._replace(topic=original)
    return message
