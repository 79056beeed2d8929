"""Random damage to copies of a store: every outcome is a repaired prefix or a clear refusal.

Three fault models, each over many seeds:

- a file cut at a random byte (a lost file tail);
- a random bit flipped anywhere in a data or index file (rot, a stray write);
- a power loss in ``flush="async"`` mode: bytes written after the last flush are lost, whole,
  torn at a random byte, or page by page in random order.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from ledgermq.errors import CorruptLogError
from ledgermq.store import Entry, LedgerStore
from ledgermq.store.layout import segment_name

from .conftest import SMALL_SEGMENT, open_file_store

SEEDS = range(40)


def random_log(path: Path, rng: random.Random, count: int) -> list[Entry]:
    entries: list[Entry] = []
    with open_file_store(path) as store:
        term = 1
        while len(entries) < count:
            term += rng.random() < 0.2
            batch = [os.urandom(rng.randrange(0, 700)) for _ in range(rng.randrange(1, 6))]
            entries += store.append_batch(term, batch)
    return entries


def check_recovered(store: LedgerStore, entries: list[Entry], allowed_loss_from: int) -> None:
    """The store holds a prefix of ``entries`` no shorter than ``allowed_loss_from``; every entry
    it serves is either exact or refused with CorruptLogError."""
    assert allowed_loss_from - 1 <= store.end_index <= len(entries) - 1
    for i in range(store.end_index + 1):
        try:
            got = store.get(i)
        except CorruptLogError:
            continue
        if got != entries[i]:
            # Only a chain CRC nobody could check yet (first entry scanned) may differ; reading
            # it in sequence with its predecessor catches it.
            assert got._replace(chain_crc=entries[i].chain_crc) == entries[i]
            with pytest.raises(CorruptLogError):
                store.read_range(i - 1, 1 << 30)


def entry_containing(entries: list[Entry], pos: int) -> int | None:
    for e in entries:
        if e.pos <= pos < e.pos + e.size:
            return e.index
    return None


@pytest.mark.parametrize("seed", SEEDS)
def test_cut_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    live = tmp_path / "live"
    entries = random_log(live, rng, rng.randrange(20, 60))
    kind = rng.choice(["data", "index"])
    files = sorted((live / kind).iterdir())
    victim = rng.randrange(len(files))
    size = os.path.getsize(files[victim])
    cut = rng.randrange(0, size)
    with open(files[victim], "r+b") as f:
        f.truncate(cut)
    is_last = victim == len(files) - 1
    if not is_last:
        with pytest.raises(CorruptLogError):
            open_file_store(live)
        return
    with open_file_store(live) as store:
        if kind == "data":
            lost_from = int(files[victim].name) + cut
            survivors = [e for e in entries if e.pos + e.size <= lost_from]
            assert store.end_index == len(survivors) - 1
            check_recovered(store, entries, len(survivors))
        else:
            check_recovered(store, entries, len(entries))


@pytest.mark.parametrize("seed", SEEDS)
def test_flipped_bit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    live = tmp_path / "live"
    entries = random_log(live, rng, rng.randrange(20, 60))
    kind = rng.choice(["data", "data", "index"])
    files = sorted((live / kind).iterdir())
    victim = files[rng.randrange(len(files))]
    # Mostly flip inside written bytes; sometimes anywhere in the file.
    written_end = (entries[-1].pos + entries[-1].size) if kind == "data" else len(entries) * 32
    base = int(victim.name)
    limit = min(os.path.getsize(victim), max(1, written_end - base))
    offset = rng.randrange(0, limit if rng.random() < 0.9 else os.path.getsize(victim))
    with open(victim, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))
    log_pos = base + offset
    hit = entry_containing(entries, log_pos) if kind == "data" else None
    try:
        store = open_file_store(live)
    except CorruptLogError:
        # A refusal is only right for damage followed by later entries.
        assert kind == "data"
        assert log_pos < entries[-1].pos
        return
    with store:
        if hit == len(entries) - 1:
            check_recovered(store, entries, len(entries) - 1)
        else:
            assert store.end_index == len(entries) - 1
            check_recovered(store, entries, len(entries))


@pytest.mark.parametrize("seed", SEEDS)
def test_power_loss_in_async_mode(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    live = tmp_path / "live"
    crash = tmp_path / "crash"
    store = open_file_store(live, flush="async")
    entries = store.append_batch(1, [os.urandom(rng.randrange(0, 600)) for _ in range(30)])
    store.flush()  # durable up to here (and the checkpoint says so)
    durable_index = store.end_index
    durable_pos = store.write_pos
    for _ in range(rng.randrange(1, 6)):
        entries += store.append_batch(2, [os.urandom(rng.randrange(0, 600)) for _ in range(7)])
    shutil.copytree(live, crash)  # the page cache's view; now lose what was never flushed
    store.close()
    model = rng.choice(["all", "torn", "pages"])
    lose_unflushed(crash / "data", durable_pos, model, rng)
    lose_unflushed(crash / "index", (durable_index + 1) * 32, model, rng)
    with open_file_store(crash) as recovered:
        assert recovered.end_index >= durable_index
        check_recovered(recovered, entries, durable_index + 1)
        assert recovered.read_range(0, 1 << 30) == entries[: recovered.end_index + 1]


def lose_unflushed(directory: Path, durable_pos: int, model: str, rng: random.Random) -> None:
    """Revert bytes at or after logical ``durable_pos`` to zero, as a power loss may."""
    page = 512
    for file in sorted(directory.iterdir()):
        base = int(file.name)
        size = os.path.getsize(file)
        start = max(0, durable_pos - base)
        if start >= size:
            continue
        with open(file, "r+b") as f:
            if model == "all":
                regions = [(start, size)]
            elif model == "torn":
                keep = rng.randrange(start, size + 1)
                regions = [(keep, size)]
            else:
                first_page = start - start % page
                regions = [
                    (max(p, start), min(p + page, size))
                    for p in range(first_page, size, page)
                    if rng.random() < 0.5
                ]
            for lo, hi in regions:
                f.seek(lo)
                f.write(bytes(hi - lo))


def test_segment_names_match_their_offsets(tmp_path: Path) -> None:
    entries = random_log(tmp_path, random.Random(1), 60)
    names = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert names == [segment_name(i * SMALL_SEGMENT) for i in range(len(names))]
    assert entries[-1].pos < len(names) * SMALL_SEGMENT
