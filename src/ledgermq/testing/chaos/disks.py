"""Small loop-mounted file systems, one per replica, that a fault can fill up (disk full).

Each replica's store directory is the mount point of an ext4 file system in an image file
``<dir>/lmqc<pid>-<node>.img`` (``mount -o loop``, no reserved blocks, so that root cannot
write past "full" either). ``fill`` takes every free block with a filler file (allocated, not
written), ``drain`` deletes it. Needs root. ``close`` unmounts (the loop device goes with it);
``cleanup_leftover_disks`` unmounts the disks of runs whose process is gone, found by their
image's name in ``losetup``'s list.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

from ledgermq.testing.chaos.netns import NAMESPACE_PREFIX, pid_alive

__all__ = ["DiskError", "LoopDisks", "cleanup_leftover_disks"]

_FILLER: Final = ".chaos-filler"
_TIMEOUT_S: Final = 30.0
_IMAGE: Final = re.compile(rf"^{NAMESPACE_PREFIX}(\d+)-.+\.img$")
_CHUNKS: Final = (64 << 20, 1 << 20, 4096)


class DiskError(RuntimeError):
    """A mount, mkfs or umount failed; the message has the command and its output."""


def _run(*command: str, check: bool = True) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise DiskError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


DEFAULT_DISK_MIB: Final = 128
"""A replica's loop disk: small, so filling it is quick (``ledgermq chaos run --disk-mib``)."""


class LoopDisks:
    """The disks of one run (module docstring)."""

    def __init__(self, directory: Path, size_mb: int = DEFAULT_DISK_MIB) -> None:
        self.directory = directory
        self.size_mb = size_mb
        self.tag = str(os.getpid())
        self.mounts: dict[str, Path] = {}

    def mount(self, node: str, mountpoint: Path) -> None:
        """Make ``node``'s file system and mount it on ``mountpoint`` (created, empty)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        image = self.directory / f"{NAMESPACE_PREFIX}{self.tag}-{node}.img"
        with image.open("wb") as out:
            out.truncate(self.size_mb << 20)
        _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
        mountpoint.mkdir(parents=True, exist_ok=True)
        _run("mount", "-o", "loop", str(image), str(mountpoint))
        self.mounts[node] = mountpoint
        shutil.rmtree(mountpoint / "lost+found", ignore_errors=True)

    def fill(self, node: str) -> int:
        """Take every free block of ``node``'s file system; the bytes taken."""
        filler = self.mounts[node] / _FILLER
        taken = 0
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for chunk in _CHUNKS:
                while True:
                    try:
                        os.posix_fallocate(fd, taken, chunk)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    taken += chunk
        finally:
            os.close(fd)
        return taken

    def drain(self, node: str) -> None:
        """Give the filler's blocks back."""
        with contextlib.suppress(FileNotFoundError):
            (self.mounts[node] / _FILLER).unlink()

    def close(self) -> None:
        """Unmount every disk (lazily: a killed replica's files may still be closing) and
        delete the images. Idempotent."""
        for mountpoint in self.mounts.values():
            _run("umount", "-l", str(mountpoint), check=False)
        self.mounts.clear()
        for image in self.directory.glob(f"{NAMESPACE_PREFIX}{self.tag}-*.img"):
            image.unlink(missing_ok=True)


def cleanup_leftover_disks(*, include_live: bool = False) -> list[str]:
    """Unmount and detach the loop disks of dead runs (all with ``include_live``); their
    images' paths."""
    if shutil.which("losetup") is None or os.geteuid() != 0:
        return []
    removed = []
    listing = _run("losetup", "-l", "-n", "-O", "NAME,BACK-FILE", check=False)
    mounts = Path("/proc/mounts").read_text().splitlines()
    for line in listing.splitlines():
        fields = line.split(None, 1)
        if len(fields) != 2:
            continue
        device, back_file = fields[0], fields[1].strip().removesuffix(" (deleted)")
        owner = _IMAGE.match(Path(back_file).name)
        if owner is None or (not include_live and pid_alive(int(owner.group(1)))):
            continue
        for mount in mounts:
            parts = mount.split()
            if parts and parts[0] == device:
                _run("umount", "-l", parts[1], check=False)
        _run("losetup", "-d", device, check=False)
        removed.append(back_file)
    return removed
