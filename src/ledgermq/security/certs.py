"""Certificates made locally with the ``openssl`` command line: a private CA and a server
certificate for loopback, for ``ledgermq quickstart --secure`` and the TLS tests.

The standard library cannot make certificates and ``cryptography`` is not a dependency;
``openssl`` is on every Debian-like machine. P-256 keys: quick to make, accepted everywhere.
A deployment uses certificates from its own CA instead (``tls.*`` settings).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["make_ca", "make_leaf", "openssl", "openssl_available"]

SERVER_EXTENSIONS = (
    "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
)
"""A server certificate for 127.0.0.1 and localhost, usable as a client one too (as a
replica's is, dialling its peers)."""


def openssl_available() -> bool:
    """Whether the ``openssl`` command is on PATH."""
    return shutil.which("openssl") is not None


def openssl(*args: str, cwd: Path) -> None:
    """Run ``openssl ARGS`` in ``cwd``; ConfigError (openssl's last line) if it fails."""
    try:
        subprocess.run(  # noqa: S603 - fixed arguments, no shell
            ["openssl", *args],  # noqa: S607 - whichever openssl is on PATH
            cwd=cwd,
            check=True,
            capture_output=True,
        )
    except FileNotFoundError:
        raise ConfigError(
            "the openssl command is needed to make certificates (apt-get install openssl)"
        ) from None
    except subprocess.CalledProcessError as exc:
        detail = exc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise ConfigError(f"openssl {args[0]} failed: {' '.join(detail)}") from None


def make_ca(directory: Path, name: str, subject: str, days: int) -> tuple[Path, Path]:
    """A self-signed CA: (``<name>.pem``, ``<name>.key``) in ``directory``."""
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(cert), "-days", str(days), "-subj", f"/CN={subject}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    return cert, key


def make_leaf(
    directory: Path, name: str, subject: str, ca: tuple[Path, Path], extensions: str, days: int
) -> tuple[Path, Path]:
    """A certificate ``ca`` signs, with ``extensions`` (an openssl extfile's text):
    (``<name>.pem``, ``<name>.key``) in ``directory``."""
    key, csr, cert = (directory / f"{name}{suffix}" for suffix in (".key", ".csr", ".pem"))
    ext = directory / f"{name}.ext"
    ext.write_text(extensions, encoding="ascii")
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={subject}",
        cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-out", str(cert), "-days", str(days), "-extfile", str(ext),
        cwd=directory,
    )  # fmt: skip
    return cert, key
