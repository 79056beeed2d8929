"""A real file system that runs out of space: a tmpfs, for tests of full disks.

Mounting needs root (or CAP_SYS_ADMIN); ``tmpfs`` raises ``TmpfsUnavailable`` otherwise, so a
test can skip. The mount is always undone (lazily: processes killed a moment later may still
hold files in it), whatever the test does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["TmpfsUnavailableError", "resize_tmpfs", "tmpfs", "used_bytes"]


class TmpfsUnavailableError(OSError):
    """A tmpfs cannot be mounted here (not root, or in a container without the capability)."""


@contextlib.contextmanager
def tmpfs(mount_point: Path, size_bytes: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size_bytes`` on ``mount_point`` (created if needed) for the block."""
    mount_point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(  # noqa: S603 - our own arguments
        [
            _tool("mount"),
            "-t",
            "tmpfs",
            "-o",
            f"size={_kib(size_bytes)}k",
            "tmpfs",
            str(mount_point),
        ],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise TmpfsUnavailableError(
            f"cannot mount a tmpfs on {mount_point}: {result.stderr.decode().strip()}"
        )
    try:
        yield mount_point
    finally:
        subprocess.run(  # noqa: S603 - our own arguments
            [_tool("umount"), "-l", str(mount_point)], capture_output=True, check=False
        )


def resize_tmpfs(mount_point: Path, size_bytes: int) -> None:
    """Grow or shrink a mounted tmpfs (not below what its files use)."""
    subprocess.run(  # noqa: S603 - our own arguments
        [_tool("mount"), "-o", f"remount,size={_kib(size_bytes)}k", str(mount_point)],
        capture_output=True,
        check=True,
    )


def used_bytes(mount_point: Path) -> int:
    """Bytes in use on the file system of ``mount_point``."""
    stats = os.statvfs(mount_point)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def _kib(size_bytes: int) -> int:
    return -(-size_bytes // 4096) * 4  # whole pages


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise TmpfsUnavailableError(f"no {name} command here")
    return path
