"""The NameServer process: the route table served over RocketMQ remoting.

Stateless and replaceable: every broker registers with every NameServer, so several may run side
by side and a restarted one is refilled within a registration period (30 s). Requests are served
synchronously in arrival order; nothing here blocks, so no request waits for another's I/O.

Served codes (protocol-remoting-and-grpc.md sections 2.4 to 2.6): 103 REGISTER_BROKER,
104 UNREGISTER_BROKER, 105 GET_ROUTEINFO_BY_TOPIC, 106 GET_BROKER_CLUSTER_INFO,
206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 216 DELETE_TOPIC_IN_NAMESRV, and mqadmin's
205 WIPE_WRITE_PERM_OF_BROKER / 327 ADD_WRITE_PERM_OF_BROKER (a group routed read-only while it
is drained for maintenance; not persisted, like the rest of the table), and our
1010 GET_ROUTE_VERSION: ``routeVersion`` is ``<boot id>:<RouteTable.version>``, a string that
changes whenever any route does (the boot id, drawn at start, tells a restarted NameServer's
count from the previous one's); clients poll it every second and look their routes up again
when it moves. Anything else is answered
REQUEST_CODE_NOT_SUPPORTED. Each request's header is read once, typed
(``wire.namesrv_headers``, the classes the broker and the clients write it with), its names
and numbers checked in that parse. Errors become answers in one place (``_on_frame``): a
refused or malformed request gets its error's code and message; a bug gets SYSTEM_ERROR, is
logged, and the server keeps serving. Responses to requests flagged one-way are not sent (a
registration sent one-way is applied but not answered); the C++ client's "one-way" sends arrive
unflagged and are answered, which that client ignores.

A master's address is bound to its connection: while the current master (id 0) of a group is
live and the connection its last accepted registration came over is open, a REGISTER_BROKER or
UNREGISTER_BROKER naming that address over *another* connection is refused (NO_PERMISSION), so
one forged frame can neither demote, remove nor re-term the real master. The binding ends with
that connection or with the address's liveness (a broker whose old connection is half-open is
taken again once its address expires). The route table's own rules against forged and stale
master claims are in ``routes.py``.

Liveness (spec-broker.md section 5.4): a task scans for silent brokers every
``scan_interval_ms``; and when a connection closes, the brokers whose latest registration came
over it are removed at once (RocketMQ's ``onChannelDestroy``). A broker that re-registers over a
new connection is not removed when its old connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeAlias

from ledgermq.clock import Clock, SystemClock
from ledgermq.errors import RequestRejectedError
from ledgermq.namesrv.routes import RemovedBroker, RouteTable
from ledgermq.net import TcpNetwork
from ledgermq.net.metrics_http import MetricsEndpoint
from ledgermq.security.acl_files import AclFiles, default_acl_paths
from ledgermq.security.audit import AuditLog
from ledgermq.security.gate import AclGate
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from ledgermq.wire.route import MASTER_ID, RegisterBrokerBody

if TYPE_CHECKING:
    from ledgermq.namesrv.config import NameServerConfig
    from ledgermq.net import Connection, Listener, Network

__all__ = ["NameServer"]

logger = logging.getLogger(__name__)

_Processor: TypeAlias = Callable[["Connection", RemotingCommand], RemotingCommand]

_CHECKED_CODES: Final = frozenset(
    {
        MQRequestCode.REGISTER_BROKER,
        MQRequestCode.UNREGISTER_BROKER,
        MQRequestCode.DELETE_TOPIC_IN_NAMESRV,
        MQRequestCode.WIPE_WRITE_PERM_OF_BROKER,
        MQRequestCode.ADD_WRITE_PERM_OF_BROKER,
    }
)
"""What the ACL guards here: what changes the route table. Lookups stay open, as in RocketMQ,
whose NameServer has no ACL at all."""

TOPIC_NOT_EXIST_REMARK: Final = "No topic route info in name server for the topic: "
"""RocketMQ's remark for TOPIC_NOT_EXIST, followed by the topic (clients may show it)."""


