"""Credentials for a cluster with ACL on (RocketMQ's ``SessionCredentials``).

Given to a ``Producer``, a consumer or ``Admin`` as ``credentials=``, they make the client sign
every request it sends, as RocketMQ's ``AclClientRPCHook`` does: ``AccessKey`` (and
``SecurityToken``) added to the request's extFields and a ``Signature`` over them and the body
(``ledgermq.security.acl.signature``). The secret key never goes on the wire.

``strong_signature=True`` adds LedgerMQ's strong signature (``ledgermq.security.acl.strong``: the
request code, the time, a fresh nonce, unambiguous fields and the body, under HMAC-SHA256),
which a server with ``aclRequireStrongSignature=true`` requires: a captured request is then
accepted once, as what it was, within 5 minutes. Off by default: it needs the client's clock
within 5 minutes of the servers', and RocketMQ's own clients of the same cluster cannot send it
(RocketMQ servers ignore it: RocketMQ's signature is sent as well).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError
from ledgermq.security.acl.signature import sign_request
from ledgermq.security.acl.strong import sign_strong

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["STRONG_SIGNATURE_ENV", "Credentials", "strong_signature_from_env"]

STRONG_SIGNATURE_ENV: Final = "LEDGERMQ_STRONG_SIGNATURE"
"""Environment variable that turns the strong signature on for the CLI and the console."""


def strong_signature_from_env() -> bool:
    """Whether ``LEDGERMQ_STRONG_SIGNATURE`` asks for the strong signature (1, true, yes)."""
    return os.environ.get(STRONG_SIGNATURE_ENV, "").strip().lower() in {"1", "true", "yes"}


@dataclass(frozen=True)
class Credentials:
    """An account of the cluster's ACL (``plain_acl.yml``)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)
    strong_signature: bool = False
    """Sign with LedgerMQ's strong signature too (see the module docstring)."""

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ConfigError("credentials need both an access key and a secret key")

    def sign(
        self, ext_fields: Mapping[str, str], body: bytes | None, code: int | None = None
    ) -> dict[str, str]:
        """``ext_fields`` with ``AccessKey``, ``SecurityToken`` (if any) and ``Signature``,
        and the strong signature of request ``code`` when ``strong_signature`` is on."""
        if self.strong_signature:
            if code is None:
                raise ValueError("a strong signature covers the request code: give it")
            return sign_strong(
                code,
                ext_fields,
                body,
                self.access_key,
                self.secret_key,
                now_s=SystemClock().wall_time_s(),
                nonce=secrets.token_hex(16),
                security_token=self.security_token,
            )
        return sign_request(ext_fields, body, self.access_key, self.secret_key, self.security_token)
