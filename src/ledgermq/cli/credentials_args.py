"""Credentials on the command line: ``--access-key`` / ``--secret-key``, the environment, a file.

In order of precedence: the flags; ``LEDGERMQ_ACCESS_KEY`` / ``LEDGERMQ_SECRET_KEY`` (and
``LEDGERMQ_SECURITY_TOKEN``); a credentials file given with ``--credentials-file`` or
``LEDGERMQ_CREDENTIALS_FILE``, in the format of RocketMQ's ``conf/tools.yml`` (``accessKey:`` and
``secretKey:``, YAML). A secret on the command line is visible to other users in ``ps``: the
environment or a file readable only by you is the safer habit. Half a pair is an error.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

import yaml

from ledgermq.client import Credentials
from ledgermq.client.credentials import strong_signature_from_env
from ledgermq.errors import ConfigError

__all__ = ["add_credential_args", "credentials_from"]

_FLAGS: Final = ("access_key", "secret_key", "credentials_file")


def add_credential_args(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """The three options. ``inherited``: on a subcommand whose parent has them too, so they may
    be given before or after the subcommand (the later one wins)."""
    default = argparse.SUPPRESS if inherited else None
    group = parser.add_argument_group("credentials (a cluster with aclEnable=true)")
    group.add_argument("--access-key", default=default, help="ACL account ($LEDGERMQ_ACCESS_KEY)")
    group.add_argument(
        "--secret-key",
        default=default,
        help="its secret ($LEDGERMQ_SECRET_KEY; a flag shows in ps: prefer the environment "
        "or --credentials-file)",
    )
    group.add_argument(
        "--credentials-file",
        default=default,
        metavar="PATH",
        help="YAML with accessKey and secretKey, like RocketMQ's conf/tools.yml "
        "($LEDGERMQ_CREDENTIALS_FILE)",
    )


def _from_file(path: str) -> tuple[str | None, str | None, str | None]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read the credentials file {path}: {exc.strerror}") from None
    except yaml.YAMLError:
        raise ConfigError(f"the credentials file {path} is not valid YAML") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the credentials file {path} must hold accessKey and secretKey")

    def text(key: str) -> str | None:
        value = data.get(key)
        return None if value is None else str(value)

    return text("accessKey"), text("secretKey"), text("securityToken")


def credentials_from(args: argparse.Namespace) -> Credentials | None:
    """The credentials the options, the environment or the file give; None if none do.

    Raises:
        ConfigError: only one of access key and secret key, or a bad credentials file.
    """
    access_key = getattr(args, "access_key", None) or os.environ.get("LEDGERMQ_ACCESS_KEY")
    secret_key = getattr(args, "secret_key", None) or os.environ.get("LEDGERMQ_SECRET_KEY")
    token = os.environ.get("LEDGERMQ_SECURITY_TOKEN")
    path = getattr(args, "credentials_file", None) or os.environ.get("LEDGERMQ_CREDENTIALS_FILE")
    if path and not (access_key or secret_key):
        access_key, secret_key, token = _from_file(path)
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        missing = "--secret-key" if access_key else "--access-key"
        raise ConfigError(
            f"credentials need both an access key and a secret key: {missing} is missing"
        )
    return Credentials(access_key, secret_key, token, strong_signature=strong_signature_from_env())
