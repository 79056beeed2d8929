"""``ledgermq quickstart --secure``: the keys, certificates and ACL file of a local secured
cluster, made once in the data folder and reused by later runs.

Everything is in ``<data>/secure/``: a private CA (``ca.pem``) and a loopback server
certificate every port serves and every replica dials its peers with; ``plain_acl.yml`` with an
admin account (used by the brokers for their registrations, by the quickstart's self-check and
by the console) and an application account (PUB and SUB on every topic and group, no admin);
``admin.yml`` and ``app.yml`` with those accounts in RocketMQ's ``tools.yml`` format, for
``--credentials-file`` / ``LEDGERMQ_CREDENTIALS_FILE``; and ``peer-secret`` for the ledger
group. Secrets come from ``secrets.token_urlsafe`` and the files are readable by their owner
only.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ledgermq.client import Credentials
from ledgermq.net.tls import TlsClientConfig, TlsMode, TlsServerConfig
from ledgermq.security.certs import SERVER_EXTENSIONS, make_ca, make_leaf

__all__ = ["SecureSetup", "prepare_secure"]

_DAYS: Final = 825
"""The longest validity browsers and TLS libraries accept for a leaf certificate."""


@dataclass(frozen=True)
class SecureSetup:
    """Where the material is, and the settings that use it."""

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    acl_file: Path
    admin: Credentials
    app: Credentials
    peer_secret: str

    def server_tls(self) -> TlsServerConfig:
        return TlsServerConfig(
            mode=TlsMode.ENFORCING,
            cert_path=str(self.server_cert),
            key_path=str(self.server_key),
            trust_cert_path=str(self.ca),
        )

    def client_tls(self) -> TlsClientConfig:
        return TlsClientConfig(trust_cert_path=str(self.ca))

    def broker_tls_settings(self) -> dict[str, str]:
        """The ``tls.*`` keys of a replica: TLS only, its peers dialled with the same
        certificate and trusting the same CA."""
        return {
            "tls.server.mode": "enforcing",
            "tls.server.certPath": str(self.server_cert),
            "tls.server.keyPath": str(self.server_key),
            "tls.server.trustCertPath": str(self.ca),
            "tls.client.trustCertPath": str(self.ca),
        }


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _account(path: Path, prefix: str) -> Credentials:
    """The account in ``path`` (tools.yml format), made with fresh secrets if it is not there."""
    if not path.exists():
        key = f"{prefix}-{secrets.token_hex(4)}"
        _write_private(path, f"accessKey: {key}\nsecretKey: {secrets.token_urlsafe(24)}\n")
    fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    return Credentials(fields["accessKey"].strip(), fields["secretKey"].strip())


def prepare_secure(data_dir: str) -> SecureSetup:
    """The material under ``<data_dir>/secure``, made where missing.

    Raises:
        ConfigError: the ``openssl`` command is missing or fails.
    """
    directory = Path(data_dir) / "secure"
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    ca = (directory / "ca.pem", directory / "ca.key")
    if not ca[0].exists():
        ca = make_ca(directory, "ca", "LedgerMQ quickstart CA", _DAYS)
    server = (directory / "server.pem", directory / "server.key")
    if not server[0].exists():
        server = make_leaf(directory, "server", "localhost", ca, SERVER_EXTENSIONS, _DAYS)
    admin = _account(directory / "admin.yml", "admin")
    app = _account(directory / "app.yml", "app")
    acl = directory / "plain_acl.yml"
    _write_private(
        acl,
        "# Made by ledgermq quickstart --secure (RocketMQ's plain ACL schema).\n"
        "accounts:\n"
        f"  - accessKey: {admin.access_key}\n    secretKey: {admin.secret_key}\n"
        "    admin: true\n"
        f"  - accessKey: {app.access_key}\n    secretKey: {app.secret_key}\n"
        "    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: SUB\n",
    )
    peer = directory / "peer-secret"
    if not peer.exists():
        _write_private(peer, secrets.token_urlsafe(32) + "\n")
    return SecureSetup(
        directory=directory,
        ca=ca[0],
        server_cert=server[0],
        server_key=server[1],
        acl_file=acl,
        admin=admin,
        app=app,
        peer_secret=peer.read_text().strip(),
    )
