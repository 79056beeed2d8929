"""The access decision for one request (RocketMQ's ``PlainPermissionManager.validate``).

In RocketMQ's order: a client whose address is globally white-listed passes; otherwise the
request must carry an ``AccessKey`` of a known account; a client at the account's own white
address passes (no signature, no permission check); otherwise the ``Signature`` must match
(constant-time); then an admin code needs an admin account, and every resource the request
touches needs its permission, from the account's own lists or its defaults (an admin account
without lists may use every resource). The refusal's remark says what is
missing; an unknown key and a wrong signature read alike, so that a caller cannot tell which
half of the credentials was wrong, and no secret is ever in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.security.acl.permission import Perm, perm_allows
from ledgermq.security.acl.signature import ACCESS_KEY, signature_matches

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.security.acl.config import Account, AclConfig
    from ledgermq.security.acl.resources import Needs

__all__ = ["Decision", "authorize", "validate"]


@dataclass(frozen=True, slots=True)
class Decision:
    """``allowed``, and who asked (None: nobody signed) and why not (empty when allowed)."""

    allowed: bool
    access_key: str | None
    remark: str = ""
    authenticated: bool = True
    """False when the refusal is about who asks (no or wrong credentials), True when about
    what (a permission): gRPC answers UNAUTHORIZED for the one and FORBIDDEN for the other."""


def _owned(account: Account, kind: str, name: str) -> Perm:
    if kind == "group":
        return account.group_perms.get(name, account.default_group_perm)
    return account.topic_perms.get(name, account.default_topic_perm)


def validate(
    config: AclConfig,
    remote_ip: str,
    code: int,
    fields: Mapping[str, str],
    body: bytes | None,
    needs: Needs,
) -> Decision:
    """Whether a remoting request may proceed. ``remote_ip`` has no port; ``fields`` are the
    request's extFields as received; ``needs`` comes from ``request_needs`` or
    ``heartbeat_needs``."""
    return authorize(
        config,
        remote_ip,
        fields.get(ACCESS_KEY),
        lambda secret: signature_matches(fields, body, secret),
        f"request code {code}",
        needs,
    )


def authorize(
    config: AclConfig,
    remote_ip: str,
    access_key: str | None,
    signed_by: Callable[[str], bool],
    request: str,
    needs: Needs,
) -> Decision:
    """The decision for any front door: ``access_key`` as the request names it (None: not
    signed), ``signed_by(secret)`` whether its signature is that secret's (remoting: the
    extFields' HMAC; gRPC: the ``authorization`` header's), ``request`` what to call it in a
    remark."""
    if any(pattern.matches(remote_ip) for pattern in config.global_white):
        return Decision(True, None)
    if not access_key:
        return Decision(
            False, None, f"{request} needs credentials: ACL is on and it is not signed", False
        )
    account = config.accounts.get(access_key)
    if account is not None and account.white_address.matches(remote_ip):
        return Decision(True, access_key)  # RocketMQ: the account's own address is trusted
    if account is None or not signed_by(account.secret_key):
        # one answer for both: which half of the credentials was wrong is not for the caller
        return Decision(
            False, access_key, "the AccessKey and Signature do not match an account", False
        )
    if needs.admin and not account.admin:
        return Decision(False, access_key, f"{request} needs an admin account; {access_key} is not")
    if account.admin and not account.topic_perms and not account.group_perms:
        return Decision(True, access_key)  # RocketMQ: an admin without lists may use everything
    for resource, needed in needs.resources.items():
        if not perm_allows(needed, _owned(account, resource.kind, resource.name)):
            return Decision(
                False, access_key, f"{access_key} has no {needed.name} permission on {resource}"
            )
    return Decision(True, access_key)
