"""Blocking facades of the asyncio clients, for threads (the CLI, Spark executors).

Each facade owns a private event loop running in its own daemon thread and forwards every call
to the async client on that loop (STYLE.md section 7.3: no second, generated sync client). The
methods may be called from any thread, concurrently; they block the caller until the answer.
Calling one from inside a listener that runs *on the facade's loop* would deadlock and raises
RuntimeError instead (sync listeners run in worker threads, where calls are fine). ``close()``
(or its other name ``shutdown()``, which every facade has too) shuts the client down and stops
the thread; the facades are context managers that start on enter and close on exit. A facade
never closed is closed quietly, within a few seconds, when it is garbage-collected or at
interpreter exit (an ``atexit`` hook), so a script that forgets ``close()`` still exits cleanly.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ledgermq.client.admin import Admin, ConsumerProgress, QueueStats
from ledgermq.client.consumer import PullConsumer, PushConsumer
from ledgermq.client.producer import Producer

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence

    from ledgermq.client._routing import MessageQueue
    from ledgermq.client._selector import Subscription
    from ledgermq.client.consumer import Listener, PullResult, RecordsPullResult
    from ledgermq.client.producer import Message, SendResult
    from ledgermq.wire import MessageExt
    from ledgermq.wire.route import ClusterInfo, TopicRouteData

__all__ = ["SyncAdmin", "SyncProducer", "SyncPullConsumer", "SyncPushConsumer"]

logger = logging.getLogger("ledgermq.client.blocking")

T = TypeVar("T")
C = TypeVar("C")


_EXIT_CLOSE_TIMEOUT_S: Final = 5.0
"""How long closing a facade someone forgot may take, at exit or when it is collected: the
client unregisters from its brokers, bounded so that a dead cluster cannot hold the exit."""


class _LoopThread:
    """An event loop in a daemon thread, and a way to run coroutines on it and wait."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._lock = threading.Lock()

    @property
    def on_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if self.on_loop_thread:
            coro.close()
            raise RuntimeError(
                "a blocking client method was called on the client's own event loop; "
                "it would wait for itself forever"
            )
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()  # cancels the task on the loop too
            raise

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop; its future (``cancel()`` cancels it there too)."""
        if self._loop.is_closed():
            coro.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def build(self, factory: Callable[[], C]) -> C:
        """``factory()`` called on the loop thread (objects that may touch the running loop)."""

        async def make() -> C:
            return factory()

        return self.run(make())

    def stop(self, timeout_s: float | None = None) -> None:
        """Cancel what still runs on the loop, stop it, join the thread and close the loop.

        From the loop's own thread (a listener closing its client) the loop is only stopped:
        it cannot be closed while it runs this very call. If the thread does not end within
        ``timeout_s`` the loop is left open rather than closed under a running thread.
        """
        with self._lock:
            if self._loop.is_closed():
                return
            if self.on_loop_thread:
                self._loop.stop()
                return
            if self._thread.is_alive():
                with contextlib.suppress(Exception):
                    self.run(_cancel_other_tasks(), timeout_s)
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout_s)
            if not self._thread.is_alive():
                self._loop.close()

    @property
    def closed(self) -> bool:
        return self._loop.is_closed()


async def _cancel_other_tasks() -> None:
    """Cancel every task of the running loop but this one, and wait for them to end (what
    ``asyncio.run`` does before closing its loop), so none is destroyed while pending."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_open_facades: weakref.WeakSet[_Facade] = weakref.WeakSet()


@atexit.register
def _close_forgotten_facades() -> None:
    """Close, quietly, every facade still open at interpreter exit.

    atexit runs while the facades' daemon threads still run their loops; later, when the
    interpreter collects the objects, those threads are frozen and nothing can be closed
    cleanly (that was ``RuntimeError: Cannot close a running event loop`` from ``__del__``).
    """
    for facade in list(_open_facades):
        facade._close_quietly(_EXIT_CLOSE_TIMEOUT_S)


