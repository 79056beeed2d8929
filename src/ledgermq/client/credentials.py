"""Credentials for a cluster with ACL on (RocketMQ's ``SessionCredentials``).

Given to a ``Producer``, a consumer or ``Admin`` as ``credentials=``, they make the client sign
every request it sends, as RocketMQ's ``AclClientRPCHook`` does: ``AccessKey`` (and
``SecurityToken``) added to the request's extFields and a ``Signature`` over them and the body
(``ledgermq.acl.signature``). The secret key never goes on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledgermq.acl.signature import sign_request
from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Credentials"]


@dataclass(frozen=True)
class Credentials:
    """An account of the cluster's ACL (``plain_acl.yml``)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ConfigError("credentials need both an access key and a secret key")

    def sign(self, ext_fields: Mapping[str, str], body: bytes | None) -> dict[str, str]:
        """``ext_fields`` with ``AccessKey``, ``SecurityToken`` (if any) and ``Signature``."""
        return sign_request(ext_fields, body, self.access_key, self.secret_key, self.security_token)
