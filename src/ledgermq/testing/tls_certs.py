"""Throw-away certificates for TLS tests, made with the ``openssl`` command line at test time.

Nothing secret is checked in: each test session makes a CA, a server certificate for
``127.0.0.1`` and ``localhost`` (usable as a client certificate too, as a replica's is), a client
certificate, and a second CA that signed none of them (the "wrong CA"). P-256 keys: fast to make.
The standard library cannot make certificates, and the ``cryptography`` package is not a
dependency; ``openssl`` is on every machine that runs the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.security.certs import (
    SERVER_EXTENSIONS,
    make_ca,
    make_leaf,
    openssl,
    openssl_available,
)

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CertificateSet", "make_certificates", "openssl_available"]

_DAYS = 2


@dataclass(frozen=True)
class CertificateSet:
    """Paths of PEM files, all in one directory."""

    ca: Path
    """The CA that signed ``server`` and ``client``."""
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing here: trusting only it must fail."""
    encrypted_server_key: Path
    """``server_key`` encrypted with the password ``key_password``."""
    key_password: str = "test-key-password"  # noqa: S105 - a throw-away test key's password


def make_certificates(directory: Path) -> CertificateSet:
    """Make the certificates of ``CertificateSet`` in ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca(directory, "ca", "LedgerMQ test CA", _DAYS)
    other_ca, _ = make_ca(directory, "other-ca", "LedgerMQ unrelated test CA", _DAYS)
    common = "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    server_cert, server_key = make_leaf(
        directory, "server", "localhost", ca, SERVER_EXTENSIONS, _DAYS
    )
    client_cert, client_key = make_leaf(
        directory,
        "client",
        "ledgermq-test-client",
        ca,
        common + "extendedKeyUsage=clientAuth\n",
        _DAYS,
    )
    certificates = CertificateSet(
        ca=ca[0],
        server_cert=server_cert,
        server_key=server_key,
        client_cert=client_cert,
        client_key=client_key,
        other_ca=other_ca,
        encrypted_server_key=directory / "server-encrypted.key",
    )
    openssl(
        "pkey", "-in", str(server_key), "-aes256",
        "-passout", f"pass:{certificates.key_password}",
        "-out", str(certificates.encrypted_server_key),
        cwd=directory,
    )  # fmt: skip
    return certificates
