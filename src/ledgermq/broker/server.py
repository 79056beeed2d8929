"""One broker replica: a ledger replica, the broker's stores, and RocketMQ's remoting protocol.

Start-up follows spec-broker.md sections 2.2-2.5: open (recover) the ledger, the ConsumeQueues,
the key index and the metadata snapshot; drop queue units that point past the ledger's end;
dispatch everything committed; then serve. The role follows the ledger's (broker.role); the
NameServers hear of every change at once (broker.registration).

Every request gets an answer unless it is one-way: a refusal answers with its RocketMQ code and
a remark that says why, a malformed request with SYSTEM_ERROR, an unknown code with
REQUEST_CODE_NOT_SUPPORTED, and an unexpected failure with SYSTEM_ERROR after it is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from ledgermq.acl import Needs, header_needs, heartbeat_needs, lock_needs, send_needs
from ledgermq.broker.errors import ServiceError
from ledgermq.broker.live_config import RETENTION_KEYS, LiveConfig
from ledgermq.broker.metrics import BrokerMetrics
from ledgermq.broker.registration import NameServerRegistrar
from ledgermq.broker.remoting.access import GateAccess, SignedIn
from ledgermq.broker.remoting.admin import AdminProcessor, consumer_connections
from ledgermq.broker.remoting.bounds import MAX_REQUEST_BODY_BYTES, body_refusal
from ledgermq.broker.remoting.clients import ClientProcessor
from ledgermq.broker.remoting.consumers import (
    ConsumerManager,
    QueueLockManager,
    parse_heartbeat,
    parse_lock_body,
)
from ledgermq.broker.remoting.errors import response_code
from ledgermq.broker.remoting.offsets import OffsetProcessor
from ledgermq.broker.remoting.pop import PopProcessor
from ledgermq.broker.remoting.producers import producer_connections
from ledgermq.broker.remoting.pull import PullProcessor
from ledgermq.broker.remoting.recall import RecallProcessor
from ledgermq.broker.remoting.running_info import consumer_running_info
from ledgermq.broker.remoting.send import SendProcessor, parse_send_request, send_response
from ledgermq.broker.remoting.send_back import SendBackProcessor
from ledgermq.broker.remoting.transactions import EndTransactionProcessor, RemotingCheckBack
from ledgermq.broker.role import RoleHandler
from ledgermq.broker.service.access import OPEN_ACCESS
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
from ledgermq.broker.state.topics import TopicManager
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
from ledgermq.clock import Clock, SystemClock
from ledgermq.errors import (
    ConfigError,
    CorruptLogError,
    LedgerMQError,
    NetworkError,
    RequestRejectedError,
    StoreLockedError,
)
from ledgermq.ledger.metrics import LedgerMetrics
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import ConnectionPool, TcpNetwork
from ledgermq.security import AclFiles, AclGate, AuditLog, default_acl_paths
from ledgermq.store.segment import replace_file_durably
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.headers import HEADER_TYPES, parse_header

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from ledgermq.broker.config import BrokerConfig
    from ledgermq.broker.remoting.consumers import Heartbeat
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.send import SendRequest, SendResult
    from ledgermq.net import Connection, Listener, Network
    from ledgermq.store import LogStore
    from ledgermq.wire import RemotingCommand

__all__ = ["BrokerServer"]

_log = logging.getLogger(__name__)

_HOUSEKEEPING_S: Final = 1.0
_SNAPSHOT_EVERY_S: Final = 10.0
_EXPIRE_EVERY_S: Final = 10.0
_DRAIN_S: Final = 0.5
"""How long ``close`` lets requests in progress finish before it closes the connections."""
_OUTCOMES_KEPT: Final = frozenset(
    {
        MQRequestCode.SEND_MESSAGE,
        MQRequestCode.SEND_MESSAGE_V2,
        MQRequestCode.SEND_BATCH_MESSAGE,
        MQRequestCode.CONSUMER_SEND_MSG_BACK,
        MQRequestCode.UPDATE_CONSUMER_OFFSET,
    }
)
"""Requests whose SUCCESS is still sent after a store failure: it reports a change a majority
committed, which stays true (refusing it would only make the client send it again)."""

_SEND_CODES: Final = frozenset(
    {MQRequestCode.SEND_MESSAGE, MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE}
)
"""Requests ``SendProcessor.start`` takes without a task when their topic is known."""

Handler = Callable[["Connection", "RemotingCommand"], "Awaitable[RemotingCommand | None]"]

_REQUEST_KINDS: Final[dict[int, str]] = {
    **dict.fromkeys(_SEND_CODES, "send"),
    MQRequestCode.PULL_MESSAGE: "pull",
    MQRequestCode.CONSUMER_SEND_MSG_BACK: "send_back",
}
"""Requests whose latency is kept per topic (``ledgermq_broker_request_latency_seconds``)."""
_LOCK_CODES: Final = frozenset({MQRequestCode.LOCK_BATCH_MQ, MQRequestCode.UNLOCK_BATCH_MQ})
_PARSED_CODES: Final = (
    _SEND_CODES | _LOCK_CODES | frozenset(HEADER_TYPES) | {MQRequestCode.HEART_BEAT}
)
"""Requests parsed once, before the ACL (``_Parsed``): sends, typed headers
(``ledgermq.wire.headers``), heartbeats and locks (their bodies)."""
_Serve = Callable[["Connection", "RemotingCommand", Any], "Awaitable[RemotingCommand]"]
"""The handler of a typed header's code: served from the header the door parsed."""
_NO_NEEDS: Final = Needs()
"""A send's needs when there is no ACL to ask (not computed: sends are the hot path)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Parsed:
    """A request the door parses before the ACL (sends, locks): what it needs, computed from
    the parsed object, and its handler, bound to that same object, so that the ACL and the
    handler cannot read different fields (issue 25: PUB was checked on a V2 send's ``b`` and
    the message stored in its ``topic``). A request that does not parse needs a valid account
    and is answered with the parser's error."""

    needs: Needs
    handler: Handler | None = None
    """None for a send: ``_send_handler(send)``, made only when the task path takes it."""
    send: SendRequest | None = None