class _Facade:
    _name = "ledgermq-client"

    def __init__(self) -> None:
        self._runner = _LoopThread(self._name)
        _open_facades.add(self)

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return self._runner.run(coro, timeout_s)

    async def _aclose(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Shut the client down and stop its thread. Safe to call twice."""
        if self._runner.closed:
            return
        _open_facades.discard(self)
        try:
            self._run(self._aclose())
        finally:
            self._runner.stop()

    def shutdown(self) -> None:
        """``close()``, under the name the asyncio clients (and RocketMQ's) use."""
        self.close()

    def _close_quietly(self, timeout_s: float) -> None:
        """``close()`` for a facade nobody closed: bounded, and errors are only logged."""
        _open_facades.discard(self)
        runner = self._runner
        if runner.closed:
            return
        if runner.on_loop_thread:
            runner.stop()
            return
        try:
            runner.run(self._aclose(), timeout_s)
        except Exception as exc:  # noqa: BLE001 - nobody is left to handle it
            logger.debug("closing a forgotten %s failed: %r", type(self).__name__, exc)
        finally:
            runner.stop(timeout_s)

    def __del__(self) -> None:  # a forgotten close() must not leave a thread behind
        runner = getattr(self, "_runner", None)
        if runner is None or runner.closed or sys.is_finalizing():
            return  # while finalizing, the loop's daemon thread can no longer run
        self._close_quietly(_EXIT_CLOSE_TIMEOUT_S)


class SyncProducer(_Facade):
    """``Producer`` with blocking methods; same arguments. Call ``start()`` (or use ``with``)."""

    _name = "ledgermq-producer"

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__()
        try:
            self._producer = self._runner.build(lambda: Producer(group, namesrv_addr, **options))
        except BaseException:
            self._runner.stop()
            raise

    @property
    def producer(self) -> Producer:
        """The async producer (use it only on its own loop)."""
        return self._producer

    def start(self) -> None:
        self._run(self._producer.start())

    async def _aclose(self) -> None:
        await self._producer.shutdown()

    def send(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        queue: MessageQueue | None = None,
        flag: int = 0,
    ) -> SendResult:
        return self._run(
            self._producer.send(
                topic, body, tags=tags, keys=keys, properties=properties, queue=queue, flag=flag
            )
        )

    def send_oneway(self, topic: str, body: bytes, **options: Any) -> None:
        self._run(self._producer.send_oneway(topic, body, **options))

    def send_batch(
        self,
        topic: str,
        messages: Sequence[bytes | Message],
        *,
        queue: MessageQueue | None = None,
    ) -> SendResult:
        return self._run(self._producer.send_batch(topic, messages, queue=queue))

    def send_orderly(
        self, topic: str, body: bytes, sharding_key: str, **options: Any
    ) -> SendResult:
        return self._run(self._producer.send_orderly(topic, body, sharding_key, **options))

    def __enter__(self) -> SyncProducer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncPullConsumer(_Facade):
    """``PullConsumer`` with blocking methods; same arguments."""

    _name = "ledgermq-pull-consumer"

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__()
        try:
            self._consumer = self._runner.build(
                lambda: PullConsumer(group, namesrv_addr, **options)
            )
        except BaseException:
            self._runner.stop()
            raise

    def start(self) -> None:
        self._run(self._consumer.start())

    async def _aclose(self) -> None:
        await self._consumer.shutdown()

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._consumer.fetch_queues(topic))

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        subscription: Subscription = "*",
        *,
        timeout_s: float | None = None,
        suspend_ms: int = 0,
    ) -> PullResult:
        return self._run(
            self._consumer.pull(
                mq, offset, max_nums, subscription, timeout_s=timeout_s, suspend_ms=suspend_ms
            )
        )

    def submit_pull_records(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, subscription: Subscription = "*"
    ) -> concurrent.futures.Future[RecordsPullResult]:
        """``PullConsumer.pull_records``, started on the client's loop without waiting: the one
        call here that does not block, for readers that keep several pulls in flight (the
        Spark connector) without a thread per pull. ``result()`` waits; ``cancel()`` drops it.
        """
        return self._runner.submit(self._consumer.pull_records(mq, offset, max_nums, subscription))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self._consumer.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self._consumer.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._consumer.search_offset(mq, timestamp_ms))

    def fetch_committed_offset(self, mq: MessageQueue) -> int | None:
        return self._run(self._consumer.fetch_committed_offset(mq))

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._consumer.commit_offset(mq, offset))

    def __enter__(self) -> SyncPullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncPushConsumer(_Facade):
    """``PushConsumer`` driven from a thread; the listener runs in the consumer's worker threads.

    ``subscribe`` and ``register_listener`` before ``start``.
    """

    _name = "ledgermq-push-consumer"

    def __init__(self, group: str, namesrv_addr: str, **options: Any) -> None:
        super().__init__()
        try:
            self._consumer = self._runner.build(
                lambda: PushConsumer(group, namesrv_addr, **options)
            )
        except BaseException:
            self._runner.stop()
            raise

    @property
    def client_id(self) -> str:
        return self._consumer.client_id

    def subscribe(self, topic: str, expression: Subscription = "*") -> None:
        async def go() -> None:
            self._consumer.subscribe(topic, expression)

        self._run(go())

    def register_listener(self, listener: Listener) -> None:
        self._consumer.register_listener(listener)

    def start(self) -> None:
        self._run(self._consumer.start())

    async def _aclose(self) -> None:
        await self._consumer.shutdown()

    def assigned_queues(self) -> list[MessageQueue]:
        async def go() -> list[MessageQueue]:
            return self._consumer.assigned_queues()

        return self._run(go())

    def __enter__(self) -> SyncPushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncAdmin(_Facade):
    """``Admin`` with blocking methods; same arguments."""

    _name = "ledgermq-admin"

    def __init__(self, namesrv_addr: str, **options: Any) -> None:
        super().__init__()
        try:
            self._admin = self._runner.build(lambda: Admin(namesrv_addr, **options))
            self._run(self._admin.start())
        except BaseException:
            self._runner.stop()
            raise

    async def _aclose(self) -> None:
        await self._admin.close()

    def cluster_info(self) -> ClusterInfo:
        return self._run(self._admin.cluster_info())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._run(self._admin.topic_route(topic))

    def topic_list(self) -> list[str]:
        return self._run(self._admin.topic_list())

    def auto_create_queue_nums(self) -> dict[str, int]:
        return self._run(self._admin.auto_create_queue_nums())

    def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        cluster: str | None = None,
        broker_names: Iterable[str] | None = None,
        perm: int = 6,
        order: bool = False,
        attributes: str | None = None,
        wait_s: float = 0.0,
        route_timeout_s: float = 10.0,
    ) -> list[str]:
        """``Admin.create_topic``: returns once every NameServer routes the topic."""
        return self._run(
            self._admin.create_topic(
                topic,
                queue_nums,
                cluster=cluster,
                broker_names=broker_names,
                perm=perm,
                order=order,
                attributes=attributes,
                wait_s=wait_s,
                route_timeout_s=route_timeout_s,
            )
        )

    def wait_for_route(
        self, topic: str, broker_names: Iterable[str] = (), timeout_s: float = 10.0
    ) -> TopicRouteData:
        return self._run(self._admin.wait_for_route(topic, broker_names, timeout_s))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        self._run(self._admin.delete_topic(topic, cluster=cluster))

    def topic_stats(self, topic: str) -> list[QueueStats]:
        return self._run(self._admin.topic_stats(topic))

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ConsumerProgress]:
        return self._run(self._admin.consumer_progress(group, topic))

    def broker_runtime_info(self, address: str) -> dict[str, str]:
        return self._run(self._admin.broker_runtime_info(address))

    def transfer_leadership(self, broker_name: str, to_self_id: str) -> None:
        self._run(self._admin.transfer_leadership(broker_name, to_self_id))

    def view_message(self, offset_msg_id: str) -> MessageExt:
        return self._run(self._admin.view_message(offset_msg_id))

    def find_message(self, msg_id: str, **options: Any) -> list[MessageExt]:
        return self._run(self._admin.find_message(msg_id, **options))

    def query_message(self, topic: str, key: str, **options: Any) -> list[MessageExt]:
        return self._run(self._admin.query_message(topic, key, **options))

    def __enter__(self) -> SyncAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
