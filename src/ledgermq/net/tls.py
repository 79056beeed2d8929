"""TLS settings with RocketMQ's names and modes, and the ``ssl.SSLContext``s built from them.

RocketMQ reads these as ``-D`` system properties or from ``tls.config.file``
(remoting's ``TlsSystemConfig`` and ``TlsHelper``); LedgerMQ reads the same keys from a
component's config file (``namesrv.conf``, a ledger replica's file, later ``broker.conf``):

- ``tls.server.mode``: ``disabled`` (plain only), ``permissive`` (plain and TLS on one port: the
  first byte of each connection says which, ``net.tcp``) or ``enforcing`` (TLS only; a plain
  client is answered with an error that says so, then closed).
- ``tls.server.certPath`` / ``tls.server.keyPath`` / ``tls.server.keyPassword``: the server's PEM
  certificate chain and private key (and the key's password, when it is encrypted).
- ``tls.server.trustCertPath``: PEM CA certificates that client certificates must chain to.
- ``tls.server.need.client.auth``: ``none`` | ``optional`` | ``require`` (mutual TLS).
- ``tls.enable``: dial servers with TLS (a client, or a replica dialling its peers).
- ``tls.client.certPath`` / ``tls.client.keyPath`` / ``tls.client.keyPassword``: the client's
  certificate, for servers that ask for one.
- ``tls.client.trustCertPath``: PEM CA certificates the server's certificate must chain to
  (unset: the system's CAs).
- ``tls.client.authServer``: verify the server's certificate and host name.
- ``tls.test.mode.enable``: test mode: clients verify nothing; servers ask no client certificate.
- ``tls.config.file``: a properties file of these keys (RocketMQ's
  ``/etc/rocketmq/tls.properties``); as in RocketMQ, its values win over the component's own,
  and it cannot set ``tls.server.mode`` nor ``tls.enable`` (LedgerMQ says so instead of ignoring
  them). Read only when named: LedgerMQ does not look at ``/etc/rocketmq`` by itself.

Where LedgerMQ differs from RocketMQ, it is to fail closed, and the difference is stated here:

- Defaults: ``tls.server.mode`` is ``disabled`` (RocketMQ: ``permissive``, with a self-signed
  certificate made at start by test mode); ``tls.client.authServer`` is ``true`` (RocketMQ:
  ``false``) and ``tls.test.mode.enable`` is ``false`` (RocketMQ: ``true``). A RocketMQ
  ``tls.properties`` that sets these keys means the same here; one that relies on RocketMQ's
  defaults gets verification it did not ask for, and an error that names the key to set.
- A server always needs ``certPath`` and ``keyPath``, test mode too: Python's ``ssl`` module
  cannot make a certificate.
- A client certificate that is asked for is always checked against
  ``tls.server.trustCertPath`` (Python's ``ssl`` cannot ask for one and check nothing), so
  ``tls.server.authClient`` is accepted and has no further effect.

Contexts allow TLS 1.2 and 1.3 only. Every missing or unreadable file is a ``ConfigError`` that
names the key and the path, raised when the context is built (at start, never per connection).
A server certificate that has expired or is not valid yet is one WARNING at start naming the file
and its dates (issue 25 item 16), and the server starts: clients that verify it refuse it, and
saying so beats both silence and a refusal to start that would also stop replication between
replicas whose clients do not verify (``tls.test.mode.enable``).
"""

from __future__ import annotations

import enum
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "TLS_KEYS",
    "ClientAuth",
    "TlsClientConfig",
    "TlsMode",
    "TlsServerConfig",
    "tls_client_from_properties",
    "tls_server_from_properties",
    "with_config_file",
]


class TlsMode(enum.StrEnum):
    """``tls.server.mode``: what a listening port accepts."""

    DISABLED = "disabled"
    """Plain connections only (a TLS client fails its handshake)."""
    PERMISSIVE = "permissive"
    """Plain and TLS connections on the same port."""
    ENFORCING = "enforcing"
    """TLS connections only."""


