"""A ledger replica's settings: DLedger's names, from flags or a ``key=value`` file.

The peer string is DLedger's: ``n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913``.
Keys in a config file use DLedgerConfig's field names (``group``, ``selfId``, ``peers``,
``storeBaseDir``, ``heartBeatTimeIntervalMs`` ...); flags use DLedger's command-line names
(``--group``, ``--id``, ``--peers``, ``--store-base-dir``). Every bad key or value is refused at
start with one line saying which and why.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

from ledgermq.errors import ConfigError
from ledgermq.net.tls import (
    TLS_KEYS,
    TlsClientConfig,
    TlsMode,
    TlsServerConfig,
    tls_client_from_properties,
    tls_server_from_properties,
)
from ledgermq.raft import RaftConfig
from ledgermq.store import (
    DEFAULT_DATA_SEGMENT_BYTES,
    DEFAULT_INDEX_SEGMENT_ENTRIES,
    DEFAULT_MAX_BODY_BYTES,
)
from ledgermq.store.entry_format import INDEX_UNIT_SIZE
from ledgermq.store.retention import RetentionConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FILE_KEYS",
    "LedgerConfig",
    "build_config",
    "load_properties",
    "parse_peers",
    "replica_tls",
]

FlushPolicy = Literal["async", "sync"]


@dataclass(frozen=True)
class LedgerConfig:
    """One replica of one group."""

    group: str
    self_id: str
    peers: Mapping[str, tuple[str, int]]
    """Every member, self included: id -> (host, port)."""
    store_base_dir: str
    flush: FlushPolicy = "async"
    """``async``: acknowledge after the write, flush every ``flush_interval_ms`` (DLedger).
    ``sync``: a replica acknowledges entries only after fsync (group commit)."""
    flush_interval_ms: int = 10
    data_segment_bytes: int = DEFAULT_DATA_SEGMENT_BYTES
    index_segment_bytes: int = DEFAULT_INDEX_SEGMENT_ENTRIES * INDEX_UNIT_SIZE
    """Size of one preallocated index file (DLedger's ``indexFileSize``): a multiple of the
    index record size. Small values keep test stores small (each replica preallocates one
    data and one index file)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    metrics_port: int | None = None
    """Prometheus ``/metrics`` port; 0 picks a free one, None turns it off."""
    metrics_host: str = "127.0.0.1"
    tick_interval_ms: int = 5
    """How often the core is ticked (its timers are all multiples of this or coarser)."""
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    """When old data files are deleted (``fileReservedHours``, ``deleteWhen``, disk ratios)."""
    raft: Mapping[str, object] = field(default_factory=dict)
    """Extra ``RaftConfig`` fields (snake_case), e.g. heart_beat_time_interval_ms."""
    peer_secret: str | None = field(default=None, repr=False)
    """The group's shared secret (``dLegerPeerSecret``): when set, the ledger port serves only
    connections that prove they know it, and this replica proves it to its peers
    (``ledger.peer_auth``). Every replica of the group needs the same one."""
    tls_server: TlsServerConfig = field(default_factory=TlsServerConfig)
    """TLS on the ledger port (``tls.server.*``; ``net.tls``): disabled by default."""
    tls_client: TlsClientConfig | None = None
    """How this replica dials its peers (``tls.enable``, ``tls.client.*``); None: plain.
    ``build_config`` turns it on when the port enforces TLS (its peers do too), and lends it
    the server's certificate, key and CAs where ``tls.client.*`` leaves them unset: one
    certificate per replica (serverAuth and clientAuth) serves both directions."""

    def __post_init__(self) -> None:
        if self.self_id not in self.peers:
            raise ConfigError(f"selfId {self.self_id!r} is not in peers ({', '.join(self.peers)})")
        if self.flush not in ("async", "sync"):
            raise ConfigError(f"flush must be 'async' or 'sync', not {self.flush!r}")
        if not self.group or any(c in self.group for c in "/\\ "):
            raise ConfigError(f"group {self.group!r} must be a non-empty name without / or spaces")
        for name in ("flush_interval_ms", "tick_interval_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive")
        if self.index_segment_bytes < INDEX_UNIT_SIZE or self.index_segment_bytes % INDEX_UNIT_SIZE:
            raise ConfigError(
                f"indexFileSize must be a positive multiple of {INDEX_UNIT_SIZE} bytes, "
                f"not {self.index_segment_bytes}"
            )
        self.raft_config()  # validates the Raft settings now, not at the first election

    @property
    def address(self) -> tuple[str, int]:
        return self.peers[self.self_id]

    @property
    def store_dir(self) -> str:
        """DLedger's layout: ``storeBaseDir/dledger-<selfId>``."""
        return os.path.join(self.store_base_dir, f"dledger-{self.self_id}")

    def raft_config(self) -> RaftConfig:
        known = {f.name for f in dataclasses.fields(RaftConfig)}
        unknown = set(self.raft) - known
        if unknown:
            raise ConfigError(f"unknown Raft setting(s): {', '.join(sorted(unknown))}")
        try:
            return RaftConfig(
                group=self.group,
                self_id=self.self_id,
                peer_ids=tuple(sorted(self.peers)),
                **self.raft,  # type: ignore[arg-type]
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid Raft setting: {exc}") from None


def parse_peers(text: str) -> dict[str, tuple[str, int]]:
    """``n0-host:port;n1-host:port`` -> {"n0": ("host", port), ...}."""
    peers: dict[str, tuple[str, int]] = {}
    for item in filter(None, (p.strip() for p in text.split(";"))):
        node, sep, address = item.partition("-")
        host, colon, port_text = address.rpartition(":")
        if not sep or not node or not colon or not host or not port_text.isdigit():
            raise ConfigError(f"bad peer {item!r}: expected id-host:port, e.g. n0-127.0.0.1:40911")
        port = int(port_text)
        if not 0 < port < 65536:
            raise ConfigError(f"bad peer {item!r}: port {port} is out of range")
        if node in peers:
            raise ConfigError(f"peer id {node!r} appears twice in peers")
        peers[node] = (host, port)
    if not peers:
        raise ConfigError("peers is empty: expected n0-host:port;n1-host:port;...")
    return peers


def load_properties(path: str) -> dict[str, str]:
    """A Java-properties-style ``key=value`` file (``#`` and ``!`` comments), as RocketMQ reads."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    values: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        values[key.strip()] = value.strip()
    return values


FILE_KEYS: Final = {
    "group": "group",
    "selfId": "self_id",
    "peers": "peers",
    "storeBaseDir": "store_base_dir",
    "flush": "flush",
    "flushFileInterval": "flush_interval_ms",
    "dataFileSize": "data_segment_bytes",
    "indexFileSize": "index_segment_bytes",
    "maxBodyBytes": "max_body_bytes",
    "metricsPort": "metrics_port",
    "fileReservedHours": "retention.file_reserved_hours",
    "deleteWhen": "retention.delete_when",
    "heartBeatTimeIntervalMs": "raft.heart_beat_time_interval_ms",
    "maxHeartBeatLeak": "raft.max_heart_beat_leak",
    "minVoteIntervalMs": "raft.min_vote_interval_ms",
    "maxVoteIntervalMs": "raft.max_vote_interval_ms",
    "maxPendingRequestsNum": "raft.max_pending_requests_num",
    "maxWaitAckTimeMs": "raft.max_wait_ack_time_ms",
    "maxPushTimeOutMs": "raft.max_push_timeout_ms",
    "preferredLeaderIds": "raft.preferred_leader_ids",
    "leadershipTransferWaitTimeout": "raft.leadership_transfer_wait_timeout_ms",
    "enableLeaderElector": "raft.enable_leader_elector",
    "peerSecret": "peer_secret",
    **dict.fromkeys(TLS_KEYS, "tls"),
}
"""Config-file key (DLedgerConfig's name) -> LedgerConfig field ("raft." = a RaftConfig field;
"tls": RocketMQ's ``tls.*`` keys, ``net.tls``)."""

_INT_FIELDS: Final = frozenset(
    {
        "flush_interval_ms",
        "data_segment_bytes",
        "index_segment_bytes",
        "max_body_bytes",
        "metrics_port",
    }
)
_REQUIRED: Final = ("group", "selfId", "peers", "storeBaseDir")


def build_config(values: Mapping[str, str]) -> LedgerConfig:
    """A validated config from DLedger-named string settings (a config file merged with flags)."""
    unknown = sorted(set(values) - set(FILE_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(FILE_KEYS))}"
        )
    missing = [key for key in _REQUIRED if not values.get(key)]
    if missing:
        raise ConfigError(f"missing setting(s): {', '.join(missing)}")
    top: dict[str, object] = {}
    raft: dict[str, object] = {}
    retention: dict[str, object] = {}
    tls_values: dict[str, str] = {}
    for key, text in values.items():
        name = FILE_KEYS[key]
        if name == "tls":
            tls_values[key] = text
        elif name == "retention.file_reserved_hours":
            retention["file_reserved_hours"] = _number(key, text)
        elif name == "retention.delete_when":
            retention["delete_when"] = text
        elif name.startswith("raft."):
            raft[name[5:]] = _raft_value(key, name[5:], text)
        elif name in _INT_FIELDS:
            top[name] = _integer(key, text)
        elif name == "peers":
            top[name] = parse_peers(text)
        else:
            top[name] = text
    if retention:
        top["retention"] = RetentionConfig(**retention)  # type: ignore[arg-type]
    if tls_values:
        top["tls_server"], top["tls_client"] = replica_tls(tls_values)
    return LedgerConfig(raft=raft, **top)  # type: ignore[arg-type]


def replica_tls(values: Mapping[str, str]) -> tuple[TlsServerConfig, TlsClientConfig | None]:
    """A replica's TLS settings from RocketMQ's ``tls.*`` keys (see ``LedgerConfig.tls_client``).

    The broker's replicas use this too, so that a ledger group is configured the same way
    whether it runs alone or under a broker.
    """
    server = tls_server_from_properties(values)
    client = tls_client_from_properties(values, default_enable=server.mode is TlsMode.ENFORCING)
    if client is None or not server.enabled:
        return server, client
    lend_certificate = not client.cert_path and not client.key_path
    return server, dataclasses.replace(
        client,
        cert_path=server.cert_path if lend_certificate else client.cert_path,
        key_path=server.key_path if lend_certificate else client.key_path,
        key_password=server.key_password if lend_certificate else client.key_password,
        trust_cert_path=client.trust_cert_path or server.trust_cert_path,
    )


def _number(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{key} must be a number, not {text!r}") from None


def _integer(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{key} must be an integer, not {text!r}") from None


def _raft_value(key: str, name: str, text: str) -> object:
    if name == "preferred_leader_ids":
        return tuple(p.strip() for p in text.split(";") if p.strip())
    if name == "enable_leader_elector":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, not {text!r}")
        return text.lower() == "true"
    return _integer(key, text)
