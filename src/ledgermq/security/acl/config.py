"""``plain_acl.yml``: RocketMQ 4.x's plain ACL file, parsed and checked.

The schema is RocketMQ's (``PlainPermissionManager``): ``globalWhiteRemoteAddresses`` and
``accounts``, each with ``accessKey``, ``secretKey``, ``whiteRemoteAddress``, ``admin``,
``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` and ``groupPerms`` (lists of
``name=PERM``). Several files (``conf/plain_acl.yml`` and ``conf/acl/*.yml``) make one
configuration. Keys and secrets must be longer than 6 characters, as in RocketMQ; unlike
RocketMQ, an unknown field or permission is an error, so a typo is found when the file is read
(at start, or on a reload, which then keeps the old configuration). Error messages name the file
and the account, never a secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import yaml

from ledgermq.errors import LedgerMQError
from ledgermq.security.acl.addresses import AddressPattern, parse_address_pattern
from ledgermq.security.acl.permission import Perm, parse_perm

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Account", "AclConfig", "AclConfigError", "parse_acl_config"]

_MIN_KEY_CHARS: Final = 7
"""RocketMQ refuses keys and secrets of 6 characters or fewer."""
_ACCOUNT_FIELDS: Final = frozenset(
    {
        "accessKey",
        "secretKey",
        "whiteRemoteAddress",
        "admin",
        "defaultTopicPerm",
        "defaultGroupPerm",
        "topicPerms",
        "groupPerms",
    }
)
_FILE_FIELDS: Final = frozenset({"globalWhiteRemoteAddresses", "accounts", "dataVersion"})


class AclConfigError(LedgerMQError):
    """An ACL file that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Account:
    """One account of the ACL; ``secret_key`` stays inside ``ledgermq.security.acl``."""

    access_key: str
    secret_key: str = field(repr=False)
    white_address: AddressPattern
    admin: bool
    default_topic_perm: Perm
    default_group_perm: Perm
    topic_perms: Mapping[str, Perm]
    group_perms: Mapping[str, Perm]
    source: str
    """The file it came from."""


@dataclass(frozen=True)
class AclConfig:
    """Every account and global white address of the ACL files."""

    global_white: tuple[AddressPattern, ...]
    accounts: Mapping[str, Account]
    """By access key."""


def _text(value: object, what: str, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AclConfigError(f"{where}: {what} must be a string")
    return str(value)


def _bool(value: object, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where}: admin must be true or false, got {value!r}")


def _perm(value: object, what: str, where: str) -> Perm:
    if value is None:
        return Perm.DENY  # RocketMQ's default: nothing unless granted
    try:
        return parse_perm(_text(value, what, where))
    except ValueError as exc:
        raise AclConfigError(f"{where}: {what}: {exc}") from None


def _perm_list(value: object, what: str, where: str) -> dict[str, Perm]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: {what} must be a list of name=PERM")
    perms: dict[str, Perm] = {}
    for item in value:
        entry = _text(item, what, where)
        name, sep, perm_text = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise AclConfigError(f"{where}: {what} entry {entry!r} is not name=PERM")
        perms[name] = _perm(perm_text, f"{what} of {name!r}", where)
    return perms


def _address(value: object, where: str) -> AddressPattern:
    try:
        return parse_address_pattern(None if value is None else _text(value, "address", where))
    except ValueError as exc:
        raise AclConfigError(f"{where}: {exc}") from None


def _account(raw: object, source: str, number: int) -> Account:
    where = f"{source}, account {number}"
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: an account must be a mapping")
    unknown = sorted(set(map(str, raw)) - _ACCOUNT_FIELDS)
    if unknown:
        raise AclConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    access_key = _text(raw.get("accessKey"), "accessKey", where) if "accessKey" in raw else ""
    where = f"{source}, account {access_key or number!s}"
    secret = raw.get("secretKey")
    secret_key = "" if secret is None else _text(secret, "secretKey", where)
    if len(access_key) < _MIN_KEY_CHARS or len(secret_key) < _MIN_KEY_CHARS:
        raise AclConfigError(
            f"{where}: accessKey and secretKey must both be set and longer than 6 characters"
        )
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white_address=_address(raw.get("whiteRemoteAddress"), where),
        admin=_bool(raw.get("admin"), where),
        default_topic_perm=_perm(raw.get("defaultTopicPerm"), "defaultTopicPerm", where),
        default_group_perm=_perm(raw.get("defaultGroupPerm"), "defaultGroupPerm", where),
        topic_perms=_perm_list(raw.get("topicPerms"), "topicPerms", where),
        group_perms=_perm_list(raw.get("groupPerms"), "groupPerms", where),
        source=source,
    )


def parse_acl_config(files: Mapping[str, str]) -> AclConfig:
    """One configuration from the text of each ACL file (by name, for messages).

    Raises:
        AclConfigError: a file is not YAML or breaks the schema, or two accounts share a key.
    """
    white: list[AddressPattern] = []
    accounts: dict[str, Account] = {}
    for source in sorted(files):
        try:
            data = yaml.safe_load(files[source])
        except yaml.YAMLError as exc:
            raise AclConfigError(f"{source} is not valid YAML: {exc}") from None
        if data is None:
            continue  # an empty file grants nothing
        if not isinstance(data, dict):
            raise AclConfigError(f"{source}: the top level must be a mapping")
        unknown = sorted(set(map(str, data)) - _FILE_FIELDS)
        if unknown:
            raise AclConfigError(f"{source}: unknown field(s) {', '.join(unknown)}")
        addresses = data.get("globalWhiteRemoteAddresses") or []
        if not isinstance(addresses, list):
            raise AclConfigError(f"{source}: globalWhiteRemoteAddresses must be a list")
        white.extend(_address(a, source) for a in addresses)
        raw_accounts = data.get("accounts") or []
        if not isinstance(raw_accounts, list):
            raise AclConfigError(f"{source}: accounts must be a list")
        for number, raw in enumerate(raw_accounts, 1):
            account = _account(raw, source, number)
            other = accounts.get(account.access_key)
            if other is not None:
                raise AclConfigError(
                    f"{source}: accessKey {account.access_key!r} is also defined in {other.source}"
                )
            accounts[account.access_key] = account
    return AclConfig(tuple(w for w in white if w.text), accounts)