class NameServer:
    """Serves the route table (see the module docstring).

    Args:
        config: where to listen, scan interval, default broker timeout.
        network: ``TcpNetwork`` with ``config.tls`` by default; tests pass a ``MemoryNetwork``.
        clock: source of ``now_ms`` for liveness (``SystemClock()`` by default).
    """

    def __init__(
        self,
        config: NameServerConfig,
        network: Network | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.routes = RouteTable()
        self._network: Network = (
            network if network is not None else TcpNetwork(tls_server=config.tls)
        )
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._listener: Listener | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self._closing = False
        self.metrics = MetricsEndpoint()
        """``/metrics`` (the process figures) once started, when ``metricsPort`` is set."""
        # Broker address -> the connection its latest accepted registration came over.
        self._registered_over: dict[str, Connection] = {}
        # Connections that carry our close callback (each gets it once).
        self._watched: set[Connection] = set()
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
        self._acl: AclGate | None = None
        if config.acl_enable:
            paths = (
                [config.acl_path] if config.acl_path else default_acl_paths(config.rocketmq_home)
            )
            self._acl = AclGate(
                AclFiles(paths, self._clock),
                "namesrv",
                self._audit,
                only=_CHECKED_CODES,
                clock=self._clock,
                require_strong=config.acl_require_strong_signature,
            )
        self._boot_id = secrets.token_hex(4)
        self._processors: dict[int, _Processor] = {
            MQRequestCode.GET_ROUTE_VERSION: self._get_route_version,
            MQRequestCode.REGISTER_BROKER: self._register_broker,
            MQRequestCode.UNREGISTER_BROKER: self._unregister_broker,
            MQRequestCode.GET_ROUTEINFO_BY_TOPIC: self._get_route,
            MQRequestCode.GET_BROKER_CLUSTER_INFO: self._get_cluster_info,
            MQRequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._get_topic_list,
            MQRequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            MQRequestCode.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            MQRequestCode.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
        }

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Listen and start the liveness scan. NetworkError if the address cannot be bound."""
        cfg = self.config
        self._listener = await self._network.serve(cfg.listen_host, cfg.listen_port, self._on_frame)
        if cfg.metrics_port is not None:
            self.metrics.serve(cfg.metrics_host, cfg.metrics_port)
        self._scan_task = asyncio.get_running_loop().create_task(
            self._scan_loop(), name="namesrv-liveness-scan"
        )
        logger.info(
            "namesrv started listen=%s:%d scan_interval_ms=%d broker_timeout_ms=%d",
            cfg.listen_host, self.port, cfg.scan_interval_ms, cfg.broker_timeout_ms,
        )  # fmt: skip

    async def close(self) -> None:
        """Stop the scan, stop listening and close every connection. Safe to call twice."""
        if self._closing:
            return
        self._closing = True
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
        if self._audit is not None:
            self._audit.close()
        await asyncio.to_thread(self.metrics.close)  # joins its thread: not on the loop
        logger.info("namesrv stopped")

    @property
    def port(self) -> int:
        """The port listened on (the real one when 0 was configured)."""
        assert self._listener is not None, "start() first"
        return self._listener.port

    def scan_now(self) -> list[RemovedBroker]:
        """One liveness scan at the clock's current time (the scan task calls this)."""
        removed = self.routes.scan_not_active(self._clock.monotonic_ms())
        for entry in removed:
            logger.warning(
                "broker expired cluster=%s broker_name=%s broker_id=%d broker_addr=%s",
                entry.cluster, entry.broker_name, entry.broker_id, entry.broker_addr,
            )  # fmt: skip
        for addr in [a for a in self._registered_over if not self.routes.is_live(a)]:
            del self._registered_over[addr]
        return removed

    async def _scan_loop(self) -> None:
        interval_s = self.config.scan_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.scan_now()
            except Exception:
                logger.exception("namesrv liveness scan failed; retrying next interval")

    # ------------------------------------------------------------------ dispatch
    def _on_frame(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Every frame from every connection: dispatch by code, answer, map errors to codes."""
        if self._closing or cmd.is_response:
            return  # the NameServer sends no requests, so a response is nobody's
        processor = self._processors.get(cmd.code)
        if self._acl is not None:
            refusal = self._acl.check(conn.address, cmd)
            if refusal is not None:
                if not cmd.is_oneway and not conn.closed:
                    conn.send(refusal)
                return
        try:
            if processor is None:
                raise RequestRejectedError(  # noqa: TRY301 - one error path for every refusal
                    f"request type {cmd.code} not supported",
                    MQResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                )
            response = processor(conn, cmd)
        except RequestRejectedError as exc:
            logger.info(
                "namesrv refused request code=%d from=%s reason=%s",
                cmd.code, conn.address, exc,
            )  # fmt: skip
            response = cmd.response(exc.code, remark=str(exc))
        except Exception as exc:
            logger.exception("namesrv failed on request code=%d from=%s", cmd.code, conn.address)
            response = cmd.response(
                MQResponseCode.SYSTEM_ERROR,
                remark=f"the name server failed on request code {cmd.code}: "
                f"{type(exc).__name__}: {exc}",
            )
        if not cmd.is_oneway and not conn.closed:
            conn.send(response)

    # ------------------------------------------------------------------ processors
    def _register_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        cluster, broker_name = header.cluster_name, header.broker_name
        broker_addr, broker_id, term = header.broker_addr, header.broker_id, header.term
        timeout_ms = header.heartbeat_timeout_millis
        if timeout_ms is None:
            timeout_ms = self.config.broker_timeout_ms
        self._check_master_binding(conn, broker_name, broker_addr)
        body = (
            RegisterBrokerBody.decode(
                cmd.body, compressed=header.compressed, expected_crc32=header.body_crc32
            )
            if cmd.body
            else RegisterBrokerBody()  # RocketMQ accepts a body-less registration too
        )
        before = self.routes.broker_data(broker_name)
        result = self.routes.register_broker(
            cluster,
            broker_name,
            broker_addr,
            broker_id,
            topic_configs=body.topic_configs,
            data_version=body.data_version,
            ha_server_addr=header.ha_server_addr or "",
            heartbeat_timeout_ms=timeout_ms,
            term=term,
            now_ms=self._clock.monotonic_ms(),
        )
        if not result.accepted:
            logger.warning(
                "refused registration cluster=%s broker_name=%s broker_id=%d broker_addr=%s "
                "term=%s from=%s current_master=%s master_term=%s reason=%s",
                cluster, broker_name, broker_id, broker_addr, term, conn.address,
                result.master_addr, self.routes.master_term(broker_name), result.refusal,
            )  # fmt: skip
        else:
            self._track(conn, broker_addr)
            changed = before != self.routes.broker_data(broker_name)
            logger.log(
                logging.INFO if changed else logging.DEBUG,
                "broker registered cluster=%s broker_name=%s broker_id=%d broker_addr=%s "
                "term=%s topics=%d members=%s",
                cluster, broker_name, broker_id, broker_addr, term, len(body.topic_configs),
                self.routes.broker_data(broker_name),
            )  # fmt: skip
        return cmd.response(
            MQResponseCode.SUCCESS,
            ext_fields={
                "haServerAddr": result.ha_server_addr or "",
                "masterAddr": result.master_addr or "",
            },
        )

    def _unregister_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        broker_addr, broker_name = header.broker_addr, header.broker_name
        self._check_master_binding(conn, broker_name, broker_addr)
        removed = self.routes.unregister_broker(
            header.cluster_name, broker_name, broker_addr, header.broker_id
        )
        if self._registered_over.get(broker_addr) is conn:
            del self._registered_over[broker_addr]
        logger.info("broker unregistered broker_addr=%s removed=%s", broker_addr, removed)
        return cmd.response(MQResponseCode.SUCCESS)

    def _get_route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields).topic
        route = self.routes.route(topic)
        if route is None:
            return cmd.response(
                MQResponseCode.TOPIC_NOT_EXIST, remark=TOPIC_NOT_EXIST_REMARK + topic
            )
        return cmd.response(MQResponseCode.SUCCESS, body=route.to_json())

    def _get_route_version(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        version = f"{self._boot_id}:{self.routes.version}"
        return cmd.response(MQResponseCode.SUCCESS, ext_fields={"routeVersion": version})

    def _get_cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(MQResponseCode.SUCCESS, body=self.routes.cluster_info().to_json())

    def _get_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(MQResponseCode.SUCCESS, body=self.routes.topic_list().to_json())

    def _delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(cmd.ext_fields)
        topic, cluster = header.topic, header.cluster_name
        deleted = self.routes.delete_topic(topic, cluster)
        logger.info("topic deleted topic=%s cluster=%s found=%s", topic, cluster, deleted)
        return cmd.response(MQResponseCode.SUCCESS)

    def _wipe_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        name = WipeWritePermOfBrokerRequestHeader.from_ext_fields(cmd.ext_fields).broker_name
        count = self.routes.wipe_write_perm(name)
        logger.warning(
            "write permission wiped broker_name=%s topics=%d from=%s", name, count, conn.address
        )
        return cmd.response(MQResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)})

    def _add_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        name = AddWritePermOfBrokerRequestHeader.from_ext_fields(cmd.ext_fields).broker_name
        count = self.routes.add_write_perm(name)
        logger.warning(
            "write permission added broker_name=%s topics=%d from=%s", name, count, conn.address
        )
        return cmd.response(MQResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    # ------------------------------------------------------------------ connections
    def _check_master_binding(self, conn: Connection, broker_name: str, broker_addr: str) -> None:
        """Refuse a request about a live master's address from another open connection."""
        data = self.routes.broker_data(broker_name)
        if data is None or data.broker_addrs.get(MASTER_ID) != broker_addr:
            return
        owner = self._registered_over.get(broker_addr)
        if owner is None or owner is conn or owner.closed or not self.routes.is_live(broker_addr):
            return
        raise RequestRejectedError(
            f"{broker_addr} is the master of broker group {broker_name} and registered over "
            f"another open connection ({owner.address}); a request about it is taken only over "
            "that connection, or once it closes or the master expires",
            MQResponseCode.NO_PERMISSION,
        )

    def _track(self, conn: Connection, broker_addr: str) -> None:
        """Remember that ``broker_addr`` last registered over ``conn``, to act when it closes."""
        self._registered_over[broker_addr] = conn
        if conn not in self._watched:
            self._watched.add(conn)
            conn.add_close_callback(self._on_connection_closed)

    def _on_connection_closed(self, conn: Connection) -> None:
        self._watched.discard(conn)
        if self._closing:
            return
        gone = [addr for addr, c in self._registered_over.items() if c is conn]
        for addr in gone:
            del self._registered_over[addr]
            removed = self.routes.channel_closed(addr)
            logger.warning("broker connection closed broker_addr=%s removed=%s", addr, removed)