class ClientAuth(enum.StrEnum):
    """``tls.server.need.client.auth``: whether a TLS client must show a certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    """Asked for; a client without one is served, one with a bad one is refused."""
    REQUIRE = "require"
    """Mutual TLS: a client without a certificate the trusted CAs signed is refused."""


TLS_KEYS: Final = {
    "tls.server.mode": "mode",
    "tls.server.certPath": "cert_path",
    "tls.server.keyPath": "key_path",
    "tls.server.keyPassword": "key_password",
    "tls.server.trustCertPath": "trust_cert_path",
    "tls.server.need.client.auth": "need_client_auth",
    "tls.server.authClient": "auth_client",
    "tls.enable": "enable",
    "tls.client.certPath": "client.cert_path",
    "tls.client.keyPath": "client.key_path",
    "tls.client.keyPassword": "client.key_password",
    "tls.client.trustCertPath": "client.trust_cert_path",
    "tls.client.authServer": "client.auth_server",
    "tls.test.mode.enable": "test_mode",
    "tls.config.file": "config_file",
}
"""Every TLS key a config file may hold (RocketMQ's ``TlsSystemConfig`` names) -> field."""

logger = logging.getLogger(__name__)

_MIN_VERSION: Final = ssl.TLSVersion.TLSv1_2
_warned_certificates: set[tuple[str, float, float, bool]] = set()
"""(path, notBefore, notAfter, expired) of the out-of-date certificates already warned about: one
WARNING per certificate per process, though the remoting and ledger ports each build a context."""
_E = TypeVar("_E", bound=enum.StrEnum)


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """The server side of a listening port (the ``tls.server.*`` keys).

    Args:
        mode: what the port accepts (default ``disabled``).
        cert_path: PEM certificate chain, leaf first (``tls.server.certPath``).
        key_path: its PEM private key (``tls.server.keyPath``).
        key_password: the key's password if it is encrypted (``tls.server.keyPassword``).
        trust_cert_path: PEM CAs for client certificates (``tls.server.trustCertPath``); needed
            when ``need_client_auth`` is not ``none``.
        need_client_auth: ``none``, ``optional`` or ``require``.
        test_mode: ask no client certificate, whatever ``need_client_auth`` says.
    """

    mode: TlsMode = TlsMode.DISABLED
    cert_path: str | None = None
    key_path: str | None = None
    key_password: str | None = field(default=None, repr=False)
    trust_cert_path: str | None = None
    need_client_auth: ClientAuth = ClientAuth.NONE
    test_mode: bool = False

    def __post_init__(self) -> None:
        if self.mode is TlsMode.DISABLED:
            return
        missing = [
            key
            for key, value in (
                ("tls.server.certPath", self.cert_path),
                ("tls.server.keyPath", self.key_path),
            )
            if not value
        ]
        if missing:
            raise ConfigError(
                f"tls.server.mode={self.mode} needs {' and '.join(missing)} (the server's PEM "
                "certificate and private key), or set tls.server.mode=disabled"
            )
        if self.client_auth is not ClientAuth.NONE and not self.trust_cert_path:
            raise ConfigError(
                f"tls.server.need.client.auth={self.need_client_auth} needs "
                "tls.server.trustCertPath: the PEM CA certificates client certificates must "
                "chain to"
            )

    @property
    def enabled(self) -> bool:
        """Whether the port speaks TLS at all."""
        return self.mode is not TlsMode.DISABLED

    @property
    def client_auth(self) -> ClientAuth:
        """What is really asked of clients (test mode asks nothing)."""
        return ClientAuth.NONE if self.test_mode else self.need_client_auth

    def server_context(self, *, now_s: float | None = None) -> ssl.SSLContext:
        """A server context for this port (TLS 1.2+); a WARNING if the certificate is not valid
        at ``now_s`` (Unix seconds; the system's clock when None).

        Raises:
            ConfigError: TLS is disabled, or a file is missing, unreadable or not what its key
                says (the message names the key and the path).
        """
        if not self.enabled:
            raise ConfigError("tls.server.mode=disabled: there is no TLS server context")
        assert self.cert_path is not None
        assert self.key_path is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = _MIN_VERSION
        _load_chain(context, "tls.server", self.cert_path, self.key_path, self.key_password)
        warn_if_out_of_date(
            "tls.server.certPath",
            self.cert_path,
            SystemClock().wall_time_s() if now_s is None else now_s,
        )
        auth = self.client_auth
        if auth is not ClientAuth.NONE:
            assert self.trust_cert_path is not None
            _load_trust(context, "tls.server.trustCertPath", self.trust_cert_path)
            context.verify_mode = (
                ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
            )
        return context


@dataclass(frozen=True, slots=True)
class TlsClientConfig:
    """How a client dials a TLS server (the ``tls.client.*`` keys; ``--tls`` on the CLI).

    Args:
        trust_cert_path: PEM CAs the server's certificate must chain to
            (``tls.client.trustCertPath``; None: the system's CAs).
        cert_path: the client's PEM certificate chain, for servers that ask for one
            (``tls.client.certPath``).
        key_path: its PEM private key (``tls.client.keyPath``).
        key_password: the key's password if it is encrypted (``tls.client.keyPassword``).
        auth_server: verify the server's certificate and that it names the host dialled
            (``tls.client.authServer``; default True).
        test_mode: verify nothing (``tls.test.mode.enable``): encryption without
            authentication, for tests only.
    """

    trust_cert_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    key_password: str | None = field(default=None, repr=False)
    auth_server: bool = True
    test_mode: bool = False

    def __post_init__(self) -> None:
        if bool(self.cert_path) != bool(self.key_path):
            given, missing = (
                ("tls.client.certPath", "tls.client.keyPath")
                if self.cert_path
                else ("tls.client.keyPath", "tls.client.certPath")
            )
            raise ConfigError(
                f"{given} is set but {missing} is not: a client certificate needs both"
            )

    @property
    def verifies_server(self) -> bool:
        """Whether the server's certificate and host name are checked."""
        return self.auth_server and not self.test_mode

    def client_context(self) -> ssl.SSLContext:
        """A client context (TLS 1.2+).

        Raises:
            ConfigError: a file is missing, unreadable or not what its key says.
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = _MIN_VERSION
        if not self.verifies_server:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.trust_cert_path:
            _load_trust(context, "tls.client.trustCertPath", self.trust_cert_path)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.cert_path and self.key_path:
            _load_chain(context, "tls.client", self.cert_path, self.key_path, self.key_password)
        return context


def tls_server_from_properties(values: Mapping[str, str]) -> TlsServerConfig:
    """The server settings among ``values`` (config-file keys to text; other keys ignored).

    Raises:
        ConfigError: a bad mode, client-auth value or boolean, or missing certificate settings.
    """
    values = with_config_file(values)
    mode = _choice(values, "tls.server.mode", TlsMode, TlsMode.DISABLED)
    auth = _choice(values, "tls.server.need.client.auth", ClientAuth, ClientAuth.NONE)
    _boolean(values, "tls.server.authClient", default=False)  # accepted (module docstring)
    return TlsServerConfig(
        mode=mode,
        cert_path=_path(values, "tls.server.certPath"),
        key_path=_path(values, "tls.server.keyPath"),
        key_password=values.get("tls.server.keyPassword") or None,
        trust_cert_path=_path(values, "tls.server.trustCertPath"),
        need_client_auth=auth,
        test_mode=_boolean(values, "tls.test.mode.enable", default=False),
    )


def tls_client_from_properties(
    values: Mapping[str, str], *, default_enable: bool = False
) -> TlsClientConfig | None:
    """The client settings among ``values``; None when ``tls.enable`` is false.

    ``default_enable``: what an absent ``tls.enable`` means (a replica whose own port enforces
    TLS dials its peers with TLS unless told otherwise).
    """
    if not _boolean(values, "tls.enable", default=default_enable):
        return None
    values = with_config_file(values)
    return TlsClientConfig(
        trust_cert_path=_path(values, "tls.client.trustCertPath"),
        cert_path=_path(values, "tls.client.certPath"),
        key_path=_path(values, "tls.client.keyPath"),
        key_password=values.get("tls.client.keyPassword") or None,
        auth_server=_boolean(values, "tls.client.authServer", default=True),
        test_mode=_boolean(values, "tls.test.mode.enable", default=False),
    )


def with_config_file(values: Mapping[str, str]) -> Mapping[str, str]:
    """``values`` with the settings of ``tls.config.file`` (if named) on top.

    Raises:
        ConfigError: the file cannot be read, has a line that is not ``key=value``, or holds a
            key that is not a TLS key or that RocketMQ does not read from it.
    """
    path = values.get("tls.config.file", "").strip()
    if not path:
        return values
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"tls.config.file: cannot read {path}: {exc.strerror or exc}") from None
    loaded: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, text = line.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        if key in _NOT_IN_FILE:
            raise ConfigError(
                f"{path}:{number}: {key} is not read from tls.config.file (as in RocketMQ): "
                "put it in the component's own config file"
            )
        if key not in TLS_KEYS:
            raise ConfigError(
                f"{path}:{number}: {key} is not a TLS setting; known: {', '.join(sorted(TLS_KEYS))}"
            )
        loaded[key] = text.strip()
    return {**values, **loaded}


# ---------------------------------------------------------------------- helpers

_NOT_IN_FILE: Final = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})
"""Keys RocketMQ reads only as system properties, never from ``tls.config.file``."""


def _choice(values: Mapping[str, str], key: str, kind: type[_E], default: _E) -> _E:
    text = values.get(key, "").strip().lower()
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        allowed = " | ".join(member.value for member in kind)
        raise ConfigError(f"{key} must be {allowed}, not {values[key]!r}") from None


def _boolean(values: Mapping[str, str], key: str, *, default: bool) -> bool:
    text = values.get(key, "").strip().lower()
    if not text:
        return default
    if text not in {"true", "false"}:
        raise ConfigError(f"{key} must be true or false, not {values[key]!r}")
    return text == "true"


def _path(values: Mapping[str, str], key: str) -> str | None:
    return values.get(key, "").strip() or None


def _check_readable(key: str, path: str) -> None:
    """A ConfigError naming ``key`` if ``path`` cannot be opened (ssl's errors do not say which
    file, nor why)."""
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None


def _load_chain(
    context: ssl.SSLContext, prefix: str, cert_path: str, key_path: str, password: str | None
) -> None:
    _check_readable(f"{prefix}.certPath", cert_path)
    _check_readable(f"{prefix}.keyPath", key_path)

    def no_password() -> str:
        # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
        raise ConfigError(f"{prefix}.keyPath: {key_path} is encrypted: set {prefix}.keyPassword")

    try:
        context.load_cert_chain(cert_path, key_path, password or no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{prefix}.certPath / {prefix}.keyPath: {cert_path} and {key_path} are not a PEM "
            f"certificate and its private key (or {prefix}.keyPassword is wrong)"
            + (f": {exc.reason}" if exc.reason else "")
        ) from None


def certificate_validity(path: str) -> tuple[float, float] | None:
    """(notBefore, notAfter) in Unix seconds of the first certificate of the PEM file ``path``;
    None when they cannot be read (the file was loaded already: this only adds a warning)."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:  # pragma: no cover - every CPython since 3.3 has it
        return None
    try:
        decoded = decode(path)
        return (
            float(ssl.cert_time_to_seconds(decoded["notBefore"])),
            float(ssl.cert_time_to_seconds(decoded["notAfter"])),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def warn_if_out_of_date(key: str, path: str, now_s: float) -> bool:
    """Log one WARNING naming ``path`` and its dates if its certificate is not valid at
    ``now_s``; whether it is out of date."""
    validity = certificate_validity(path)
    if validity is None:
        return False
    not_before, not_after = validity
    if not_before <= now_s <= not_after:
        return False
    finding = (path, not_before, not_after, now_s > not_after)
    if finding not in _warned_certificates:
        _warned_certificates.add(finding)
        dates = f"valid from {_utc(not_before)} until {_utc(not_after)}"
        if now_s > not_after:
            problem = f"expired on {_utc(not_after)} ({dates})"
            advice = "renew it"
        else:
            problem = f"is not valid yet ({dates})"
            advice = "check this host's clock, or use a certificate valid now"
        logger.warning(
            "%s: the certificate in %s %s: clients that verify it will refuse every TLS "
            "connection; %s",
            key,
            path,
            problem,
            advice,
        )
    return True


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def _load_trust(context: ssl.SSLContext, key: str, path: str) -> None:
    _check_readable(key, path)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{key}: {path} holds no PEM CA certificate" + (f": {exc.reason}" if exc.reason else "")
        ) from None
