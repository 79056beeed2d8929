"""Disk footprint of the broker's derived stores: ConsumeQueue and key-index files are sparse.

A fresh queue file (6 MB, RocketMQ's size) or key-index file (34 MB) takes disk blocks for what
is written, allocated in chunks before the mapping writes there; a full disk is a
``DiskFullError`` from ``put`` / ``add``, never SIGBUS, and reopening on a full disk works.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from ledgermq.bench.processes import child_env
from ledgermq.broker.storage.consume_queue import ConsumeQueue
from ledgermq.broker.storage.key_index import KeyIndex
from tests.store.test_disk_full import tiny_tmpfs

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["tiny_tmpfs"]  # the fixture, re-used

KIB = 1024


def disk_bytes(path: Path) -> int:
    """Bytes of disk blocks (``st_blocks * 512``) of every file under ``path``."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def test_a_queue_of_ten_units_takes_a_few_pages(tmp_path: Path) -> None:
    queue = ConsumeQueue(str(tmp_path), "T", 0)
    try:
        for q in range(10):
            queue.put(q, 100 + q * 200, 150, 0)
        queue.flush()
    finally:
        queue.close()
    (file,) = (tmp_path / "consumequeue" / "T" / "0").iterdir()
    assert file.stat().st_size == 6_000_000  # RocketMQ's file size, kept
    assert disk_bytes(tmp_path) < 64 * KIB


def test_queue_units_past_growth_steps_read_back_after_reopen(tmp_path: Path) -> None:
    count = 50_000  # 1 MB of units: several growth steps, through put's fast path
    queue = ConsumeQueue(str(tmp_path), "T", 0)
    try:
        for q in range(count):
            queue.put(q, 100 + q * 200, 150, q)
        assert queue.read_columns(count - 3, 10) == (
            tuple(100 + q * 200 for q in range(count - 3, count)),
            (150, 150, 150),
            (count - 3, count - 2, count - 1),
        )
    finally:
        queue.close()
    assert disk_bytes(tmp_path) < 3 * count * 20
    queue = ConsumeQueue(str(tmp_path), "T", 0)
    try:
        assert queue.max_offset == count
        for q in range(count, count + 20_000):  # the reopened file grows again
            queue.put(q, 100 + q * 200, 150, q)
        phys, _, tags = queue.read_columns(0, count + 20_000)
        assert phys == tuple(100 + q * 200 for q in range(count + 20_000))
        assert tags == tuple(range(count + 20_000))
    finally:
        queue.close()


def test_a_fresh_key_index_takes_a_few_pages(tmp_path: Path) -> None:
    index = KeyIndex(str(tmp_path))
    try:
        for i in range(10):
            index.add("T", [f"key-{i}"], 100 + i * 300, 1000 + i)
        index.flush()
        assert index.query("T", "key-7", 10) == [100 + 7 * 300]
    finally:
        index.close()
    (file,) = (tmp_path / "index").iterdir()
    assert file.stat().st_size == 34_000_064
    assert disk_bytes(tmp_path) < 128 * KIB  # header, <= 10 slot pages, the first items


def test_key_index_items_past_growth_steps_read_back_after_reopen(tmp_path: Path) -> None:
    count = 30_000
    index = KeyIndex(str(tmp_path))
    try:
        index.add_many(("T", [f"k{i}"], 100 + i * 300, 1000 + i) for i in range(count))
    finally:
        index.close()  # not flushed: recovery checks every item
    index = KeyIndex(str(tmp_path))
    try:
        assert index.record_count == count
        index.add_many(("T", [f"k{i}"], 100 + i * 300, 1000 + i) for i in range(count, count + 10))
        for i in (0, 12_345, count - 1, count + 9):
            assert index.query("T", f"k{i}", 5) == [100 + i * 300]
    finally:
        index.close()


_FILL_A_DISK = """
import os, sys
from ledgermq.broker.storage.consume_queue import ConsumeQueue
from ledgermq.broker.storage.key_index import KeyIndex
from ledgermq.errors import DiskFullError

root = sys.argv[1]
# Something else fills the disk but for a few pages.
fd = os.open(os.path.join(root, "filler"), os.O_WRONLY | os.O_CREAT)
try:
    while os.write(fd, b"f" * 4096):
        pass
except OSError:
    pass
os.ftruncate(fd, os.fstat(fd).st_size - 40960)
os.close(fd)

queue = ConsumeQueue(root, "T", 0)
put = 0
try:
    while True:
        queue.put(put, 100 + put * 200, 150, 0)
        put += 1
except DiskFullError as exc:
    print("queue full:", exc)
assert queue.max_offset == put > 0
assert queue.read_columns(0, put)[0] == tuple(100 + q * 200 for q in range(put))

index = KeyIndex(root)
added = 0
try:
    while True:
        index.add("T", ["k%d" % added], 100 + added * 200, 1)
        added += 1
except DiskFullError as exc:
    print("index full:", exc)
for i in range(0, added, max(1, added // 50)):
    assert index.query("T", "k%d" % i, 2) == [100 + i * 200], i
queue.close()
index.close()

# Reopen on the disk that is still full: recovery must not map a hole.
queue = ConsumeQueue(root, "T", 0)
assert queue.max_offset == put
assert queue.read_columns(0, put)[0] == tuple(100 + q * 200 for q in range(put))
index = KeyIndex(root)
assert index.record_count == added
queue.close()
index.close()
print("ok", put, added)
"""


def test_a_full_disk_during_growth_is_disk_full_error_not_sigbus(tiny_tmpfs: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FILL_A_DISK), str(tiny_tmpfs)],
        capture_output=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, f"exit {result.returncode} (-7 is SIGBUS):\n{output}"
    assert "queue full: no space left to allocate" in output
    assert "index full: no space left to allocate" in output
