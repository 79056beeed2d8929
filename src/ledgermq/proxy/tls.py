"""TLS on the gRPC door: the broker's ``tls.server.*`` settings as grpcio server credentials.

The gRPC door takes the same ``tls.*`` keys as the remoting and ledger ports
(``ledgermq.net.tls``): the same certificate, key and CA. grpcio terminates TLS in its C core,
so the settings become ``grpc.ServerCredentials`` instead of an ``ssl.SSLContext``, and a few
modes cannot mean exactly what they mean on remoting:

- ``tls.server.mode=disabled``: plaintext HTTP/2 (h2c), as before TLS existed.
- ``enforcing``: TLS only. A plaintext client fails at the HTTP/2 preface (gRPC UNAVAILABLE on
  its side); nothing reaches the servicer.
- ``permissive``: plaintext and TLS on the one port, the first bytes of each connection
  deciding, as RocketMQ's proxy does (its ``ProxyAndTlsProtocolNegotiator`` sniffs a TLS record
  header). grpcio cannot serve both on one port, so the door listens there itself and hands
  each connection to one of two grpcio listeners on loopback (``ledgermq.proxy.unify``).
- ``tls.server.need.client.auth=require``: mutual TLS; a client without a certificate the
  ``tls.server.trustCertPath`` CAs signed fails its handshake.
- ``optional``: grpcio can either require a client certificate or not ask for one, nothing in
  between, so the gRPC port does not ask (RocketMQ's proxy never asks on its gRPC port either:
  ``ClientAuth.NONE``). Who may do what is the ACL's ``authorization`` header's business there.
- ``tls.server.keyPassword``: grpcio reads only unencrypted PEM keys, so an encrypted key is
  decrypted in memory with the ``openssl`` command at start (nothing is written to disk).

Every file is checked by ``TlsServerConfig.server_context`` first, so a missing, unreadable or
mismatched certificate, key or CA is one ``ConfigError`` naming the key and the path at start,
exactly as on the remoting port, never a grpcio handshake failure per connection later.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from ledgermq.errors import ConfigError
from ledgermq.net.tls import ClientAuth, TlsMode

if TYPE_CHECKING:
    from ledgermq.net.tls import TlsServerConfig

__all__ = ["DoorTls", "door_tls"]

_PASSWORD_VARIABLE = "LEDGERMQ_GRPC_KEY_PASSWORD"  # noqa: S105 - a variable's name, no secret
"""How the key's password reaches ``openssl pkey`` (the environment, never its argv)."""


@dataclass(frozen=True, slots=True)
class DoorTls:
    """What the gRPC door serves on its port."""

    credentials: grpc.ServerCredentials | None
    """TLS credentials (None: plaintext only)."""
    plaintext_too: bool
    """``permissive``: plaintext connections are served on the same port as TLS ones."""
    mutual: bool
    """Clients must show a certificate the trusted CAs signed."""

    @property
    def kind(self) -> str:
        """What the port speaks, for the "serves gRPC" log line."""
        if self.credentials is None:
            return "plaintext"
        if self.plaintext_too:
            return "plaintext and TLS"
        return "mutual TLS" if self.mutual else "TLS"


def door_tls(tls: TlsServerConfig) -> DoorTls:
    """The door's TLS from the broker's ``tls.server.*`` settings.

    Raises:
        ConfigError: a certificate, key or CA file is missing, unreadable or not what its key
            says; an encrypted key without its password, or without ``openssl`` to decrypt it.
    """
    if tls.mode is TlsMode.DISABLED:
        return DoorTls(credentials=None, plaintext_too=True, mutual=False)
    tls.server_context()  # every file checked, with errors that name the key and the path
    assert tls.cert_path is not None
    assert tls.key_path is not None
    chain = _read(tls.cert_path)
    key = _read(tls.key_path)
    if b"ENCRYPTED" in key:
        key = _decrypted_key(tls.key_path, tls.key_password)
    mutual = tls.client_auth is ClientAuth.REQUIRE
    roots = None
    if mutual:
        assert tls.trust_cert_path is not None
        roots = _read(tls.trust_cert_path)
    credentials = grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=roots, require_client_auth=mutual
    )
    return DoorTls(
        credentials=credentials, plaintext_too=tls.mode is TlsMode.PERMISSIVE, mutual=mutual
    )


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _decrypted_key(path: str, password: str | None) -> bytes:
    """The PEM of the encrypted key at ``path``, decrypted by ``openssl pkey`` in memory."""
    if not password:  # server_context has already refused it; kept for a clear message
        raise ConfigError(f"tls.server.keyPath: {path} is encrypted: set tls.server.keyPassword")
    if shutil.which("openssl") is None:
        raise ConfigError(
            f"tls.server.keyPath: {path} is encrypted and the gRPC door (grpcio) reads only "
            "unencrypted keys; the openssl command, needed to decrypt it, is not on PATH: "
            "install it, give an unencrypted key, or turn the gRPC door off (grpcServerPort=-1)"
        )
    done = subprocess.run(  # noqa: S603 - fixed arguments, no shell
        ["openssl", "pkey", "-in", path, "-passin", f"env:{_PASSWORD_VARIABLE}"],  # noqa: S607
        env={**os.environ, _PASSWORD_VARIABLE: password},
        capture_output=True,
        check=False,
    )
    if done.returncode != 0 or b"PRIVATE KEY" not in done.stdout:
        raise ConfigError(
            f"tls.server.keyPath: openssl cannot decrypt {path} with tls.server.keyPassword"
        )
    return done.stdout
