"""Throw-away certificates for TLS tests, made with the ``openssl`` command line at test time.

Nothing secret is checked in: each test session makes a CA, a server certificate for
``127.0.0.1`` and ``localhost`` (usable as a client certificate too, as a replica's is), a client
certificate, and a second CA that signed none of them (the "wrong CA"). P-256 keys: fast to make.
The standard library cannot make certificates, and the ``cryptography`` package is not a
dependency; ``openssl`` is on every machine that runs the tests.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CertificateSet", "make_certificates", "openssl_available"]

_DAYS = "2"


def openssl_available() -> bool:
    """Whether the ``openssl`` command is on PATH (tests skip without it)."""
    return shutil.which("openssl") is not None


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


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(  # noqa: S603 - fixed arguments, no shell
        ["openssl", *args],  # noqa: S607 - whichever openssl is on PATH
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _ca(directory: Path, name: str, subject: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", _DAYS, "-subj", f"/CN={subject}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return cert, key


def _leaf(
    directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: str
) -> tuple[Path, Path]:
    key, csr, cert = (directory / f"{name}{suffix}" for suffix in (".key", ".csr", ".pem"))
    ext = directory / f"{name}.ext"
    ext.write_text(extensions, encoding="ascii")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={subject}",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-out", str(cert), "-days", _DAYS, "-extfile", str(ext),
        cwd=directory,
    )  # fmt: skip
    return cert, key


def make_certificates(directory: Path) -> CertificateSet:
    """Make the certificates of ``CertificateSet`` in ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca", "LedgerMQ test CA")
    other_ca, _ = _ca(directory, "other-ca", "LedgerMQ unrelated test CA")
    common = "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    server_cert, server_key = _leaf(
        directory,
        "server",
        "localhost",
        ca,
        common
        + "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        + "extendedKeyUsage=serverAuth,clientAuth\n",
    )
    client_cert, client_key = _leaf(
        directory, "client", "ledgermq-test-client", ca, common + "extendedKeyUsage=clientAuth\n"
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
    _openssl(
        "pkey", "-in", str(server_key), "-aes256",
        "-passout", f"pass:{certificates.key_password}",
        "-out", str(certificates.encrypted_server_key),
        cwd=directory,
    )  # fmt: skip
    return certificates
