"""Quorum arithmetic, pure (etcd ``quorum/majority.go``; spec-replication-storage section 5.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["quorum_index"]


def quorum_index(watermarks: Sequence[int], quorum: int) -> int:
    """The highest index that at least ``quorum`` of the ``watermarks`` have reached."""
    if quorum < 1 or quorum > len(watermarks):
        raise ValueError(f"quorum {quorum} of {len(watermarks)} members")
    return sorted(watermarks, reverse=True)[quorum - 1]
