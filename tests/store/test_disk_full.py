"""A full disk: a clear error, nothing written, the store consistent and reopenable."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledgermq.errors import DiskFullError
from ledgermq.store import Entry, LedgerStore

from .conftest import open_file_store


def test_failed_segment_allocation_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_file_store(tmp_path)
    first = store.append_batch(1, [b"a" * 500] * 6)  # fills most of segment 0
    real_fallocate = os.posix_fallocate

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(DiskFullError, match="no space left to allocate"):
        store.append_batch(1, [b"b" * 500] * 6)  # needs segment 1
    assert store.end_index == 5
    assert store.read_range(0, 1 << 20) == first
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["0" * 20]
    monkeypatch.setattr(os, "posix_fallocate", real_fallocate)
    more = store.append_batch(1, [b"b" * 500] * 6)
    assert more[0].index == 6
    store.close()
    with open_file_store(tmp_path) as reopened:
        assert reopened.read_range(0, 1 << 20) == first + more


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a real file system that runs out of space."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_real_full_disk(tiny_tmpfs: Path) -> None:
    directory = tiny_tmpfs / "store"
    store = LedgerStore.open(
        directory,
        data_segment_bytes=256 * 1024,
        index_segment_entries=128,
        background=False,
        disk_usage=lambda _p: 0.0,  # exercise the allocation path, not the ratio check
    )
    written: list[Entry] = []

    def fill_until_full() -> None:
        for _ in range(1000):
            written.extend(store.append_batch(1, [b"z" * 4000] * 4))

    with pytest.raises(DiskFullError):
        fill_until_full()
    end = store.end_index
    assert end == len(written) - 1 > 0
    assert store.read_range(0, 1 << 30) == written
    store.close()
    with LedgerStore.open(
        directory, data_segment_bytes=256 * 1024, index_segment_entries=128, background=False
    ) as reopened:
        assert reopened.end_index == end
        assert reopened.read_range(0, 1 << 30) == written