class FrontDoor(Protocol):
    """A second protocol served by this replica over ``BrokerServer.services`` (the gRPC door,
    ``ledgermq.proxy.local.GrpcDoor``, which lives above the broker package: the command that
    runs a broker hands its class in as ``grpc_door``)."""

    port: int
    """The port it listens on, once started."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


DoorFactory = Callable[["BrokerServer"], FrontDoor]


class BrokerServer:
    """``await start()``, serve until ``close()``."""

    _typed: dict[int, _Serve]
    """Request code -> translator of its typed header (``_typed_table``), set by ``start``."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        network: Network | None = None,
        clock: Clock | None = None,
        grpc_door: DoorFactory | None = None,
        config_file: str | None = None,
    ) -> None:
        """``grpc_door``: makes the gRPC door (served on ``grpcServerPort`` unless it is -1);
        None: this replica serves remoting only. ``config_file``: the ``broker.conf`` it was
        started from, rewritten by UPDATE_BROKER_CONFIG so a change outlives a restart."""
        self.config = config
        self._live_config = LiveConfig(config, config_file)
        self._grpc_factory = grpc_door
        self.grpc_door: FrontDoor | None = None
        ledger_config = config.ledger_config()
        # One network for both ports and this broker's own connections: the remoting port, the
        # ledger port and the links to peers and NameServers share the tls.* settings.
        self._network: Network = network or TcpNetwork(
            tls_server=ledger_config.tls_server, tls_client=ledger_config.tls_client
        )
        self._clock: Clock = clock or SystemClock()
        self.ledger = LedgerServer(
            ledger_config,
            network=self._network,
            clock=self._clock,
            metrics=LedgerMetrics(
                config.broker_cluster_name,
                config.broker_name,
                config.dleger_self_id,
                group=ledger_config.group,
            ),
        )
        self.metrics = BrokerMetrics(
            config.broker_cluster_name, config.broker_name, config.dleger_self_id, self._clock
        )
        """The broker's figures on the replica's ``/metrics`` (``broker.metrics``)."""
        self.metrics.register(self.ledger.metrics.registry)
        self._audit = (
            AuditLog(
                config.audit_log_file,
                config.audit_log_max_bytes,
                config.audit_log_backup_count,
                self._clock,
            )
            if config.audit_log_file
            else None
        )
        self.acl: AclGate | None
        self._signed_in: SignedIn | None
        self.acl, self._signed_in = _acl_gate(config, self._clock, self._audit)
        """The remoting port's ACL (``aclEnable``), which every request passes first, and who
        each connection's admitted heartbeat was signed by (check-backs' addressees)."""
        self.state: BrokerState | None = None
        self.services: BrokerServices | None = None
        """The protocol-neutral operations (``broker.service``), once started."""
        self.consumers = ConsumerManager()
        self._answered: set[Connection] = set()
        """Connections with send answers queued since the last dispatch pass."""
        self.locks = QueueLockManager()
        self._listener: Listener | None = None
        self._pool = ConnectionPool(self._network)
        self._registrar: NameServerRegistrar | None = None
        self._role: RoleHandler | None = None
        self._delay: DelayScheduler | None = None
        self._checker: TransactionChecker | None = None
        self._pull_service: PullService | None = None
        self._pull: PullProcessor | None = None
        self._offsets: OffsetProcessor | None = None
        self._admin: AdminProcessor | None = None
        self._clients: ClientProcessor | None = None
        self._send: SendProcessor | None = None
        self._send_back: SendBackProcessor | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self._flushing: asyncio.Future[None] | None = None
        """The last flush handed to a thread (it runs on even if its awaiter is cancelled)."""
        self.failure: BaseException | None = None
        """Why the broker stopped on its own (its ledger store or its dispatcher failed), if it
        did: it is then closing, answers SERVICE_NOT_AVAILABLE, and the command exits with
        ``EXIT_STORE_FAILED``."""
        self._watch: asyncio.Task[None] | None = None
        self._failing: asyncio.Task[None] | None = None
        self._lock_fd: int | None = None
        self._handlers: dict[int, Handler] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._closed = asyncio.Event()

    # ================================================================== life cycle
    @property
    def port(self) -> int:
        assert self._listener is not None, "start() first"
        return self._listener.port

    @property
    def address(self) -> str:
        return f"{self.config.broker_ip1}:{self.port}"

    @property
    def grpc_address(self) -> str | None:
        """Where RocketMQ 5 clients reach this replica, None when it serves no gRPC."""
        door = self.grpc_door
        return None if door is None else f"{self.config.broker_ip1}:{door.port}"

    @property
    def network(self) -> Network:
        """The network this replica serves and connects on (for a door's own connections)."""
        return self._network

    async def start(self) -> None:
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
        # The rooms (DESIGN.md): the service's operations over state and storage, and the
        # remoting door's translators over the service.
        send_service = SendService(state, messages)
        services = BrokerServices(
            send=send_service,
            pull=PullService(state, self.consumers.subscription),
            offsets=OffsetService(state),
            send_back=SendBackService(state, messages),
            clients=ClientService(state),
            admin=AdminService(state, self.ledger),
            pop=PopService(state, messages),
            transactions=TransactionService(state, messages),
            timers=TimerService(state, messages),
            trace=BrokerTracer(state, send_service, config.msg_trace_topic_name)
            if config.trace_topic_enable
            else None,
        )
        self.services = services
        self._pull_service = services.pull
        self._pull = PullProcessor(services.pull)
        self._send = SendProcessor(services.send)
        self._send_back = SendBackProcessor(services.send_back)
        self._offsets = OffsetProcessor(services.offsets)
        self._admin = AdminProcessor(services.admin)
        self._clients = ClientProcessor(services.clients, self.consumers, self.locks)
        self._delay = DelayScheduler(state, messages)
        dispatcher.on_arrival = self._on_arrival
        dispatcher.on_failure = self._on_dispatch_failure
        dispatcher.before_pass = self._write_answers
        self.ledger.add_commit_listener(dispatcher.on_commit)
        dispatcher.on_commit(store.committed_index)  # whatever committed during the catch-up
        grpc_port = await self._open_grpc_door()
        config = self.config
        self._listener = await self._network.serve(
            config.broker_ip1, config.listen_port, self._on_frame, grpc_port=grpc_port
        )
        if config.listen_port == 0:
            self.config = config = dataclasses.replace(config, listen_port=self._listener.port)
            state.config = config
        self._registrar = NameServerRegistrar(state, self.ledger, self._pool)
        topics.on_topics_changed = self._topics_changed
        self._role = RoleHandler(state, self.ledger, self._on_master, self._on_slave)
        dispatcher.on_progress = self._role.check
        self.ledger.add_role_listener(self._role.on_role_change)
        self._role.follow_current_role()  # one taken before the listener was there
        self._handlers, self._typed = self._handler_table(), self._typed_table()
        self._registrar.start()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())
        _log.info("broker %s replica %s serving on %s (ledger %s:%d)", config.broker_name,
                  config.dleger_self_id, self.address, *config.ledger_config().address)  # fmt: skip

    def _transaction_checker(
        self, state: BrokerState, services: BrokerServices
    ) -> TransactionChecker:
        """The master's check-back of open half messages, with this door's way to producers
        (CHECK_TRANSACTION_STATE to a connection of the group; the gRPC door adds its own).
        Made on the first promotion: only a master checks back."""
        channel = RemotingCheckBack(self.consumers, self.config.broker_name, self._signed_in)
        services.transactions.channels.append(channel)
        return TransactionChecker(state, services.transactions)

    async def _open_grpc_door(self) -> int | None:
        """Start the gRPC door, if this replica has one (``grpcServerPort`` >= 0), first: the
        remoting port then names its port to a gRPC client that knocks there."""
        factory = self._grpc_factory
        if factory is None or self.config.grpc_server_port < 0:
            return None
        door = factory(self)
        await door.start()
        self.grpc_door = door
        if self.config.grpc_server_port == 0:
            assert self.state is not None
            self.config = dataclasses.replace(self.config, grpc_server_port=door.port)
            self.state.config = self.config
        return door.port

    async def close(self) -> None:
        """Stop serving and close everything; it always ends closed (``wait_closed`` returns),
        whatever fails on the way, so that a replica stopping on a failed disk exits (with
        ``EXIT_STORE_FAILED``) instead of idling for ever with its port closed."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            await self._close()
        except Exception:  # noqa: BLE001 - closing must finish; the failure is in the log
            _log.exception(
                "broker %s replica %s: closing failed; it stops anyway",
                self.config.broker_name, self.config.dleger_self_id,
            )  # fmt: skip
        finally:
            if self._audit is not None:
                self._audit.close()
            self._closed.set()

    async def _close(self) -> None:
        state = self.state
        if self._pull_service is not None:
            self._pull_service.wake_all()
        if self.services is not None:
            self.services.pop.wake_all()
        pending = [task for task in self._tasks if not task.done()]
        if pending:  # woken pulls answer (refusals, after a failure) before connections close
            await asyncio.wait(pending, timeout=_DRAIN_S)
        if self.grpc_door is not None:
            await self.grpc_door.close()
        if self.services is not None and self.services.trace is not None:
            with contextlib.suppress(LedgerMQError, TimeoutError):  # what cannot be stored goes
                await asyncio.wait_for(self.services.trace.close(), _DRAIN_S)
        if self._listener is not None:
            self._listener.close()
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
        for task in list(self._tasks) + (list(state.background) if state else []):
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
        if self._listener is not None:
            await self._listener.wait_closed()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # ================================================================== fail-stop
    async def _watch_ledger(self) -> None:
        await self.ledger.wait_closed()
        if self.ledger.failure is not None:
            self._fail_stop("its ledger store failed", self.ledger.failure)

    def _on_dispatch_failure(self, exc: BaseException) -> None:
        self._fail_stop("dispatching committed entries to its queues failed", exc)

    def _failed(self) -> BaseException | None:
        """The failure that stops this broker, noticed synchronously: the ledger records its
        own before it closes, and a request must not wait for the watcher to see it."""
        if self.failure is None and self.ledger.failure is not None:
            self._fail_stop("its ledger store failed", self.ledger.failure)
        return self.failure

    def _fail_stop(self, what: str, exc: BaseException) -> None:
        """Stop for good (README "Operations"): its queues no longer follow the log, so every
        answer from here on could be wrong; the command exits with ``EXIT_STORE_FAILED`` and
        a supervisor restarts it, which recovers from disk and catches up from the peers."""
        if self.failure is not None:
            return
        self.failure = exc  # also while closing anyway: the exit status still says it
        _log.critical(
            "broker %s replica %s stops: %s (%s); it answers SERVICE_NOT_AVAILABLE until it "
            "exits. Free disk space or fix the disk, then restart it",
            self.config.broker_name, self.config.dleger_self_id, what, exc,
        )  # fmt: skip
        if not self._closing:
            self._failing = asyncio.get_running_loop().create_task(self.close())

    def _refusal(self, command: RemotingCommand, failure: BaseException) -> RemotingCommand:
        return command.response(
            MQResponseCode.SERVICE_NOT_AVAILABLE,
            remark=f"broker {self.config.broker_name} replica {self.config.dleger_self_id} is "
            f"stopping: its store failed ({failure})",
        )

    # ================================================================== roles and events
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
                self._checker = self._transaction_checker(state, self.services)
            if self._checker is not None:
                self._checker.start()  # only the master checks back (issue 16 section 3)
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

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        assert self._pull_service is not None
        assert self._delay is not None
        self._pull_service.on_arrival(topic, queue_id, max_offset)
        self._delay.on_arrival(topic, queue_id)
        if self.services is not None:
            self.services.pop.on_arrival(topic)
            if topic == TIMER_TOPIC:
                self.services.timers.wake()

    async def _topics_changed(self) -> None:
        """Register the changed topics at once and return when the NameServers took them, as
        the Java broker's ``registerBrokerAll`` after a topic is created: a client told of the
        topic (an admin's create, a heartbeat that made a retry topic) finds its route next."""
        if self._registrar is not None and not await self._registrar.register_all():
            self._registrar.register_soon()  # the registration loop retries

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _housekeep(self) -> None:
        """Flush queues, index and checkpoint every second; snapshot metadata every 10 s;
        expire silent consumers; follow ledger retention."""
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
                if now >= next_expiry:
                    next_expiry = now + _EXPIRE_EVERY_S
                    changed = self.consumers.expire(self.state.now_ms())
                    self.consumers.notify_changed(changed)
                self.metrics.refresh(
                    self.state,
                    self.ledger.store.committed_index,
                    {g: len(info.members) for g, info in self.consumers.groups.items()},
                    self._listener.connection_count if self._listener is not None else 0,
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

    # ================================================================== requests
    def _on_frame(self, conn: Connection, command: RemotingCommand) -> None:
        if command.is_response:
            return  # answers to our one-way notifications: nothing waits for them
        if len(command.body) > MAX_REQUEST_BODY_BYTES and self._oversized(conn, command):
            return
        parsed = self._parse(command) if command.code in _PARSED_CODES else None
        if self.acl is not None and not self._admitted(conn, command, parsed):
            return
        started = time.perf_counter()
        if parsed is not None:
            send = parsed.send
            if send is not None:
                if self._start_send(conn, command, send, started):
                    return
                handler: Handler | None = self._send_handler(send)
            else:
                handler = parsed.handler
        else:
            handler = self._handlers.get(command.code)
        if handler is None:
            if not command.is_oneway:
                conn.send(
                    command.response(
                        MQResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        remark=f"request type {command.code} not supported",
                    )
                )
            return
        task = asyncio.get_running_loop().create_task(self._serve(handler, conn, command, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _oversized(self, conn: Connection, command: RemotingCommand) -> bool:
        """Whether ``command``'s body is over its code's bound (``remoting.bounds``); if so it
        was answered, before the ACL signs or any parser reads the body."""
        refusal = body_refusal(command.code, len(command.body), self.config.max_message_size)
        if refusal is None:
            return False
        if not command.is_oneway and not conn.closed:
            with contextlib.suppress(NetworkError):
                conn.send(command.response(response_code(refusal), remark=str(refusal)))
        return True

    def _parse(self, command: RemotingCommand) -> _Parsed:
        """Parse a send's header, a typed header, a heartbeat's or a lock's body once
        (``_Parsed``): what the request needs is computed from the object its handler gets."""
        code = command.code
        try:
            if code in _SEND_CODES:
                request = parse_send_request(command)
                needs = _NO_NEEDS if self.acl is None else send_needs(request.topic)
                return _Parsed(needs, send=request)
            header = parse_header(code, command.ext_fields)
            if header is not None:
                return self._bind(
                    code, header, _NO_NEEDS if self.acl is None else header_needs(header)
                )
            if code == MQRequestCode.HEART_BEAT:
                return self._heartbeat(parse_heartbeat(command.body))
            body = parse_lock_body(command.body)
        except RequestRejectedError as exc:
            error = exc

            async def refuse(conn: Connection, command: RemotingCommand) -> RemotingCommand:
                raise error

            return _Parsed(Needs(), refuse)
        clients = self._clients
        assert clients is not None
        serve = clients.lock if code == MQRequestCode.LOCK_BATCH_MQ else clients.unlock

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return serve(command, body)

        return _Parsed(lock_needs(body[1], {queue.topic for queue in body[2]}), handle)

    def _bind(self, code: int, header: object, needs: Needs) -> _Parsed:
        """A typed header's handler (``_typed``), bound to the header the door parsed."""
        serve = self._typed[code]

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await serve(conn, command, header)

        return _Parsed(needs, handle)

    def _heartbeat(self, beat: Heartbeat) -> _Parsed:
        """HEART_BEAT: SUB on each consumer group and subscribed topic of the parsed body,
        which is what the client registry is then given."""
        clients = self._clients
        assert clients is not None

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await clients.heartbeat(conn, command, beat)

        needs = heartbeat_needs((c.group, c.subscriptions.keys()) for c in beat.consumers)
        return _Parsed(needs, handle)

    def _send_handler(self, request: SendRequest) -> Handler:
        """The task path of ``request`` (a send ``_start_send`` did not take)."""
        send = self._send

        async def do_send(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            assert send is not None
            return await send.process(request, command, conn.address)

        return do_send

    def _access(self, conn: Connection, command: RemotingCommand) -> Access:
        """``command``'s requester, for the checks a service makes once it has read a record."""
        acl = self.acl
        return OPEN_ACCESS if acl is None else GateAccess(acl, conn.address, command)

    def _admitted(self, conn: Connection, command: RemotingCommand, parsed: _Parsed | None) -> bool:
        """Whether the ACL lets ``command`` through; if not, it was answered NO_PERMISSION."""
        acl = self.acl
        assert acl is not None
        needs = None if parsed is None else parsed.needs
        refusal = acl.check(conn.address, command, needs)
        if refusal is None:
            if command.code == MQRequestCode.HEART_BEAT and self._signed_in is not None:
                self._signed_in.heartbeat_admitted(conn, command)
            return True
        if not command.is_oneway and not conn.closed:
            with contextlib.suppress(NetworkError):
                conn.send(refusal)
        return False

    def _start_send(
        self, conn: Connection, command: RemotingCommand, request: SendRequest, started: float
    ) -> bool:
        """A send to a known topic, without a task: its answer goes out from the commit's
        completion (``SendProcessor.start``). False when it needs the task path (a topic to
        create, a retry topic) or the broker has failed; nothing has been done then."""
        send = self._send
        if send is None or self._failed() is not None:
            return False

        def answer(outcome: SendResult | ServiceError) -> None:
            if isinstance(outcome, ServiceError):
                response = command.response(response_code(outcome), remark=str(outcome))
            else:
                response = send_response(command, outcome)
            self._answer(conn, command, response, started)
            self._answered.add(conn)

        try:
            return send.start(request, command, conn.address, answer)
        except Exception as exc:  # noqa: BLE001 - mapped exactly as _serve maps it
            self._answer(conn, command, self._error_response(conn, command, exc), started)
            return True

    def _write_answers(self) -> None:
        """Write the send answers queued since the last dispatch pass now, before the pass
        (``Dispatcher.before_pass``). The commit that completes sends also schedules the pass,
        in the same loop pass as the answers' writes: without this the pass, 20-30 µs for a
        few entries on a 2-vCPU VM, ran first and delayed every answer by its length."""
        conns, self._answered = self._answered, set()
        for conn in conns:
            if not conn.closed:
                conn.flush()

    async def _serve(
        self, handler: Handler, conn: Connection, command: RemotingCommand, started: float
    ) -> None:
        failure = self._failed()
        if failure is not None:
            if not command.is_oneway and not conn.closed:
                with contextlib.suppress(NetworkError):
                    conn.send(self._refusal(command, failure))
            return
        try:
            response = await handler(conn, command)
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - the client is answered
            response = self._error_response(conn, command, exc)
        self._answer(conn, command, response, started)

    def _error_response(
        self, conn: Connection, command: RemotingCommand, exc: BaseException
    ) -> RemotingCommand:
        """What the client is told when handling its request raised ``exc``."""
        if isinstance(exc, ServiceError):
            return command.response(response_code(exc), remark=str(exc))
        if isinstance(exc, RequestRejectedError):
            return command.response(exc.code, remark=str(exc))
        if isinstance(exc, LedgerMQError):
            return command.response(MQResponseCode.SYSTEM_ERROR, remark=str(exc))
        if isinstance(exc, asyncio.CancelledError):
            return command.response(
                MQResponseCode.SYSTEM_ERROR, remark="the broker is shutting down"
            )
        _log.error(
            "request %d from %s failed", command.code, conn.address,
            exc_info=(type(exc), exc, exc.__traceback__),
        )  # fmt: skip
        return command.response(
            MQResponseCode.SYSTEM_ERROR, remark=f"internal error: {type(exc).__name__}: {exc}"
        )

    def _answer(
        self,
        conn: Connection,
        command: RemotingCommand,
        response: RemotingCommand | None,
        started: float | None = None,
    ) -> None:
        """Send ``response`` unless the request was one-way or the client has gone; after a
        store failure, only outcomes a majority committed (``_OUTCOMES_KEPT``) still go out.
        With ``started`` (its arrival), the request is counted in the metrics."""
        if started is not None:
            code = command.code
            kind = _REQUEST_KINDS.get(code, "")
            topic = ""
            if kind:
                fields = command.ext_fields
                topic = fields.get("b") or fields.get("topic") or ""
            answered = -1 if response is None else response.code
            self.metrics.record(code, answered, kind, topic, time.perf_counter() - started)
        if response is None or command.is_oneway or conn.closed:
            return
        failure = self._failed()
        if failure is not None and not (
            command.code in _OUTCOMES_KEPT and response.code == MQResponseCode.SUCCESS
        ):
            # Read from queues that stopped following the log (a held pull woken by the
            # shutdown would say "nothing new"): never an answer, only the refusal.
            response = self._refusal(command, failure)
        with contextlib.suppress(NetworkError):
            conn.send(response)

    async def _update_config(self, command: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: the body's ``broker.conf`` keys, changed live (the keys of
        ``broker.live_config.LIVE_KEYS``) and written to the config file first, or refused
        whole with a remark naming what and why."""
        path = self._live_config.path
        try:
            updated, values = await self._live_config.update(self.config, command.body or b"")
        except ConfigError as exc:
            return command.response(MQResponseCode.SYSTEM_ERROR, remark=str(exc))
        except OSError as exc:
            return command.response(
                MQResponseCode.SYSTEM_ERROR,
                remark=f"not changed: cannot rewrite {path}: {exc.strerror or exc}",
            )
        self._apply_config(updated, values)
        where = f"; written to {path}" if path else (
            "; not persisted: this broker was started without a config file"
        )  # fmt: skip
        return command.response(
            MQResponseCode.SUCCESS, remark=f"updated {', '.join(sorted(values))}{where}"
        )

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

    def _handler_table(self) -> dict[int, Handler]:
        """Request code -> translator (``broker.remoting``), each over its service."""
        assert self._send is not None
        assert self._send_back is not None
        assert self._admin is not None
        assert self._clients is not None
        send_back = self._send_back
        admin, clients = self._admin, self._clients
        assert self.services is not None
        transactions = EndTransactionProcessor(self.services.transactions)

        def sync(fn: Callable[[RemotingCommand], RemotingCommand]) -> Handler:
            async def run(conn: Connection, command: RemotingCommand) -> RemotingCommand:
                return fn(command)

            return run

        def asynchronous(fn: Callable[[RemotingCommand], Awaitable[RemotingCommand]]) -> Handler:
            async def run(conn: Connection, command: RemotingCommand) -> RemotingCommand:
                return await fn(command)

            return run

        async def view(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return admin.view_message(command, self._access(conn, command))

        async def send_back_one(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await send_back.process(command, self._access(conn, command))

        async def end(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await transactions.end(command, self._access(conn, command))

        async def producers(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return producer_connections(self.consumers, command)

        async def broker_config(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            lines = [f"{k}={v}" for k, v in self.config.to_properties().items()]
            return command.response(MQResponseCode.SUCCESS, body="\n".join(lines).encode())

        async def update_config(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await self._update_config(command)

        code = MQRequestCode
        return {
            code.CONSUMER_SEND_MSG_BACK: send_back_one,
            code.END_TRANSACTION: end,
            code.CHECK_CLIENT_CONFIG: clients.check_client_config,
            code.UPDATE_AND_CREATE_TOPIC: asynchronous(admin.create_topic),
            code.DELETE_TOPIC_IN_BROKER: asynchronous(admin.delete_topic),
            code.GET_ALL_TOPIC_CONFIG: sync(admin.all_topics),
            code.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: asynchronous(admin.create_group),
            code.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: sync(admin.all_groups),
            code.DELETE_SUBSCRIPTIONGROUP: asynchronous(admin.delete_group),
            code.GET_ALL_CONSUMER_OFFSET: sync(admin.all_offsets),
            code.GET_PRODUCER_CONNECTION_LIST: producers,
            code.VIEW_MESSAGE_BY_ID: view,
            code.GET_BROKER_RUNTIME_INFO: sync(admin.runtime_info),
            code.GET_BROKER_CONFIG: broker_config,
            code.UPDATE_BROKER_CONFIG: update_config,
            code.TRANSFER_LEADERSHIP: asynchronous(admin.transfer_leadership),
            code.GET_QUARANTINED_ENTRIES: sync(admin.quarantined_entries),
            code.REPLICA_LIST: sync(admin.replica_list),
            code.REPLICA_ADD: asynchronous(admin.replica_add),
            code.REPLICA_REMOVE: asynchronous(admin.replica_remove),
        }

    def _typed_table(self) -> dict[int, _Serve]:
        """Request code -> translator of its typed header (``ledgermq.wire.headers``): every
        code of ``HEADER_TYPES``, served from the header the door parsed and checked."""
        assert self._pull is not None
        assert self._offsets is not None
        assert self.services is not None
        assert self._clients is not None
        assert self._admin is not None
        pull, offsets, clients, admin = self._pull, self._offsets, self._clients, self._admin
        recall = RecallProcessor(self.services.timers)
        pop = PopProcessor(self.services.pop)
        consumers = self.consumers

        def sync(fn: Callable[[RemotingCommand, Any], RemotingCommand]) -> _Serve:
            async def run(
                conn: Connection, command: RemotingCommand, header: Any
            ) -> RemotingCommand:
                return fn(command, header)

            return run

        def asynchronous(
            fn: Callable[[RemotingCommand, Any], Awaitable[RemotingCommand]],
        ) -> _Serve:
            async def run(
                conn: Connection, command: RemotingCommand, header: Any
            ) -> RemotingCommand:
                return await fn(command, header)

            return run

        async def connections(
            conn: Connection, command: RemotingCommand, header: Any
        ) -> RemotingCommand:
            return consumer_connections(consumers, command, header)

        async def running_info(
            conn: Connection, command: RemotingCommand, header: Any
        ) -> RemotingCommand:
            return await consumer_running_info(consumers, command, header)

        code = MQRequestCode
        return {
            code.PULL_MESSAGE: asynchronous(pull.process),
            code.QUERY_CONSUMER_OFFSET: sync(offsets.query_consumer_offset),
            code.UPDATE_CONSUMER_OFFSET: asynchronous(offsets.update_consumer_offset),
            code.GET_MAX_OFFSET: sync(offsets.max_offset),
            code.GET_MIN_OFFSET: sync(offsets.min_offset),
            code.GET_EARLIEST_MSG_STORETIME: sync(offsets.earliest_store_time),
            code.SEARCH_OFFSET_BY_TIMESTAMP: sync(offsets.search_offset_by_timestamp),
            code.RECALL_MESSAGE: asynchronous(recall.process),
            code.POP_MESSAGE: asynchronous(pop.pop),
            code.ACK_MESSAGE: asynchronous(pop.ack),
            code.CHANGE_MESSAGE_INVISIBLETIME: asynchronous(pop.change_invisible_time),
            code.UNREGISTER_CLIENT: clients.unregister,
            code.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
            code.GET_TOPIC_STATS_INFO: sync(admin.topic_stats),
            code.GET_CONSUME_STATS: sync(admin.consume_stats),
            code.QUERY_MESSAGE: sync(admin.query_message),
            code.GET_CONSUMER_CONNECTION_LIST: connections,
            code.GET_CONSUMER_RUNNING_INFO: running_info,
        }


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


def _acl_gate(
    config: BrokerConfig, clock: Clock, audit: AuditLog | None
) -> tuple[AclGate | None, SignedIn | None]:
    """The remoting port's ACL gate and its record of signed-in producers (``aclEnable``)."""
    if not config.acl_enable:
        return None, None
    gate = AclGate(
        AclFiles(_acl_paths(config), clock),
        "broker",
        audit,
        clock=clock,
        require_strong=config.acl_require_strong_signature,
    )
    return gate, SignedIn(gate)


def _acl_paths(config: BrokerConfig) -> list[str]:
    """The ACL files the broker reads: ``aclFilePath``, else ``rocketmqHome``'s defaults."""
    if config.acl_file_path:
        return [config.acl_file_path]
    return default_acl_paths(config.rocketmq_home or None)
