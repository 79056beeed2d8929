"""A broker's settings, from a RocketMQ-style ``broker.conf`` or flags, with RocketMQ's key names.

Every replica of a broker group is one LedgerMQ broker process: it serves RocketMQ's remoting
protocol on ``listenPort`` and runs one ledger replica on its port in ``dLegerPeers``
(spec-broker.md section 1.4). Keys keep RocketMQ's spellings, "DLeger" with one "d" included, so
an existing ``conf/dledger/broker-n0.conf`` works unchanged: the keys of RocketMQ 4.9 and 5.x
that mean nothing here (thread pools, HA, controller mode, timer wheel tuning;
``ledgermq.rocketmq_keys``) are accepted and named in one warning line. Every other bad key or
value is refused at start with one line that says which and why; a misspelt key names the (at
most three) closest known ones. A classic master/slave ``broker.conf`` (``brokerRole``,
``brokerId``, no ``enableDLegerCommitLog``) is refused with the keys that turn it into a
DLedger-mode one: LedgerMQ has no other mode.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, ClassVar, Final

from ledgermq.errors import ConfigError, InvalidMessageError
from ledgermq.ledger.config import LedgerConfig, parse_peers, replica_tls
from ledgermq.net.tls import (
    TLS_KEYS,
    TlsClientConfig,
    TlsServerConfig,
    tls_server_from_properties,
    with_config_file,
)
from ledgermq.rocketmq_keys import BROKER_FILE_KEYS, check_keys, ignored_warning
from ledgermq.store.retention import RetentionConfig
from ledgermq.wire.message import validate_topic

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_DELAY_LEVELS",
    "BrokerConfig",
    "broker_file_key",
    "broker_file_keys",
    "default_grpc_port",
    "parse_delay_levels",
]

DEFAULT_LISTEN_PORT: Final = 10911
"""RocketMQ's ``listenPort`` when none is set."""
DEFAULT_GRPC_PORT: Final = 8081
"""RocketMQ 5 proxy's ``grpcServerPort``: the gRPC port of a broker on RocketMQ's default
``listenPort``."""

DEFAULT_DELAY_LEVELS: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""RocketMQ's ``messageDelayLevel``: level n (1-based) waits the n-th duration."""

_log = logging.getLogger(__name__)

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_MS: Final = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_SELF_ID = re.compile(r"^[A-Za-z](\d+)$")

_DLEDGER_KEYS: Final = (
    "set enableDLegerCommitLog=true, dLegerGroup=<brokerName>, "
    "dLegerPeers=n0-HOST0:40911;n1-HOST1:40911;n2-HOST2:40911 (every replica of the group) and "
    "dLegerSelfId=n0 / n1 / n2 (this replica), and drop brokerRole and brokerId (the ledger "
    "election picks the master); `ledgermq init-conf DIR` writes samples for one host and for "
    "three machines"
)
"""How to turn a master/slave ``broker.conf`` into a DLedger-mode one (RocketMQ's own keys)."""


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 1m"`` -> (1000, 5000, 60000) milliseconds."""
    levels = []
    for item in text.split():
        match = _DURATION.match(item)
        if match is None:
            raise ConfigError(f"messageDelayLevel item {item!r} must be a number and s/m/h/d")
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    if not levels:
        raise ConfigError("messageDelayLevel is empty")
    return tuple(levels)


