"""One broker replica: a ledger replica and the broker's stores, services, role and housekeeping.

Start-up follows spec-broker.md sections 2.2-2.5: open (recover) the ledger, the ConsumeQueues,
the key index and the metadata snapshot; drop queue units that point past the ledger's end;
dispatch everything committed; then serve. The role follows the ledger's (broker.role); the
NameServers hear of every change at once (broker.registration).

Why the replica is not a door: it knows no protocol. The doors (the remoting door,
``broker.remoting.door``; the gRPC door) speak to its ``services``; what they wait for (commits,
arrivals, its fail-stop) they learn through ``events`` (``broker.events``). The composition root,
``broker.server.BrokerServer``, builds a replica and wires its doors to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import shutil
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.events import ReplicaEvents
from ledgermq.broker.live_config import RETENTION_KEYS, LiveConfig
from ledgermq.broker.metrics import BrokerMetrics
from ledgermq.broker.registration import NameServerRegistrar
from ledgermq.broker.role import RoleHandler
from ledgermq.broker.service.admin import AdminService
from ledgermq.broker.service.clients import ClientService
from ledgermq.broker.service.message_writer import MessageWriter
from ledgermq.broker.service.offsets import OffsetService
from ledgermq.broker.service.pop import PopService
from ledgermq.broker.service.pull import PullService
from ledgermq.broker.service.retry import DelayScheduler, SendBackService
from ledgermq.broker.service.send import SendService
from ledgermq.broker.service.services import BrokerServices
from ledgermq.broker.service.timers import TimerService
from ledgermq.broker.service.trace import BrokerTracer
from ledgermq.broker.service.transactions import TransactionChecker, TransactionService
from ledgermq.broker.state.broker_state import BrokerState
from ledgermq.broker.state.metadata import SNAPSHOT_FILE, BrokerMetadata
from ledgermq.broker.state.metadata_writer import MetadataWriter
from ledgermq.broker.state.queue_offsets import QueueOffsetTable
from ledgermq.broker.state.timer_table import TIMER_TOPIC
from ledgermq.broker.state.topics import SCHEDULE_TOPIC, TopicManager
from ledgermq.broker.storage.commitlog import BODY_OFFSET, CommitLog
from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
from ledgermq.broker.storage.dispatch_checkpoint import (
    DispatchCheckpoint,
    flush_and_checkpoint,
    read_dispatch_checkpoint,
)
from ledgermq.broker.storage.dispatcher import Dispatcher
from ledgermq.broker.storage.key_index import INDEX_DIR, KeyIndex
from ledgermq.broker.storage.quarantine import QuarantineLog
from ledgermq.errors import (
    ConfigError,
    CorruptLogError,
    LedgerMQError,
    RequestRejectedError,
    StoreLockedError,
)
from ledgermq.ledger.metrics import LedgerMetrics
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import ConnectionPool
from ledgermq.store.segment import replace_file_durably

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ledgermq.broker.config import BrokerConfig
    from ledgermq.broker.service.client_registry import ConsumerManager
    from ledgermq.clock import Clock
    from ledgermq.net import Network
    from ledgermq.store import LogStore

__all__ = ["BrokerReplica"]

_log = logging.getLogger(__name__)

_HOUSEKEEPING_S: Final = 1.0
_SNAPSHOT_EVERY_S: Final = 10.0
_EXPIRE_EVERY_S: Final = 10.0
_DRAIN_S: Final = 0.5
"""How long closing lets the tracer store what it still holds."""


class BrokerReplica:
    """``await open()``, ``serve()`` once its doors listen, ``close`` in the phases
    ``BrokerServer.close`` calls them in (``release_lock`` last)."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        network: Network,
        clock: Clock,
        clients: ConsumerManager[Any],
        config_file: str | None = None,
    ) -> None:
        """``clients``: the broker's client registry (both doors feed it; the services and the
        housekeeping, which expires silent clients, use it); ``config_file``: the
        ``broker.conf`` it was started from, rewritten by ``update_config`` so a change outlives
        a restart."""
        self.config = config
        self._live_config = LiveConfig(config, config_file)
        self._network = network
        self._clock = clock
        self._clients = clients
        ledger_config = config.ledger_config()
        self.ledger = LedgerServer(
            ledger_config,
            network=network,
            clock=clock,
            metrics=LedgerMetrics(
                config.broker_cluster_name,
                config.broker_name,
                config.dleger_self_id,
                group=ledger_config.group,
            ),
        )
        self.metrics = BrokerMetrics(
            config.broker_cluster_name, config.broker_name, config.dleger_self_id, clock
        )
        """The broker's figures on the replica's ``/metrics`` (``broker.metrics``)."""
        self.metrics.register(self.ledger.metrics.registry)
        self.events = ReplicaEvents()
        """Commits, arrivals and the fail-stop, for whoever waits for them (``broker.events``)."""
        self.state: BrokerState | None = None
        self.services: BrokerServices | None = None
        """The protocol-neutral operations (``broker.service``), once opened."""
        self.connection_count: Callable[[], int] = lambda: 0
        """Clients connected to its doors, for the metrics (the assembly sets it)."""
        self._pool = ConnectionPool(network)
        self._registrar: NameServerRegistrar | None = None
        self._role: RoleHandler | None = None
        self._delay: DelayScheduler | None = None
        self._checker: TransactionChecker | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self._flushing: asyncio.Future[None] | None = None
        """The last flush handed to a thread (it runs on even if its awaiter is cancelled)."""
        self.failure: BaseException | None = None
        """Why the broker stopped on its own (its ledger store or its dispatcher failed), if it
        did: it is then closing, answers SERVICE_NOT_AVAILABLE, and the command exits with
        ``EXIT_STORE_FAILED``."""
        self._watch: asyncio.Task[None] | None = None
        self._lock_fd: int | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        """What it started in the background on a role change (``close`` waits, then cancels)."""

    # ================================================================== life cycle
    async def open(self) -> None:
        """Lock the store directory, start the ledger, recover the stores, dispatch what is
        committed, and make the services; from here on it follows commits."""
        config = self.config
        root = config.store_path_root_dir
        os.makedirs(root, exist_ok=True)
        self._lock_fd = _lock_root(root)
        await self.ledger.start()
        self._watch = asyncio.get_running_loop().create_task(self._watch_ledger())
        store = self.ledger.store
        # Recovery reads files and may re-dispatch much of the log: off the event loop, which
        # already runs the ledger replica (its heartbeats must not wait for us).
        metadata, queues, keys, dispatched = await asyncio.to_thread(
            _open_broker_stores, root, config, store
        )
        start_index = max(min(dispatched, metadata.applied_index) + 1, store.begin_index, 0)
        dispatcher = Dispatcher(
            store, queues, keys, metadata, self._clock, start_index=start_index,
            quarantine=QuarantineLog.in_root(root),
        )  # fmt: skip
        commitlog = CommitLog(self.ledger)
        writer = MetadataWriter(commitlog, dispatcher, metadata)
        topics = TopicManager(config, metadata, writer)
        state = BrokerState(
            config=config,
            clock=self._clock,
            commitlog=commitlog,
            metadata=metadata,
            writer=writer,
            topics=topics,
            queues=queues,
            keys=keys,
            dispatcher=dispatcher,
            queue_offsets=QueueOffsetTable(),
        )
        messages = MessageWriter(state)
        self.state = state
        done = await asyncio.to_thread(dispatcher.catch_up)
        _log.info("broker %s replica %s dispatched %d committed entries on start (up to %d)",
                  config.broker_name, config.dleger_self_id, done,
                  dispatcher.dispatched_index)  # fmt: skip
        # The rooms (DESIGN.md): the service's operations over state and storage.
        send_service = SendService(state, messages)
        services = BrokerServices(
            send=send_service,
            pull=PullService(state, self._clients.subscription),
            offsets=OffsetService(state),
            send_back=SendBackService(state, messages),
            clients=ClientService(state, self._clients),
            admin=AdminService(state, self.ledger),
            pop=PopService(state, messages),
            transactions=TransactionService(state, messages),
            timers=TimerService(state, messages),
            trace=BrokerTracer(state, send_service, config.msg_trace_topic_name)
            if config.trace_topic_enable
            else None,
        )
        self.services = services
        self._delay = DelayScheduler(state, messages)
        events = self.events
        events.subscribe_arrivals(services.pull)
        events.subscribe_arrivals(services.pop)
        events.subscribe_arrivals(self._delay, topic=SCHEDULE_TOPIC)
        events.subscribe_arrivals(services.timers, topic=TIMER_TOPIC)
        dispatcher.on_arrival = events.arrived
        dispatcher.on_failure = self._on_dispatch_failure
        # The commit listeners first (a door schedules the writing of the answers the commit
        # completed), then the dispatcher's, which schedules its pass: the answers go out
        # before the pass runs (20-30 µs on a 2-vCPU VM), and the messages are still
        # dispatched before anything that follows an answer can be served.
        for listener in events.take_commit_listeners():
            self.ledger.add_commit_listener(listener)
        self.ledger.add_commit_listener(dispatcher.on_commit)
        dispatcher.on_commit(store.committed_index)  # whatever committed during the catch-up

    def listening(self, *, listen_port: int | None = None, grpc_port: int | None = None) -> None:
        """A door listens on the port given: a configured port 0 becomes the one it got, so
        that the NameServers and the clients are told the real one."""
        state = self.state
        assert state is not None
        config = self.config
        if listen_port is not None and config.listen_port == 0:
            config = dataclasses.replace(config, listen_port=listen_port)
        if grpc_port is not None and config.grpc_server_port == 0:
            config = dataclasses.replace(config, grpc_server_port=grpc_port)
        self.config = state.config = config

    def serve(self) -> None:
        """Its doors listen: take the role, register with the NameServers, and start the
        housekeeping."""
        state = self.state
        assert state is not None
        self._registrar = NameServerRegistrar(state, self.ledger, self._pool)
        state.topics.on_topics_changed = self._topics_changed
        self._role = RoleHandler(state, self.ledger, self._on_master, self._on_slave)
        state.dispatcher.on_progress = self._role.check
        self.ledger.add_role_listener(self._role.on_role_change)
        self._role.follow_current_role()  # one taken before the listener was there
        self._registrar.start()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    def wake_waiters(self) -> None:
        """Closing: held pulls and waiting receives answer now (refusals, after a failure)."""
        if self.services is not None:
            self.services.pull.wake_all()
            self.services.pop.wake_all()

    async def close_trace(self) -> None:
        """Store what the tracer still holds, for at most ``_DRAIN_S``; what cannot be stored
        goes."""
        if self.services is not None and self.services.trace is not None:
            with contextlib.suppress(LedgerMQError, TimeoutError):
                await asyncio.wait_for(self.services.trace.close(), _DRAIN_S)

    async def stop_services(self) -> None:
        """Stop the schedulers, the role handler, the housekeeping and the registration (the
        NameServers are told it is gone)."""
        state = self.state
        if self._delay is not None:
            await self._delay.stop()
        if self._checker is not None:
            await self._checker.stop()
        if self.services is not None:
            await self.services.timers.stop()
        if self._role is not None:
            self._role.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        if self._registrar is not None:
            if state is not None and state.broker_id >= 0:
                await self._registrar.unregister_all()
            await self._registrar.close()

    async def close(self) -> None:
        """Cancel what still runs, close the ledger, flush and close the stores."""
        state = self.state
        for task in list(self.tasks) + (list(state.background) if state else []):
            task.cancel()
        if state is not None:
            await state.writer.close()
        await self.ledger.close()
        if self._watch is not None:
            await self._watch  # ends with the ledger
        if state is not None:
            try:
                await self._flush(snapshot=True)
            except Exception:  # noqa: BLE001 - close anyway; a restart re-dispatches from disk
                _log.exception("the broker's last flush failed")
            state.queues.close()
            state.keys.close()
        await self._pool.close()

    def release_lock(self) -> None:
        """Last of all (its doors' connections closed too): another broker may use the store
        directory from here on."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ================================================================== configuration
    async def update_config(self, body: bytes) -> str:
        """UPDATE_BROKER_CONFIG: the body's ``broker.conf`` keys, changed live (the keys of
        ``broker.live_config.LIVE_KEYS``) and written to the config file first; returns what
        was done. Raises ``ConfigError`` naming what and why when it is refused whole."""
        path = self._live_config.path
        try:
            updated, values = await self._live_config.update(self.config, body)
        except OSError as exc:
            raise ConfigError(f"not changed: cannot rewrite {path}: {exc.strerror or exc}") from exc
        self._apply_config(updated, values)
        where = f"; written to {path}" if path else (
            "; not persisted: this broker was started without a config file"
        )  # fmt: skip
        return f"updated {', '.join(sorted(values))}{where}"

    def _apply_config(self, config: BrokerConfig, values: Mapping[str, str]) -> None:
        """Put ``config`` in force: readers that take ``state.config`` on each use see it at
        once; the topic manager and the ledger store, which keep their own, are told."""
        self.config = config
        state = self.state
        assert state is not None
        state.config = config
        state.topics.reconfigure(config)
        if RETENTION_KEYS & values.keys():
            self.ledger.set_retention(config.ledger_config().retention)
        if "preferredLeaderId" in values:
            self.ledger.set_preferred_leaders(config.preferred_leader_ids)
        if "brokerPermission" in values and self._registrar is not None:
            self._registrar.register_soon()
        _log.info(
            "broker %s replica %s: config updated live: %s", config.broker_name,
            config.dleger_self_id, ", ".join(sorted(values)),
        )  # fmt: skip

    # ================================================================== fail-stop
    async def _watch_ledger(self) -> None:
        await self.ledger.wait_closed()
        if self.ledger.failure is not None:
            self._fail_stop("its ledger store failed", self.ledger.failure)

    def _on_dispatch_failure(self, exc: BaseException) -> None:
        self._fail_stop("dispatching committed entries to its queues failed", exc)

    def failed(self) -> BaseException | None:
        """The failure that stops this broker, noticed synchronously: the ledger records its
        own before it closes, and a request must not wait for the watcher to see it."""
        if self.failure is None and self.ledger.failure is not None:
            self._fail_stop("its ledger store failed", self.ledger.failure)
        return self.failure

    def _fail_stop(self, what: str, exc: BaseException) -> None:
        """Stop for good (README "Operations"): its queues no longer follow the log, so every
        answer from here on could be wrong; the failure listeners (its assembly) close it, the
        command exits with ``EXIT_STORE_FAILED`` and a supervisor restarts it, which recovers
        from disk and catches up from the peers."""
        if self.failure is not None:
            return
        self.failure = exc  # also while closing anyway: the exit status still says it
        _log.critical(
            "broker %s replica %s stops: %s (%s); it answers SERVICE_NOT_AVAILABLE until it "
            "exits. Free disk space or fix the disk, then restart it",
            self.config.broker_name, self.config.dleger_self_id, what, exc,
        )  # fmt: skip
        self.events.failed(exc)

    # ================================================================== roles
    def _on_master(self) -> None:
        assert self.state is not None
        assert self._delay is not None
        state = self.state
        self._spawn(self._promoted(state))

    async def _promoted(self, state: BrokerState) -> None:
        assert self._delay is not None
        assert self._registrar is not None
        try:
            await state.topics.ensure_system_topics()
        except (LedgerMQError, RequestRejectedError) as exc:
            _log.warning("system topics not created yet: %s", exc)
        if state.is_master:
            self._delay.start()
            if self._checker is None and self.services is not None:
                # Made on the first promotion: only a master checks back (issue 16 section 3),
                # over the channels its doors added to the transaction service.
                self._checker = TransactionChecker(state, self.services.transactions)
            if self._checker is not None:
                self._checker.start()
            if self.services is not None:
                self.services.timers.start()
        self._registrar.register_soon()

    def _on_slave(self) -> None:
        assert self.state is not None
        assert self._registrar is not None
        assert self._delay is not None
        self.state.writer.drop_staged()
        if self.services is not None:
            self.services.pop.wake_all()  # waiting receives answer NotMasterError now
        self._spawn(self._delay.stop())
        if self._checker is not None:
            self._spawn(self._checker.stop())
        if self.services is not None:
            self._spawn(self.services.timers.stop())
        self._registrar.register_soon()

    async def _topics_changed(self) -> None:
        """Register the changed topics at once and return when the NameServers took them, as
        the Java broker's ``registerBrokerAll`` after a topic is created: a client told of the
        topic (an admin's create, a heartbeat that made a retry topic) finds its route next."""
        if self._registrar is not None and not await self._registrar.register_all():
            self._registrar.register_soon()  # the registration loop retries

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ================================================================== housekeeping
    async def _housekeep(self) -> None:
        """Flush queues, index and checkpoint every second; snapshot metadata every 10 s;
        expire silent clients; follow ledger retention."""
        loop = asyncio.get_running_loop()
        next_snapshot = loop.time() + _SNAPSHOT_EVERY_S
        next_expiry = loop.time() + _EXPIRE_EVERY_S
        begin_index = -1
        while True:
            await asyncio.sleep(_HOUSEKEEPING_S)
            assert self.state is not None
            now = loop.time()
            try:
                snapshot = now >= next_snapshot
                await self._flush(snapshot=snapshot)
                if snapshot:
                    next_snapshot = now + _SNAPSHOT_EVERY_S
                clients = self._clients
                if now >= next_expiry:
                    next_expiry = now + _EXPIRE_EVERY_S
                    changed = clients.expire(self.state.now_ms())
                    clients.notify_changed(changed)
                self.metrics.refresh(
                    self.state,
                    self.ledger.store.committed_index,
                    {g: len(info.members) for g, info in clients.groups.items()},
                    self.connection_count(),
                )
                store = self.ledger.store
                if store.begin_index != begin_index and store.begin_index > 0:
                    begin_index = store.begin_index
                    first = store.positions(begin_index, begin_index)[0] + BODY_OFFSET
                    self.state.queues.delete_expired(first)
                    self.state.keys.delete_expired(first)
            except Exception:  # noqa: BLE001 - housekeeping must go on; the next pass retries
                _log.exception("broker housekeeping failed")

    async def _flush(self, *, snapshot: bool) -> None:
        """Queues and index first, then the checkpoint that says they are complete (in a
        thread: msync and fsync must not stall the loop). What is captured here, on the loop,
        is what the files are known to contain once flushed.

        One pass at a time: cancelling the awaiting task (``close`` cancels housekeeping) does
        not stop the thread, so a pass waits for one still running first. Two at once would
        write the same temporary checkpoint and snapshot files and could leave a mix of both.
        """
        state = self.state
        assert state is not None
        async with self._flush_lock:
            running = self._flushing
            if running is not None and not running.done():
                try:
                    await asyncio.shield(running)
                except Exception:  # noqa: BLE001 - its caller is gone; this pass redoes it
                    _log.warning("an interrupted broker flush failed", exc_info=True)
            # After a failure the dispatcher may have counted entries whose keys it could not
            # index: keep the last checkpoint written while healthy (re-dispatch is harmless).
            checkpoint = (
                DispatchCheckpoint(state.dispatcher.dispatched_index)
                if self.failure is None
                else None
            )
            image = state.metadata.snapshot() if snapshot else None
            root = self.config.store_path_root_dir
            work = asyncio.ensure_future(
                asyncio.to_thread(self._write_durably, root, checkpoint, image)
            )
            self._flushing = work
            await asyncio.shield(work)

    def _write_durably(
        self, root: str, checkpoint: DispatchCheckpoint | None, metadata_image: bytes | None
    ) -> None:
        state = self.state
        assert state is not None
        if checkpoint is None:
            state.queues.flush_all()
            state.keys.flush()
        else:
            flush_and_checkpoint(root, checkpoint, state.queues, state.keys)
        if metadata_image is not None:
            replace_file_durably(os.path.join(root, "config"), SNAPSHOT_FILE, metadata_image)


def _open_broker_stores(
    root: str, config: BrokerConfig, store: LogStore
) -> tuple[BrokerMetadata, ConsumeQueueStore, KeyIndex, int]:
    """Metadata snapshot, queues and key index, recovered and trimmed to the ledger
    (spec-broker 2.2-2.3); also the ledger index dispatch had made durable."""
    metadata = BrokerMetadata()
    config_dir = os.path.join(root, "config")
    os.makedirs(config_dir, exist_ok=True)
    metadata.load(config_dir)
    queues = ConsumeQueueStore(root, units_per_file=config.mapped_file_size_consume_queue // 20)
    queues.load()
    dispatched = read_dispatch_checkpoint(root).dispatched_index
    try:
        keys = KeyIndex(root)
    except CorruptLogError as exc:
        # The index is derived data: rebuild it from the commit log rather than refuse to
        # start (a damaged file, or one of an older format). Re-dispatching from the start
        # rewrites identical queue units and skips metadata the snapshot already has.
        _log.warning("key index unusable (%s); rebuilding it from the commit log", exc)
        shutil.rmtree(os.path.join(root, INDEX_DIR), ignore_errors=True)
        keys = KeyIndex(root)
        dispatched = -1
    # Units that point past the ledger's end describe entries this replica no longer has
    # (RocketMQ's truncateDirtyLogicFiles, spec-broker 2.3 step 4); re-dispatch rebuilds
    # whatever is still committed.
    queues.truncate_dirty(store.write_pos + BODY_OFFSET)
    keys.truncate_dirty(store.write_pos + BODY_OFFSET)
    if store.begin_index > 0:
        first = store.positions(store.begin_index, store.begin_index)[0] + BODY_OFFSET
        queues.delete_expired(first)
        keys.delete_expired(first)
    return metadata, queues, keys, dispatched


def _lock_root(root: str) -> int:
    """RocketMQ's ``<storePathRootDir>/lock``: one broker per store directory."""
    fd = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLockedError(
            f"another broker is using {root} (its lock file is held); give each replica its "
            "own storePathRootDir"
        ) from None
    return fd
