"""The NameServer's settings, from a RocketMQ-style ``namesrv.conf`` or flags.

File keys are RocketMQ's where RocketMQ has one (``listenPort`` of NettyServerConfig,
``bindAddress`` of 5.x, ``scanNotActiveBrokerInterval`` of 5.x NamesrvConfig); the rest are ours
in the same style. The other keys of RocketMQ 4.9's and 5.x's NameServer (``NamesrvConfig``,
``NettyServerConfig``, ``NettyClientConfig``, ``ControllerConfig``: ``kvConfigPath``,
``serverWorkerThreads``, ``supportActingMaster``, ...) are accepted and named in one warning
line; any other key is refused, with the closest known keys, so a typo never silently leaves a
default in place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.errors import ConfigError
from ledgermq.namesrv.routes import DEFAULT_BROKER_TIMEOUT_MS
from ledgermq.net.tls import TLS_KEYS, TlsServerConfig, tls_server_from_properties
from ledgermq.rocketmq_keys import NAMESRV_FILE_KEYS, check_keys, ignored_warning

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["FILE_KEYS", "NameServerConfig"]

_log = logging.getLogger(__name__)

FILE_KEYS: Final = {
    "listenPort": "listen_port",
    "listenHost": "listen_host",
    "bindAddress": "listen_host",
    "scanNotActiveBrokerInterval": "scan_interval_ms",
    "brokerTimeoutMillis": "broker_timeout_ms",
    "aclEnable": "acl_enable",
    "rocketmqHome": "rocketmq_home",
    "aclFilePath": "acl_path",
    "auditLogFile": "audit_log_file",
    "auditLogMaxBytes": "audit_log_max_bytes",
    "auditLogBackupCount": "audit_log_backup_count",
    "aclRequireStrongSignature": "acl_require_strong_signature",
    "metricsPort": "metrics_port",
    "metricsHost": "metrics_host",
    **dict.fromkeys(TLS_KEYS, "tls"),
}
"""``namesrv.conf`` key -> ``NameServerConfig`` field. The ``tls.*`` keys are RocketMQ's
(``net.tls``); the NameServer dials nothing, so ``tls.enable`` and ``tls.client.*`` are accepted
(one ``tls.properties`` may serve every component) and unused."""


@dataclass(frozen=True, slots=True)
class NameServerConfig:
    """Where the NameServer listens and how it judges broker liveness.

    Args:
        listen_host: address to listen on (default ``127.0.0.1``; ``0.0.0.0`` for all).
        listen_port: port to listen on (default 9876, RocketMQ's; 0 picks a free one).
        scan_interval_ms: how often silent brokers are looked for (default 10 000 ms).
        broker_timeout_ms: how long a broker may stay silent when its registration does not
            say (``heartbeatTimeoutMillis``); default 120 000 ms.
        acl_enable: check registrations and topic deletions against the ACL files
            (``aclEnable``; route lookups stay open, as in RocketMQ).
        rocketmq_home: where ``conf/plain_acl.yml`` and ``conf/acl`` are looked for
            (``rocketmqHome``; default ``$ROCKETMQ_HOME``, else the working directory).
        acl_path: an ACL file or directory instead of those (``aclFilePath``).
        audit_log_file: where admin and refused requests are logged (``auditLogFile``).
        audit_log_max_bytes: the audit log rotates at this size (``auditLogMaxBytes``,
            default 100 MiB; 0: never).
        audit_log_backup_count: rotated audit files kept (``auditLogBackupCount``, 10).
        acl_require_strong_signature: refuse checked requests without LedgerMQ's strong
            signature (``aclRequireStrongSignature``; ``ledgermq.security.acl.strong``).
        tls: TLS on the listening port (``tls.server.mode``, ``tls.server.certPath`` ...;
            ``net.tls``); disabled by default.
        metrics_port: Prometheus ``/metrics`` port (``metricsPort``; ours): the process figures
            (memory, CPU, file descriptors). None (default): not served; 0: any free port.
        metrics_host: the address ``/metrics`` listens on (``metricsHost``; default
            ``127.0.0.1``: it has no access control of its own).
    """

    listen_host: str = "127.0.0.1"
    listen_port: int = 9876
    scan_interval_ms: int = 10_000
    broker_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS
    acl_enable: bool = False
    rocketmq_home: str | None = None
    acl_path: str | None = None
    audit_log_file: str | None = None
    audit_log_max_bytes: int = 100 * 1024 * 1024
    audit_log_backup_count: int = 10
    acl_require_strong_signature: bool = False
    tls: TlsServerConfig = field(default_factory=TlsServerConfig)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort must be between 0 and 65535, not {self.listen_port}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metricsPort must be between 0 and 65535, not {self.metrics_port}")
        if self.scan_interval_ms < 1:
            raise ConfigError(
                f"scanNotActiveBrokerInterval must be positive, not {self.scan_interval_ms}"
            )
        if self.broker_timeout_ms < 1:
            raise ConfigError(f"brokerTimeoutMillis must be positive, not {self.broker_timeout_ms}")
        if self.audit_log_max_bytes < 0 or self.audit_log_backup_count < 1:
            raise ConfigError(
                "auditLogMaxBytes must be 0 (no rotation) or more and auditLogBackupCount at "
                f"least 1, not {self.audit_log_max_bytes} and {self.audit_log_backup_count}"
            )

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> NameServerConfig:
        """A validated config from ``namesrv.conf`` settings (strings, RocketMQ key names)."""
        ignored = check_keys(values, FILE_KEYS, NAMESRV_FILE_KEYS, "NameServer")
        defaults = cls()
        numbers: dict[str, int] = {}
        texts: dict[str, str] = {}
        acl_enable = False
        strong = False
        for key, text in values.items():
            name = FILE_KEYS.get(key)
            if name is None or name == "tls":
                continue
            if name in {"listen_host", "metrics_host"}:
                if not text.strip():
                    raise ConfigError(f"{key} must not be empty")
                texts[name] = text.strip()
            elif name == "acl_enable":
                acl_enable = _boolean(key, text)
            elif name == "acl_require_strong_signature":
                strong = _boolean(key, text)
            elif name in {"rocketmq_home", "acl_path", "audit_log_file"}:
                texts[name] = text.strip()
            else:
                numbers[name] = _integer(key, text)
        config = cls(
            acl_enable=acl_enable,
            rocketmq_home=texts.get("rocketmq_home") or None,
            acl_path=texts.get("acl_path") or None,
            audit_log_file=texts.get("audit_log_file") or None,
            audit_log_max_bytes=numbers.get("audit_log_max_bytes", defaults.audit_log_max_bytes),
            audit_log_backup_count=numbers.get(
                "audit_log_backup_count", defaults.audit_log_backup_count
            ),
            acl_require_strong_signature=strong,
            listen_host=texts.get("listen_host", defaults.listen_host),
            listen_port=numbers.get("listen_port", defaults.listen_port),
            metrics_port=numbers.get("metrics_port"),
            metrics_host=texts.get("metrics_host", defaults.metrics_host),
            scan_interval_ms=numbers.get("scan_interval_ms", defaults.scan_interval_ms),
            broker_timeout_ms=numbers.get("broker_timeout_ms", defaults.broker_timeout_ms),
            tls=tls_server_from_properties(values),
        )
        if ignored:
            _log.warning("%s", ignored_warning(ignored, "NameServer"))
        return config


def _boolean(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in {"true", "false"}:
        raise ConfigError(f"{key} must be true or false, not {text!r}")
    return value == "true"


def _integer(key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ConfigError(f"{key} must be an integer, not {text!r}") from None