@dataclass(frozen=True)
class BrokerConfig:
    """One broker replica. Field names are RocketMQ's ``broker.conf`` keys (snake_case here)."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_ip1: str = "127.0.0.1"
    """The address clients reach this broker on (what it registers with the NameServers)."""
    listen_port: int = DEFAULT_LISTEN_PORT
    """Port of the remoting protocol; 0 picks a free one (tests)."""
    grpc_server_port: int = DEFAULT_GRPC_PORT
    """Port of RocketMQ 5's gRPC protocol (``MessagingService``, the "local" proxy mode of
    RocketMQ's ``grpcServerPort``, 8081 as RocketMQ's proxy); 0 picks a free one, -1 turns the
    gRPC door off. Replicas on one host each need their own: a broker.conf or flags that do not
    set it get ``default_grpc_port(listenPort)`` (``from_properties``)."""
    namesrv_addr: tuple[str, ...] = ()
    """NameServers ("host:port"), ``;``-separated in the file."""
    store_path_root_dir: str = field(default_factory=lambda: os.path.expanduser("~/store"))
    enable_dleger_commit_log: bool = True
    dleger_group: str = ""
    """Ledger group; defaults to ``brokerName`` (spec-broker 1.4 recommends they be equal)."""
    dleger_peers: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    dleger_self_id: str = "n0"
    flush_disk_type: str = "ASYNC_FLUSH"
    """``ASYNC_FLUSH``: a send is acknowledged once a majority has written it (flushed within
    10 ms); ``SYNC_FLUSH``: once a majority has fsynced it."""
    delete_when: str = "04"
    file_reserved_time: float = 72.0
    """Hours a commit-log file is kept; the ledger keeps ``fileReservedTime + 1`` (spec 1.4)."""
    clean_file_forcibly_enable: bool = True
    disk_max_used_space_ratio: int = 75
    mapped_file_size_commit_log: int = 1 << 30
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_message_size: int = 4 * 1024 * 1024
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    auto_create_group_max: int = 10_000
    """Subscription groups the broker holds beyond which a heartbeat or a first use no longer
    creates one (ours; an admin's updateSubGroup still does): each is replicated metadata with
    a retry topic, and a client naming ever new groups must not grow them without bound. Also
    the most online consumer groups a door's client registry tracks."""
    heartbeat_max_groups: int = 64
    """Producer plus consumer groups one heartbeat may name, and consumer groups one client may
    be a member of (ours; RocketMQ has no bound); a heartbeat over either is refused, so one
    heartbeat creates at most that many groups."""
    heartbeat_max_subscriptions: int = 1_000
    """Topic subscriptions one heartbeat (one client, all its consumer groups) may carry (ours);
    a heartbeat with more is refused, which bounds what the broker keeps per client."""
    default_topic_queue_nums: int = 8
    broker_permission: int = 6
    long_polling_enable: bool = True
    enable_property_filter: bool = True
    """SQL92 subscriptions (filters on message properties). RocketMQ's default is false; a
    broker here has them on unless told otherwise. Off: a SQL92 pull or CHECK_CLIENT_CONFIG is
    answered SYSTEM_ERROR."""
    enable_topic_message_type_check: bool = True
    """RocketMQ 5 proxy's ``enableTopicMessageTypeCheck``: a v5 send whose message type (normal,
    FIFO, delay, transactional) is not its topic's ``message.type`` is refused, and clients are
    told to check it first. Off: every topic takes every type (as MIXED)."""
    short_polling_time_mills: int = 1000
    register_name_server_period: int = 30_000
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    timer_max_delay_sec: int = 3 * 24 * 3600
    """The furthest ahead a timer message may be due (RocketMQ's ``timerMaxDelaySec``, 3 days);
    a send due later is refused (``broker.service.timers``)."""
    max_wait_ack_time_ms: int = 2500
    preferred_leader_id: str = ""
    transaction_time_out: int = 6000
    """ms a half message may stay open before the broker asks its producer how the transaction
    ended (RocketMQ's ``transactionTimeOut``; a message's ``CHECK_IMMUNITY_TIME_IN_SECONDS``
    overrides it)."""
    transaction_check_max: int = 15
    """Check-backs per half message; after that many unanswered ones it is discarded, never
    delivered, and logged (RocketMQ's ``transactionCheckMax``)."""
    transaction_check_interval: int = 60_000
    """ms between the master's passes over the open half messages (RocketMQ's
    ``transactionCheckInterval``)."""
    trace_topic_enable: bool = False
    """RocketMQ's broker-side message trace: the broker creates ``msgTraceTopicName`` (one
    queue) when it becomes master, and its gRPC door records RocketMQ 5 clients' sends (``Pub``)
    and acknowledgements (``SubAfter``) there (``broker.service.trace``)."""
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    metrics_port: int | None = None
    """Prometheus ``/metrics`` port (ours; 0 picks a free one)."""
    metrics_host: str = "127.0.0.1"
    """The address ``/metrics`` listens on (ours): loopback by default, since it has no access
    control of its own; a machine's private address for a Prometheus elsewhere."""
    index_file_size: int = 5_242_880 * 32
    """Size of one ledger index file (DLedger's ``indexFileSize``); small in tests."""
    acl_enable: bool = False
    """RocketMQ's plain ACL on the remoting port (``plain_acl.yml``; ``ledgermq.security``)."""
    rocketmq_home: str = ""
    """Where ``conf/plain_acl.yml`` and ``conf/acl/`` are looked for (default $ROCKETMQ_HOME)."""
    acl_file_path: str = ""
    """An ACL file or directory instead of the places under ``rocketmqHome`` (ours)."""
    audit_log_file: str = ""
    """One JSON line per admin or refused request goes here (ours; empty: none)."""
    audit_log_max_bytes: int = 100 * 1024 * 1024
    """The audit log rotates at this size (ours; 0: never), like ``RotatingFileHandler``."""
    audit_log_backup_count: int = 10
    """Rotated audit files kept (``audit.log.1`` ...; ours)."""
    acl_require_strong_signature: bool = False
    """Refuse remoting requests without LedgerMQ's strong signature
    (``ledgermq.security.acl.strong``: request code, timestamp, nonce, unambiguous fields, body;
    ours). RocketMQ's own clients cannot send it: leave it off while any of them signs in."""
    acl_access_key: str = ""
    """The account this broker signs its own requests with (registrations with the NameServers
    when they check them; ours)."""
    acl_secret_key: str = field(default="", repr=False)
    dleger_peer_secret: str = field(default="", repr=False)
    """The ledger group's shared secret: its ledger port serves only peers that prove they know
    it (``ledger.peer_auth``; ours). Every replica of the group needs the same one."""
    tls: Mapping[str, str] = field(default_factory=dict)
    """RocketMQ's ``tls.*`` settings (``TlsSystemConfig`` names), for the remoting and ledger
    ports and this broker's own connections (``ledgermq.net.tls``)."""

    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"acl_secret_key", "dleger_peer_secret", "tls"}
    )
    """Fields never shown by GET_BROKER_CONFIG or logged (``tls`` may hold key passwords)."""

    def __post_init__(self) -> None:
        if not self.enable_dleger_commit_log:
            raise ConfigError(
                "enableDLegerCommitLog=false is not supported: every LedgerMQ broker keeps its "
                f"commit log in a ledger group (a group of one replica is a single broker); "
                f"{_DLEDGER_KEYS}"
            )
        if not self.dleger_peers:
            raise ConfigError(
                "dLegerPeers is required: LedgerMQ runs RocketMQ's DLedger mode only, each "
                f"broker a ledger group; {_DLEDGER_KEYS}"
            )
        if self.dleger_self_id not in self.dleger_peers:
            raise ConfigError(
                f"dLegerSelfId {self.dleger_self_id!r} is not in dLegerPeers "
                f"({', '.join(self.dleger_peers)})"
            )
        unknown = [p for p in self.preferred_leader_ids if p not in self.dleger_peers]
        if unknown:
            raise ConfigError(
                f"preferredLeaderId {', '.join(unknown)} is not in dLegerPeers "
                f"({', '.join(self.dleger_peers)}): the preferred leader must be a replica of "
                "the group"
            )
        for peer in self.dleger_peers:
            if _SELF_ID.match(peer) is None:
                raise ConfigError(
                    f"dLegerPeers id {peer!r} must be a letter and a number, e.g. n0 (the slave "
                    "brokerId is that number + 1)"
                )
        if self.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            raise ConfigError(
                f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}"
            )
        if not 0 <= self.listen_port < 65536:
            raise ConfigError(f"listenPort {self.listen_port} is out of range")
        if self.audit_log_max_bytes < 0 or self.audit_log_backup_count < 1:
            raise ConfigError(
                "auditLogMaxBytes must be 0 (no rotation) or more and auditLogBackupCount at "
                f"least 1, not {self.audit_log_max_bytes} and {self.audit_log_backup_count}"
            )
        if not -1 <= self.grpc_server_port < 65536:
            raise ConfigError(
                f"grpcServerPort {self.grpc_server_port} is out of range (-1 turns gRPC off)"
            )
        if self.max_message_size < 1024:
            raise ConfigError(f"maxMessageSize {self.max_message_size} is below 1024 bytes")
        if self.default_topic_queue_nums < 1:
            raise ConfigError("defaultTopicQueueNums must be at least 1")
        for key, value in (
            ("autoCreateGroupMax", self.auto_create_group_max),
            ("heartbeatMaxGroups", self.heartbeat_max_groups),
            ("heartbeatMaxSubscriptions", self.heartbeat_max_subscriptions),
        ):
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, not {value}")
        if self.broker_permission not in (2, 4, 6):
            raise ConfigError("brokerPermission must be 2 (write), 4 (read) or 6 (read+write)")
        if self.mapped_file_size_consume_queue % 20:
            raise ConfigError("mappedFileSizeConsumeQueue must be a multiple of 20 bytes")
        parse_delay_levels(self.message_delay_level)
        if self.transaction_time_out < 0 or self.transaction_check_max < 0:
            raise ConfigError("transactionTimeOut and transactionCheckMax must not be negative")
        if self.transaction_check_interval < 1:
            raise ConfigError("transactionCheckInterval must be at least 1 ms")
        if self.timer_max_delay_sec < 1:
            raise ConfigError(
                f"timerMaxDelaySec must be at least 1, not {self.timer_max_delay_sec}"
            )
        try:
            validate_topic(self.msg_trace_topic_name)
        except InvalidMessageError as exc:
            raise ConfigError(f"msgTraceTopicName: {exc}") from None
        if bool(self.acl_access_key) != bool(self.acl_secret_key):
            raise ConfigError("aclAccessKey and aclSecretKey go together: set both or neither")
        self.ledger_config()  # validates the ledger side now, not at the first election

    # ------------------------------------------------------------------ derived values
    @property
    def group(self) -> str:
        return self.dleger_group or self.broker_name

    @property
    def address(self) -> str:
        """``brokerIP1:listenPort``: the address registered with the NameServers."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def slave_broker_id(self) -> int:
        """The brokerId this replica registers as while it is a slave: selfId's number + 1."""
        match = _SELF_ID.match(self.dleger_self_id)
        assert match is not None
        return int(match.group(1)) + 1

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def broker_dir(self) -> str:
        """Where the broker's own files (queues, key index, metadata) live."""
        return self.store_path_root_dir

    @property
    def preferred_leader_ids(self) -> tuple[str, ...]:
        """``preferredLeaderId`` as DLedger's list (``;``-separated, first live one wins)."""
        return tuple(p.strip() for p in self.preferred_leader_id.split(";") if p.strip())

    def ledger_config(self) -> LedgerConfig:
        """The ledger replica under this broker (spec-broker 1.4's mapping)."""
        retention = RetentionConfig(
            file_reserved_hours=self.file_reserved_time + 1,
            delete_when=self.delete_when,
            enable_force_clean=self.clean_file_forcibly_enable,
            disk_ratio_check_expired=self.disk_max_used_space_ratio / 100,
        )
        raft: dict[str, object] = {"max_wait_ack_time_ms": self.max_wait_ack_time_ms}
        tls_server, tls_client = replica_tls(self.tls)
        if self.preferred_leader_ids:
            raft["preferred_leader_ids"] = self.preferred_leader_ids
        return LedgerConfig(
            group=self.group,
            self_id=self.dleger_self_id,
            peers=self.dleger_peers,
            store_base_dir=self.store_path_root_dir,
            flush="sync" if self.flush_disk_type == "SYNC_FLUSH" else "async",
            data_segment_bytes=self.mapped_file_size_commit_log,
            index_segment_bytes=self.index_file_size,
            max_body_bytes=self.max_message_size + 4096,
            metrics_port=self.metrics_port,
            metrics_host=self.metrics_host,
            retention=retention,
            raft=raft,
            peer_secret=self.dleger_peer_secret or None,
            tls_server=tls_server,
            tls_client=tls_client,
        )

    def tls_server(self) -> TlsServerConfig:
        """The remoting port's TLS (``tls.server.*``)."""
        return tls_server_from_properties(self.tls)

    def tls_client(self) -> TlsClientConfig | None:
        """TLS for this broker's own connections (NameServers), when ``tls.enable`` or an
        enforcing server mode asks for it."""
        return replica_tls(self.tls)[1]

    def to_properties(self) -> dict[str, str]:
        """The settings as ``broker.conf`` spells them (RocketMQ key names, values as the file
        takes them), secrets as ``******``: what GET_BROKER_CONFIG answers, so that
        ``ledgermq admin broker-config`` prints a file one could load again."""
        out: dict[str, str] = {}
        for key, name in _file_keys().items():
            if key.startswith("maped"):
                continue  # RocketMQ's old spellings: the current key is there too
            value = getattr(self, name)
            if name in self.SECRET_FIELDS:
                out[key] = "******" if value else ""
            elif name == "dleger_peers":
                out[key] = ";".join(f"{n}-{h}:{p}" for n, (h, p) in value.items())
            elif name == "namesrv_addr":
                out[key] = ";".join(value)
            elif isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif value is None:
                out[key] = ""
            else:
                out[key] = str(value)
        for key in self.tls:
            out[key] = "******" if "assword" in key else self.tls[key]
        return dict(sorted(out.items()))

    def with_changes(self, values: Mapping[str, str]) -> BrokerConfig:
        """A validated copy with ``broker.conf`` keys ``values`` changed (UPDATE_BROKER_CONFIG).

        Only this broker's own keys (``broker_file_key``) are taken: which of them may change
        while the broker runs is ``broker.live_config``'s decision, not this one's.
        """
        known = _file_keys()
        types = {f.name: f.type for f in fields(self)}
        changes: dict[str, object] = {}
        for key, text in values.items():
            name = known.get(key)
            if name is None:
                raise ConfigError(f"{key} is not a LedgerMQ broker setting")
            changes[name] = _convert(key, name, str(types[name]), text.strip())
        return replace(self, **changes)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> BrokerConfig:
        """A validated config from ``broker.conf`` keys (merged with flags by the caller)."""
        _refuse_master_slave(values)
        known = _file_keys()
        ignored = set(
            check_keys(values, known | dict.fromkeys(TLS_KEYS, "tls"), BROKER_FILE_KEYS, "broker")
        )
        kwargs: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls)}
        tls_values = with_config_file({k: v for k, v in values.items() if k in TLS_KEYS})
        if tls_values:
            kwargs["tls"] = dict(tls_values)
        for key, text in values.items():
            if key in ignored or key in TLS_KEYS:
                continue
            name = known[key]
            kind = str(types[name])
            kwargs[name] = _convert(key, name, kind, text.strip())
        ignored -= _prometheus_exporter(values, kwargs)
        if "grpc_server_port" not in kwargs:
            listen_port = kwargs.get("listen_port", DEFAULT_LISTEN_PORT)
            assert isinstance(listen_port, int)
            kwargs["grpc_server_port"] = default_grpc_port(listen_port)
        config = cls(**kwargs)  # type: ignore[arg-type]
        if ignored:
            _log.warning("%s", ignored_warning(ignored, "broker"))
        if "timerMaxDelaySec" in values:
            _warn_timer_horizon(config)
        return config


