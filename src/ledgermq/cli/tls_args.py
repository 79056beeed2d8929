"""TLS on the command line: ``--tls``, ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and more.

``--tls-insecure`` too; for clusters whose ports serve TLS (``tls.server.mode`` permissive
or enforcing, ``net.tls``). Each option has an environment variable (``LEDGERMQ_TLS``,
``LEDGERMQ_TLS_CA``, ``LEDGERMQ_TLS_CERT``, ``LEDGERMQ_TLS_KEY``, ``LEDGERMQ_TLS_INSECURE``);
the flags win. Any of them but ``--tls`` itself implies ``--tls``. The password of an encrypted
client key is taken from ``LEDGERMQ_TLS_KEY_PASSWORD`` only: a flag would show it in ``ps``.

The server's certificate is verified against ``--tls-ca`` (the system's CAs without it), host
name included, unless ``--tls-insecure`` (RocketMQ's ``tls.test.mode.enable``) says to verify
nothing, which still encrypts but lets anyone on the path pose as the server.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from ledgermq.client import TlsClientConfig
from ledgermq.errors import ConfigError

__all__ = ["add_tls_args", "tls_from"]

_TRUE: Final = frozenset({"1", "true", "yes", "on"})


def add_tls_args(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """The TLS options. ``inherited``: on a subcommand whose parent has them too, so they may be
    given before or after the subcommand (the later one wins)."""
    default = argparse.SUPPRESS if inherited else None
    flag_default = argparse.SUPPRESS if inherited else False
    group = parser.add_argument_group("TLS (a cluster with tls.server.mode permissive|enforcing)")
    group.add_argument(
        "--tls",
        action="store_true",
        default=flag_default,
        help="connect with TLS ($LEDGERMQ_TLS=true)",
    )
    group.add_argument(
        "--tls-ca",
        default=default,
        metavar="PATH",
        help="PEM CA certificates to verify the servers with ($LEDGERMQ_TLS_CA; default: the "
        "system's CAs); implies --tls",
    )
    group.add_argument(
        "--tls-cert",
        default=default,
        metavar="PATH",
        help="PEM client certificate, for servers with tls.server.need.client.auth "
        "($LEDGERMQ_TLS_CERT); implies --tls",
    )
    group.add_argument(
        "--tls-key",
        default=default,
        metavar="PATH",
        help="its PEM private key ($LEDGERMQ_TLS_KEY; an encrypted key's password comes from "
        "$LEDGERMQ_TLS_KEY_PASSWORD); implies --tls",
    )
    group.add_argument(
        "--tls-insecure",
        action="store_true",
        default=flag_default,
        help="do not verify the servers' certificates: encrypted but not authenticated, for "
        "tests (tls.test.mode.enable; $LEDGERMQ_TLS_INSECURE=true); implies --tls",
    )


def tls_from(args: argparse.Namespace) -> TlsClientConfig | None:
    """The TLS settings the options and the environment give; None for plain connections.

    Raises:
        ConfigError: a certificate without its key, or a key without its certificate.
    """
    ca = getattr(args, "tls_ca", None) or os.environ.get("LEDGERMQ_TLS_CA") or None
    cert = getattr(args, "tls_cert", None) or os.environ.get("LEDGERMQ_TLS_CERT") or None
    key = getattr(args, "tls_key", None) or os.environ.get("LEDGERMQ_TLS_KEY") or None
    insecure = bool(getattr(args, "tls_insecure", False)) or _env_flag("LEDGERMQ_TLS_INSECURE")
    wanted = bool(getattr(args, "tls", False)) or _env_flag("LEDGERMQ_TLS")
    if not (wanted or ca or cert or key or insecure):
        return None
    if bool(cert) != bool(key):
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise ConfigError(f"{given} needs {missing} too: a client certificate and its key")
    return TlsClientConfig(
        trust_cert_path=ca,
        cert_path=cert,
        key_path=key,
        key_password=os.environ.get("LEDGERMQ_TLS_KEY_PASSWORD") or None,
        test_mode=insecure,
    )


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE
