"""Disk footprint: segment files are sparse and take blocks in proportion to the data.

Segments keep their full size (``ls`` shows 1 GiB for DLedger's geometry) but take disk blocks
only as they fill, in chunks allocated before they are written; a full disk is a
``DiskFullError`` during that growth, never SIGBUS (also when the store is reopened on a disk
that is still full, where recovery must not map a hole either).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from ledgermq.bench.processes import child_env
from ledgermq.store import LedgerStore
from ledgermq.store.segment import MAX_GROWTH_BYTES, SegmentLog, allocation_target

from .test_disk_full import tiny_tmpfs

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["tiny_tmpfs"]  # the fixture, re-used

KIB = 1024
MIB = 1024 * KIB


def disk_bytes(path: Path) -> int:
    """Bytes of disk blocks (``st_blocks * 512``) of every file under ``path``."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def apparent_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_a_fresh_store_with_dledger_segments_takes_blocks_for_its_data_only(
    tmp_path: Path,
) -> None:
    """The README's snippet: five entries in a store of DLedger's geometry (1 GiB data and
    160 MiB index files) took 1.2 GB of disk before the files were sparse."""
    with LedgerStore.open(tmp_path / "n0", flush="sync", background=False) as store:
        store.append(term=1, body=b"hello")
        store.append_batch(1, [b"a", b"b", b"c"])
        store.append(term=1, body=b"world")
        assert store.end_index == 4
    assert apparent_bytes(tmp_path) > 1 << 30  # the files keep DLedger's sizes
    assert disk_bytes(tmp_path) < 256 * KIB
    with LedgerStore.open(tmp_path / "n0", background=False) as reopened:
        assert [e.body for e in reopened.read_range(0, 1 << 20)] == [
            b"hello",
            b"a",
            b"b",
            b"c",
            b"world",
        ]
        reopened.append(term=1, body=b"again")
    assert disk_bytes(tmp_path) < 256 * KIB


def test_growth_is_in_doubling_chunks_up_to_a_bound() -> None:
    assert allocation_target(100, 1 << 30) == 20 * KIB  # 16 KiB step, page-rounded
    assert allocation_target(1 * MIB, 1 << 30) == 2 * MIB  # doubles
    assert allocation_target(512 * MIB, 1 << 30) == 512 * MIB + MAX_GROWTH_BYTES  # bounded
    assert allocation_target(1 << 30, 1 << 30) == 1 << 30  # never past the file


def test_data_written_past_growth_steps_reads_back_after_reopen(tmp_path: Path) -> None:
    bodies = [bytes([i % 251]) * 1000 for i in range(3000)]  # about 3 MiB, a dozen growth steps

    def open_store() -> LedgerStore:
        return LedgerStore.open(
            tmp_path, background=False, data_segment_bytes=64 * MIB, index_segment_entries=1 << 20
        )

    with open_store() as store:
        for start in range(0, len(bodies), 100):
            store.append_batch(1, bodies[start : start + 100])
    data_file = tmp_path / "data" / ("0" * 20)
    assert data_file.stat().st_size == 64 * MIB
    assert data_file.stat().st_blocks * 512 < 8 * MIB  # about twice the data at most
    (tmp_path / "checkpoint").unlink()  # recovery scans (and re-checks) every entry
    with open_store() as reopened:
        assert reopened.end_index == len(bodies) - 1
        assert [e.body for e in reopened.read_range(0, 1 << 30)] == bodies
        more = [b"x" * 5000] * 1000  # grows the reopened files further
        reopened.append_batch(1, more)
    with open_store() as again:
        assert [e.body for e in again.read_range(0, 1 << 30)] == bodies + more


def test_a_last_segment_shorter_than_its_size_after_a_crash_is_recovered(
    tmp_path: Path,
) -> None:
    """A crash (or a copy) may leave the last data file shorter than the segment size: it is
    extended as a hole, its cut entry repaired as a torn tail, and appends go on."""

    def open_store() -> LedgerStore:
        return LedgerStore.open(
            tmp_path, background=False, data_segment_bytes=1 * MIB, index_segment_entries=4096
        )

    bodies = [b"%04d" % i * 100 for i in range(100)]  # 400-byte bodies, 448-byte entries
    with open_store() as store:
        store.append_batch(1, bodies)
    data_file = tmp_path / "data" / ("0" * 20)
    os.truncate(data_file, 50 * 448 + 100)  # entry 50 is cut in the middle
    with open_store() as reopened:
        assert data_file.stat().st_size == 1 * MIB
        assert reopened.end_index == 49
        assert [e.body for e in reopened.read_range(0, 1 << 30)] == bodies[:50]
        reopened.append_batch(1, bodies[50:])
    with open_store() as again:
        assert [e.body for e in again.read_range(0, 1 << 30)] == bodies
    assert data_file.stat().st_blocks * 512 < 256 * KIB


_FILL_A_DISK = """
import sys
from ledgermq.errors import DiskFullError
from ledgermq.store import LedgerStore

directory = sys.argv[1]
kwargs = dict(
    data_segment_bytes=64 << 20,  # each file is larger than the whole 1 MiB disk
    index_segment_entries=1 << 20,
    background=False,
    disk_usage=lambda _p: 0.0,  # exercise the allocation path, not the ratio check
)
store = LedgerStore.open(directory, **kwargs)
written = []
try:
    for _ in range(1000):
        written.extend(store.append_batch(1, [b"z" * 3000] * 4))
except DiskFullError as exc:
    print("full:", exc)
else:
    sys.exit("the disk never filled up")
assert store.end_index == len(written) - 1 > 0, (store.end_index, len(written))
assert store.read_range(0, 1 << 30) == written
store.close()
# Reopen on the disk that is still full: recovery reads, rewrites and zeroes nothing it may
# not (a hole read through the mapping would need a page tmpfs no longer has).
with LedgerStore.open(directory, **kwargs) as reopened:
    assert reopened.end_index == len(written) - 1
    assert reopened.read_range(0, 1 << 30) == written
    try:
        reopened.append_batch(1, [b"y" * 3000] * 40)
    except DiskFullError:
        pass
    else:
        sys.exit("an append to a full disk succeeded")
    assert reopened.end_index == len(written) - 1
print("ok", len(written))
"""


def test_a_full_disk_during_growth_is_disk_full_error_not_sigbus(tiny_tmpfs: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FILL_A_DISK), str(tiny_tmpfs / "store")],
        capture_output=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, f"exit {result.returncode} (-7 is SIGBUS):\n{output}"
    assert "full: no space left to allocate" in output
    assert "ok " in output


def test_zeroing_and_scanning_never_touch_holes(tmp_path: Path) -> None:
    """Truncation and recovery zero and scan a file's tail without writing or mapping its
    holes (writing one allocates a block; on tmpfs even reading one does)."""
    log = SegmentLog(str(tmp_path), 64 * MIB, what="data")
    try:
        log.ensure_range(0, 100)
        log.write(0, b"\x01" * 100)
        log.ensure_range(100, 40 * MIB)  # blocks for the first 40 MiB, most never written
        segment = log.segments[0]
        segment.mm[8 * MIB] = 7  # a lone byte in the allocated part
        blocks = os.fstat(segment.fd).st_blocks
        assert segment.last_nonzero(0, segment.size) == 8 * MIB
        assert not segment.is_zero(100, segment.size)
        segment.zero(50, segment.size)
        assert segment.is_zero(50, segment.size)
        assert segment.last_nonzero(0, segment.size) == 49
        assert os.fstat(segment.fd).st_blocks == blocks
        resident = segment.mm[:50]
        assert resident == b"\x01" * 50
    finally:
        log.close()