def _prometheus_exporter(values: Mapping[str, str], kwargs: dict[str, object]) -> set[str]:
    """Map RocketMQ 5's Prometheus exporter onto ``metricsPort``; the keys it took.

    ``metricsExporterType=PROM`` (or 2) makes a RocketMQ 5 broker serve Prometheus on
    ``metricsPromExporterPort`` (5557 by default): LedgerMQ's ``metricsPort`` does that job, so
    a 5.x file that asks for it gets it (``metricsPort``, when set too, wins). The other exporter
    types (OTLP_GRPC, LOG) and ``metricsPromExporterHost`` are ignored and named in the warning.
    """
    if values.get("metricsExporterType", "").strip().upper() not in ("PROM", "2"):
        return set()
    if "metrics_port" not in kwargs:
        port = values.get("metricsPromExporterPort", "5557").strip()
        kwargs["metrics_port"] = _convert("metricsPromExporterPort", "metrics_port", "int", port)
    return {"metricsExporterType", "metricsPromExporterPort"}


def _refuse_master_slave(values: Mapping[str, str]) -> None:
    """``ConfigError`` for a classic master/slave ``broker.conf``: one that names a
    ``brokerRole`` or ``brokerId`` but neither ``enableDLegerCommitLog`` nor ``dLegerPeers``.
    RocketMQ runs such a file as a master or slave with its own HA; LedgerMQ would otherwise
    refuse it only for the missing ``dLegerPeers``, which does not say that the whole file is
    of the other mode, nor what to add."""
    if "enableDLegerCommitLog" in values or "dLegerPeers" in values:
        return
    named = [f"{key}={values[key].strip()}" for key in ("brokerRole", "brokerId") if key in values]
    if named:
        raise ConfigError(
            f"this is a master/slave broker.conf ({', '.join(named)}, no enableDLegerCommitLog): "
            f"LedgerMQ runs RocketMQ's DLedger mode only, each broker a ledger group; "
            f"{_DLEDGER_KEYS}"
        )


