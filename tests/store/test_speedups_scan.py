"""The C recovery scan (``_speedups.scan_entries``) against the pure-Python reference loop.

``recovery._scan`` hands runs of entries to the C scan when the extension is built; the loop
itself stays the reference. Opening a store must come out the same either way: the same
``RecoveredLog`` (repairs included), the same files afterwards (index records rewritten, torn
tails zeroed and copied to ``repair/``), or the same ``CorruptLogError`` with the same message.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgermq.store import LedgerStore, recovery

from .conftest import SMALL_INDEX_ENTRIES, SMALL_SEGMENT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

try:
    from ledgermq.store import _speedups
except ImportError:
    pytest.skip(
        "the C extension ledgermq.store._speedups is not built (installed without a C "
        "compiler?); recovery runs on the pure-Python scan and there is nothing to compare",
        allow_module_level=True,
    )

Outcome = tuple[object, ...]


def build(
    path: Path,
    bodies: list[int],
    term_steps: list[int],
    data_segment_bytes: int = SMALL_SEGMENT,
    index_segment_entries: int = SMALL_INDEX_ENTRIES,
) -> None:
    """A store of entries with the given body lengths, terms rising by ``term_steps``."""
    store = LedgerStore.open(
        path,
        background=False,
        data_segment_bytes=data_segment_bytes,
        index_segment_entries=index_segment_entries,
    )
    try:
        term = 1
        for i, (body_len, step) in enumerate(zip(bodies, term_steps, strict=True)):
            term += step
            body = (b"%d:" % i + bytes(range(256)) * (body_len // 256 + 1))[:body_len]
            store.append(term, body)
    finally:
        store.close()


def store_files(path: Path) -> list[Path]:
    """The data and index segment files, in a stable order."""
    return sorted(p for sub in ("data", "index") for p in (path / sub).iterdir())


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


def open_and_describe(path: Path) -> Outcome:
    """What opening the store at ``path`` does, with ``path`` taken out of every message."""
    try:
        store = LedgerStore.open(
            path,
            background=False,
            data_segment_bytes=SMALL_SEGMENT,
            index_segment_entries=SMALL_INDEX_ENTRIES,
        )
    except Exception as exc:  # noqa: BLE001 - any failure must be the same failure both ways
        return ("error", type(exc).__name__, str(exc).replace(str(path), "<store>"))
    try:
        found = dataclasses.astuple(store.recovery)
        state = (store.begin_index, store.end_index, store.end_term, store.write_pos)
    finally:
        store.close()
    return ("opened", repr(found).replace(str(path), "<store>"), state, snapshot(path))


def both_ways(path: Path, corrupt: Callable[[Path], None]) -> tuple[Outcome, Outcome]:
    """Outcomes of opening two corrupted copies of ``path``: with the C scan, then without."""
    outcomes = []
    for scan in (_speedups.scan_entries, None):
        copy = path.parent / f"{path.name}-{'c' if scan else 'py'}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(path, copy)
        corrupt(copy)
        with mock.patch.object(recovery, "_scan_run", scan):
            outcomes.append(open_and_describe(copy))
    c_outcome, py_outcome = outcomes
    return c_outcome, py_outcome


@pytest.fixture
def counting_scan() -> Iterator[list[int]]:
    """Counts calls of the C scan (and the entries they scanned) while the test runs."""
    calls = [0, 0]

    def counted(*args: object) -> tuple[int, int, int, int, int, int, int, str | None]:
        result = _speedups.scan_entries(*args)  # type: ignore[arg-type]
        calls[0] += 1
        calls[1] += result[1]
        return result

    with mock.patch.object(recovery, "_scan_run", counted):
        yield calls


# ------------------------------------------------------------------ property test


@st.composite
def stores(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    count = draw(st.integers(0, 60))
    lengths = st.integers(0, 40) | st.integers(0, 900)
    bodies = draw(st.lists(lengths, min_size=count, max_size=count))
    steps = draw(st.lists(st.sampled_from([0, 0, 0, 1]), min_size=count, max_size=count))
    return bodies, steps


Damage = tuple[str, int, int, int]


def damage() -> st.SearchStrategy[Damage]:
    """(kind, which file, offset in it, value): a flipped byte, a zeroed run, a zeroed header."""
    return st.tuples(
        st.sampled_from(["flip", "flip", "flip", "zero", "set"]),
        st.integers(0, 1 << 16),
        st.integers(0, SMALL_SEGMENT - 1),
        st.integers(1, 255),
    )


def apply_damage(path: Path, damages: list[Damage], drop_checkpoint: bool) -> None:
    files = store_files(path)
    for kind, which, offset, value in damages:
        if not files:
            break
        file = files[which % len(files)]
        data = bytearray(file.read_bytes())
        at = offset % len(data)
        if kind == "flip":
            data[at] ^= value
        elif kind == "zero":
            data[at : at + value] = bytes(len(data[at : at + value]))
        else:  # a whole 4-byte field somewhere: an int that is plausible yet wrong
            at -= at % 4
            data[at : at + 4] = struct.pack(">i", value - 128)[: len(data) - at]
        file.write_bytes(bytes(data))
    if drop_checkpoint:
        (path / "checkpoint").unlink(missing_ok=True)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(stores(), st.lists(damage(), max_size=4), st.booleans())
def test_recovery_is_the_same_with_the_c_scan(
    store: tuple[list[int], list[int]], damages: list[Damage], drop_checkpoint: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "store"
        build(base, *store)
        c_outcome, py_outcome = both_ways(
            base, lambda path: apply_damage(path, damages, drop_checkpoint)
        )
        assert c_outcome == py_outcome


# ------------------------------------------------------------------ each check, one by one

# (offset in the entry header, struct format, value) of a field damaged in entry 20 of 40.
FIELD_DAMAGE = {
    "magic": (0, ">i", 7),
    "magic zero": (0, ">i", 0),
    "magic blank": (0, ">i", -1),
    "size": (4, ">i", 60),
    "size runs past the end": (4, ">i", 5000),
    "size below a header": (4, ">i", 20),
    "index": (8, ">q", 99),
    "negative index": (8, ">q", -3),
    "term": (16, ">q", 0),
    "pos": (24, ">q", 12),
    "channel (chain CRC)": (32, ">i", 5),
    "chain CRC": (36, ">I", 1),
    "body CRC": (40, ">I", 1),
    "body length": (44, ">i", -28),
}


def entry_positions(path: Path) -> list[int]:
    store = LedgerStore.open(
        path,
        background=False,
        data_segment_bytes=SMALL_SEGMENT,
        index_segment_entries=SMALL_INDEX_ENTRIES,
    )
    try:
        return [e.pos for e in store.read_range(0, 1 << 30)]
    finally:
        store.close()


@pytest.mark.parametrize("drop_checkpoint", [False, True])
@pytest.mark.parametrize("field", sorted(FIELD_DAMAGE))
def test_each_check_gives_the_same_outcome(
    tmp_path: Path, field: str, drop_checkpoint: bool
) -> None:
    base = tmp_path / "store"
    build(base, [100] * 40, [0, 0, 1, 0] * 10)
    pos = entry_positions(base)[20]
    field_offset, fmt, value = FIELD_DAMAGE[field]

    def corrupt(path: Path) -> None:
        file = path / "data" / f"{pos - pos % SMALL_SEGMENT:020d}"
        with open(file, "r+b") as f:
            f.seek(pos % SMALL_SEGMENT + field_offset)
            f.write(struct.pack(fmt, value))
        if drop_checkpoint:
            (path / "checkpoint").unlink()

    c_outcome, py_outcome = both_ways(base, corrupt)
    assert c_outcome == py_outcome


def test_rewritten_index_records_are_counted_and_kept(tmp_path: Path) -> None:
    base = tmp_path / "store"
    build(base, [10] * 40, [0] * 40)

    def wipe_index(path: Path) -> None:
        for file in (path / "index").iterdir():
            file.write_bytes(bytes(file.stat().st_size))
        (path / "checkpoint").unlink()

    c_outcome, py_outcome = both_ways(base, wipe_index)
    assert c_outcome == py_outcome
    assert c_outcome[0] == "opened"
    assert str(c_outcome[1]).endswith(", 40, 40, [])")  # scanned, rewritten, no repairs
    copy = tmp_path / "store-c"
    with mock.patch.object(recovery, "_scan_run", _speedups.scan_entries):
        store = LedgerStore.open(
            copy,
            background=False,
            data_segment_bytes=SMALL_SEGMENT,
            index_segment_entries=SMALL_INDEX_ENTRIES,
        )
        try:  # the records are now right: nothing left to rewrite
            assert store.recovery.index_records_rewritten == 0
            assert store.recovery.entries_scanned == 40
        finally:
            store.close()


# ------------------------------------------------------------------ the C scan does the work


def test_the_c_scan_takes_whole_runs(tmp_path: Path, counting_scan: list[int]) -> None:
    base = tmp_path / "store"
    build(base, [200] * 2000, [0] * 2000, data_segment_bytes=1 << 20, index_segment_entries=4096)
    (base / "checkpoint").unlink()  # scan it all
    store = LedgerStore.open(
        base, background=False, data_segment_bytes=1 << 20, index_segment_entries=4096
    )
    try:
        assert store.recovery.entries_scanned == 2000
    finally:
        store.close()
    calls, scanned_in_c = counting_scan
    assert calls <= 4  # the first entry (no index segment yet), then one run to the end
    assert scanned_in_c == 1999


def test_the_limit_and_a_missing_index_segment_hand_back(tmp_path: Path) -> None:
    base = tmp_path / "store"
    build(base, [100] * 10, [0] * 10)
    data = (base / "data" / f"{0:020d}").read_bytes()
    index = bytearray((base / "index" / f"{0:020d}").read_bytes())
    # No index segment: the first entry goes back to the caller.
    assert _speedups.scan_entries(data, 0, len(data), 0, -1, -1, -1, -1, None, 0) == (
        0,
        0,
        0,
        -1,
        -1,
        -1,
        -1,
        None,
    )
    off, scanned, rewritten, prev_index, prev_term, prev_chain, begin, reason = (
        _speedups.scan_entries(data, 0, 2 * 148, 0, -1, -1, -1, -1, index, 0)
    )
    assert (scanned, rewritten, prev_index, begin, reason) == (2, 0, 1, 0, None)
    assert off == 2 * 148  # stopped at the first entry starting at or past the limit
    assert prev_term == 1
    assert 0 <= prev_chain <= 0xFFFFFFFF
    # To the end: the zero header after the last entry goes back to the caller.
    off, scanned, *_, reason = _speedups.scan_entries(
        data, off, len(data), 0, prev_index, prev_term, prev_chain, begin, index, 0
    )
    assert (off, scanned, reason) == (10 * 148, 8, None)
    # A record that differs is rewritten in the buffer given.
    index[32 * 3 : 32 * 4] = bytes(32)
    result = _speedups.scan_entries(data, 0, len(data), 0, -1, -1, -1, -1, index, 0)
    assert result[2] == 1
    assert bytes(index) == (base / "index" / f"{0:020d}").read_bytes()


def test_a_read_only_index_buffer_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "store"
    build(base, [100] * 3, [0] * 3)
    data = (base / "data" / f"{0:020d}").read_bytes()
    with pytest.raises(BufferError):
        _speedups.scan_entries(data, 0, len(data), 0, -1, -1, -1, -1, b"\0" * 512, 0)
    with pytest.raises(OverflowError):
        _speedups.scan_entries(data, 0, len(data), 0, -1, -1, 1 << 32, -1, None, 0)


@pytest.mark.parametrize(("pure", "expected"), [("1", "None"), ("0", "scan_entries")])
def test_the_environment_picks_the_scan(pure: str, expected: str) -> None:
    code = (
        "from ledgermq.store import recovery as r; "
        "print(getattr(r._scan_run, '__name__', r._scan_run))"
    )
    env = {**os.environ, "LEDGERMQ_PURE_PYTHON": pure}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
