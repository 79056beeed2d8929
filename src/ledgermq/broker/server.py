"""One broker as it runs: a replica (``broker.replica``) wired to its front doors.

The composition root: it builds the replica, the ACL gate both doors share (``aclEnable``), the
remoting door (``broker.remoting.door``) and, when the command hands its class in, the gRPC door
(``ledgermq.proxy.local.GrpcDoor``, which lives above the broker package); it starts them in
order (the replica opens its stores, the gRPC door listens first so that the remoting port can
name its port to a gRPC client that knocks there, then the remoting door, then the replica takes
its role and registers) and closes them in the reverse order. ``BrokerServer`` keeps the name it
had when it was the replica and the door in one class: the commands, the harnesses and the
tests build one and read ``state``, ``services``, ``ledger``, ``address`` from it as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from ledgermq.broker.remoting.access import SignedIn
from ledgermq.broker.remoting.clients import notify_consumer_ids_changed
from ledgermq.broker.remoting.door import RemotingDoor
from ledgermq.broker.replica import BrokerReplica
from ledgermq.broker.service.client_registry import ConsumerManager, QueueLockManager
from ledgermq.clock import Clock, SystemClock
from ledgermq.net import TcpNetwork
from ledgermq.security.acl_files import AclFiles, default_acl_paths
from ledgermq.security.audit import AuditLog
from ledgermq.security.gate import AclGate

if TYPE_CHECKING:
    from ledgermq.broker.config import BrokerConfig
    from ledgermq.broker.metrics import BrokerMetrics
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.ledger.server import LedgerServer
    from ledgermq.net import Network

__all__ = ["BrokerServer", "DoorFactory", "FrontDoor"]

_log = logging.getLogger(__name__)

_DRAIN_S: Final = 0.5
"""How long ``close`` lets requests in progress finish before it closes the connections."""


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
        ledger_config = config.ledger_config()
        # One network for both ports and this broker's own connections: the remoting port, the
        # ledger port and the links to peers and NameServers share the tls.* settings.
        self._network: Network = network or TcpNetwork(
            tls_server=ledger_config.tls_server, tls_client=ledger_config.tls_client
        )
        clock = clock or SystemClock()
        self.consumers = ConsumerManager(notify_consumer_ids_changed)
        """The broker's client registry: both doors' clients; its members' channels are the
        remoting door's connections, told of their groups' changes over remoting."""
        self.replica = BrokerReplica(
            config,
            network=self._network,
            clock=clock,
            clients=self.consumers,
            config_file=config_file,
        )
        self._audit = (
            AuditLog(
                config.audit_log_file,
                config.audit_log_max_bytes,
                config.audit_log_backup_count,
                clock,
            )
            if config.audit_log_file
            else None
        )
        self.acl: AclGate | None
        self.acl, signed_in = _acl_gate(config, clock, self._audit)
        """The ACL (``aclEnable``) every request to either door passes first."""
        self.remoting = RemotingDoor(
            self.replica,
            network=self._network,
            metrics=self.replica.metrics,
            consumers=self.consumers,
            locks=QueueLockManager(),
            acl=self.acl,
            signed_in=signed_in,
        )
        # The wiring (broker.events): the door writes the answers a commit completed before
        # the dispatcher's pass; this assembly closes everything when the replica fails.
        self.replica.events.subscribe_commits(self.remoting.answers)
        self.replica.events.subscribe_failures(self)
        self.replica.connection_count = self.remoting.connection_count
        self._grpc_factory = grpc_door
        self.grpc_door: FrontDoor | None = None
        self._failing: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = asyncio.Event()

    # ================================================================== the replica's views
    @property
    def config(self) -> BrokerConfig:
        """The replica's config as it is now (ports resolved, live updates applied)."""
        return self.replica.config

    @property
    def state(self) -> BrokerState | None:
        return self.replica.state

    @property
    def services(self) -> BrokerServices | None:
        """The protocol-neutral operations (``broker.service``), once started."""
        return self.replica.services

    @property
    def ledger(self) -> LedgerServer:
        return self.replica.ledger

    @property
    def metrics(self) -> BrokerMetrics:
        return self.replica.metrics

    @property
    def failure(self) -> BaseException | None:
        """Why the broker stopped on its own (``BrokerReplica.failure``), if it did."""
        return self.replica.failure

    @property
    def port(self) -> int:
        return self.remoting.port

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

    # ================================================================== life cycle
    async def start(self) -> None:
        replica = self.replica
        await replica.open()
        services = replica.services
        assert services is not None
        grpc_port = await self._open_grpc_door()
        port = await self.remoting.open(services, grpc_port=grpc_port)
        replica.listening(listen_port=port)
        replica.serve()
        config = self.config
        _log.info("broker %s replica %s serving on %s (ledger %s:%d)", config.broker_name,
                  config.dleger_self_id, self.address, *config.ledger_config().address)  # fmt: skip

    async def _open_grpc_door(self) -> int | None:
        """Start the gRPC door, if this replica has one (``grpcServerPort`` >= 0), first: the
        remoting port then names its port to a gRPC client that knocks there."""
        factory = self._grpc_factory
        if factory is None or self.config.grpc_server_port < 0:
            return None
        door = factory(self)
        await door.start()
        self.grpc_door = door
        self.replica.listening(grpc_port=door.port)
        return door.port

    def on_failure(self, failure: BaseException) -> None:
        """``FailureListener``: the replica stopped for good; close the doors and the replica,
        after which the command exits with ``EXIT_STORE_FAILED``."""
        if not self._closing:
            self._failing = asyncio.get_running_loop().create_task(self.close())

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
        replica, remoting = self.replica, self.remoting
        replica.wake_waiters()
        pending = [task for task in (*remoting.tasks, *replica.tasks) if not task.done()]
        if pending:  # woken pulls answer (refusals, after a failure) before connections close
            await asyncio.wait(pending, timeout=_DRAIN_S)
        if self.grpc_door is not None:
            await self.grpc_door.close()
        await replica.close_trace()
        remoting.close_listener()
        await replica.stop_services()
        remoting.cancel_tasks()
        await replica.close()
        await remoting.wait_closed()
        replica.release_lock()

    async def wait_closed(self) -> None:
        await self._closed.wait()


def _acl_gate(
    config: BrokerConfig, clock: Clock, audit: AuditLog | None
) -> tuple[AclGate | None, SignedIn | None]:
    """The ACL gate and its record of signed-in producers (``aclEnable``)."""
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