def _warn_timer_horizon(config: BrokerConfig) -> None:
    """Warn when a ``timerMaxDelaySec`` the operator set outlives the commit log: a timer
    message retention deletes before it is due is dropped. Only a value that was set: the
    default (3 days) against a short ``fileReservedTime`` is not the operator's doing, and a
    warning on every start of RocketMQ's own samples (``fileReservedTime=48``) would be noise."""
    if config.timer_max_delay_sec > (config.file_reserved_time + 1) * 3600:
        _log.warning(
            "timerMaxDelaySec (%d s) is beyond what the commit log keeps (fileReservedTime "
            "%s h + 1 h): a timer message retention deletes first is dropped when due",
            config.timer_max_delay_sec, config.file_reserved_time,
        )  # fmt: skip


def default_grpc_port(listen_port: int) -> int:
    """``grpcServerPort`` of a broker whose settings do not name one: 8081 (RocketMQ 5 proxy's)
    for RocketMQ's default ``listenPort`` 10911, a free one for ``listenPort`` 0, else the port
    below ``listenPort``. Replicas of a group on one host have distinct remoting ports
    (RocketMQ's DLedger samples: 30911 / 30921 / 30931), so they get distinct gRPC ports
    (30910 / 30920 / 30930) without a word in their files; ``listenPort`` - 1 is none of the
    ports RocketMQ derives from ``listenPort`` (the VIP channel's - 2, HA's + 1)."""
    if listen_port == DEFAULT_LISTEN_PORT:
        return DEFAULT_GRPC_PORT
    return max(0, listen_port - 1)


