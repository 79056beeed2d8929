"""Permissions of RocketMQ's plain ACL (``org.apache.rocketmq.acl.common.Permission``).

The bit values are RocketMQ's. Unlike RocketMQ, which reads any unknown permission string as
DENY, an ACL file with an unknown permission is refused: a typo must not silently lock out (or,
worse, quietly change) an account.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["Perm", "parse_perm", "perm_allows"]


class Perm(enum.IntFlag):
    """What an account may do with a topic or a consumer group."""

    NONE = 0
    DENY = 1
    ANY = 2
    """Needed by requests that only want some access (PUB or SUB), never granted by a file."""
    PUB = 4
    SUB = 8


_NAMES: Final = {
    "DENY": Perm.DENY,
    "PUB": Perm.PUB,
    "SUB": Perm.SUB,
    "PUB|SUB": Perm.PUB | Perm.SUB,
    "SUB|PUB": Perm.PUB | Perm.SUB,
}


def parse_perm(text: str) -> Perm:
    """``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB`` (either order, spaces allowed) as a ``Perm``.

    Raises:
        ValueError: anything else.
    """
    key = "".join(text.split()).upper()
    perm = _NAMES.get(key)
    if perm is None:
        raise ValueError(f"unknown permission {text!r}: use DENY, PUB, SUB or PUB|SUB")
    return perm


def perm_allows(needed: Perm, owned: Perm) -> bool:
    """Whether ``owned`` grants ``needed`` (``Permission.checkPermission``): ANY asks for PUB or
    SUB; DENY in ``owned`` grants nothing."""
    if owned & Perm.DENY:
        return False
    if needed & Perm.ANY:
        return bool(owned & (Perm.PUB | Perm.SUB))
    return (needed & owned) == needed and needed != Perm.NONE
