"""When old segments are deleted: DLedger's ``CleanSpaceService`` rules as pure functions.

Spec-replication-storage.md section 1.14. Two triggers delete the oldest data segments:

- **time**: a segment whose file was last modified ``fileReservedHours`` ago or earlier is
  expired; expired segments are deleted at the hours listed in ``deleteWhen`` (``"04"`` = 4 am
  local time), or at any hour once the disk is more than ``diskSpaceRatioToCheckExpired`` full;
- **space**: above ``diskSpaceRatioToForceClean`` (and with ``enableDiskForceClean``) segments
  are deleted whatever their age.

Deletion goes oldest first, stops at the first segment that may not go (so the log never has
holes) and takes at most 10 segments per pass. Above ``diskFullRatio`` appends fail.

One deliberate difference from DLedger: DLedger's force clean deletes regardless of commit state.
Here a segment is only ever eligible when every entry in it is committed and it is not the last
segment (the store computes ``eligible``), so retention can never delete data the cluster has
not agreed on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RetentionConfig", "segments_to_delete"]


@dataclass(frozen=True, slots=True)
class RetentionConfig:
    """Retention settings, named after DLedger's ``DLedgerConfig`` keys."""

    file_reserved_hours: float = 72.0
    """``fileReservedHours``: age after which a segment expires (floored to 1 h, as DLedger)."""
    delete_when: str = "04"
    """``deleteWhen``: ``;``-separated hours of the day (local time) when expired files go."""
    disk_ratio_check_expired: float = 0.70
    """``diskSpaceRatioToCheckExpired``: above it expired files go at any hour."""
    disk_ratio_force_clean: float = 0.85
    """``diskSpaceRatioToForceClean``: above it files go regardless of age (floored to 0.50)."""
    enable_force_clean: bool = True
    """``enableDiskForceClean``."""
    max_deletes_per_pass: int = 10

    def __post_init__(self) -> None:
        if self.file_reserved_hours <= 0:
            raise ConfigError(f"fileReservedHours must be positive, got {self.file_reserved_hours}")
        for ratio_name in ("disk_ratio_check_expired", "disk_ratio_force_clean"):
            value = getattr(self, ratio_name)
            if not 0 < value <= 1:
                raise ConfigError(f"{ratio_name} must be in (0, 1], got {value}")
        self.delete_hours()  # validates

    @property
    def reserved_seconds(self) -> float:
        return max(self.file_reserved_hours, 1.0) * 3600.0

    @property
    def force_clean_ratio(self) -> float:
        return max(self.disk_ratio_force_clean, 0.50)

    @property
    def disk_full_ratio(self) -> float:
        """Above this used fraction appends fail with ``DiskFullError``: min(force + 0.05, 0.95)."""
        return min(self.force_clean_ratio + 0.05, 0.95)

    def delete_hours(self) -> frozenset[int]:
        hours: set[int] = set()
        for part in self.delete_when.split(";"):
            text = part.strip()
            if not text:
                continue
            if not text.isdigit() or not 0 <= int(text) <= 23:
                raise ConfigError(
                    f"deleteWhen must list hours 00-23 separated by ';', got {self.delete_when!r}"
                )
            hours.add(int(text))
        return frozenset(hours)


def segments_to_delete(
    mtimes_s: Sequence[float],
    eligible: int,
    now_s: float,
    disk_ratio: float,
    config: RetentionConfig,
) -> int:
    """How many of the oldest segments to delete now.

    Args:
        mtimes_s: modification time of each data segment, oldest segment first (seconds).
        eligible: how many of the oldest segments may be deleted at all (fully committed, not
            the last segment).
        now_s: current wall-clock time in seconds since the epoch.
        disk_ratio: used fraction of the disk holding the store (0..1).
        config: the retention settings.
    """
    hour = time.localtime(now_s).tm_hour
    time_up = hour in config.delete_hours()
    check_expired = disk_ratio > config.disk_ratio_check_expired
    force = config.enable_force_clean and disk_ratio > config.force_clean_ratio
    if not (time_up or check_expired or force):
        return 0
    count = 0
    for mtime in mtimes_s[: min(eligible, config.max_deletes_per_pass)]:
        if not force and now_s < mtime + config.reserved_seconds:
            break
        count += 1
    return count
