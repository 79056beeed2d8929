"""The broker config page's table: a replica's settings (GET_BROKER_CONFIG), read-only, with
anything that looks like a secret masked.

A LedgerMQ broker already answers its secrets (``aclSecretKey``, ``dLegerPeerSecret``, TLS key
passwords) as ``******``; the console masks by name as well, so a broker of another version or
a key added later is not shown in clear on a page anyone signed in can open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["MASK", "ConfigRow", "config_rows", "is_secret_key"]

MASK: Final = "******"
_SECRET: Final = re.compile(r"secret|password|passwd|token|credential|privatekey", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """Whether setting ``key`` names a secret (its value is never shown)."""
    return _SECRET.search(key) is not None


@dataclass(frozen=True)
class ConfigRow:
    key: str
    value: str
    masked: bool


def config_rows(settings: dict[str, str], query: str = "") -> list[ConfigRow]:
    """The settings sorted by name, secrets masked, only those whose name contains ``query``
    (case-insensitive) when one is given."""
    needle = query.strip().lower()
    return [
        ConfigRow(key, MASK, True) if is_secret_key(key) and value else ConfigRow(key, value, False)
        for key, value in sorted(settings.items(), key=lambda kv: kv[0].lower())
        if needle in key.lower()
    ]