def broker_file_key(name: str) -> str:
    """The ``broker.conf`` key of field ``name`` (``max_message_size`` -> ``maxMessageSize``)."""
    return next(key for key, field_name in _file_keys().items() if field_name == name)


def broker_file_keys() -> frozenset[str]:
    """Every ``broker.conf`` key this broker reads (RocketMQ's old spellings included)."""
    return frozenset(_file_keys())


def _file_keys() -> dict[str, str]:
    """``broker.conf`` key -> field name: camelCase of the field, with RocketMQ's odd spellings."""
    special = {
        "broker_ip1": "brokerIP1",
        "dleger_group": "dLegerGroup",
        "dleger_peers": "dLegerPeers",
        "dleger_self_id": "dLegerSelfId",
        "enable_dleger_commit_log": "enableDLegerCommitLog",
        "dleger_peer_secret": "dLegerPeerSecret",
    }
    keys = {}
    for f in fields(BrokerConfig):
        if f.name == "tls":
            continue  # the tls.* keys themselves (TLS_KEYS)
        head, *rest = f.name.split("_")
        keys[special.get(f.name, head + "".join(w.capitalize() for w in rest))] = f.name
    # RocketMQ's older spellings of the same settings.
    keys["mapedFileSizeCommitLog"] = "mapped_file_size_commit_log"
    keys["mapedFileSizeConsumeQueue"] = "mapped_file_size_consume_queue"
    return keys


def _convert(key: str, name: str, kind: str, text: str) -> object:
    if name == "dleger_peers":
        return parse_peers(text)
    if name == "namesrv_addr":
        return tuple(a.strip() for a in text.split(";") if a.strip())
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, not {text!r}")
        return text.lower() == "true"
    if kind in ("int", "int | None"):
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key} must be an integer, not {text!r}") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{key} must be a number, not {text!r}") from None
    return text
