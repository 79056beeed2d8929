"""The C leader-batch encoder (``ledgermq.store._speedups``) against the pure-Python reference.

The C planner must return what ``_plan_leader_append_py`` returns, field for field and byte for
byte, and raise the same errors with the same messages; its CRC-32C must be the ``crc32c``
package's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.errors import EntryTooLargeError, InconsistentLogError
from ledgermq.store.append_plan import (
    AppendPlan,
    LogTail,
    _plan_leader_append_c,
    _plan_leader_append_py,
)
from ledgermq.store.entry_format import HEADER_SIZE, MIN_BLANK_LEN, Entry, EntryType

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

try:
    from ledgermq.store import _speedups
except ImportError:
    pytest.skip(
        "the C extension ledgermq.store._speedups is not built (installed without a C "
        "compiler?); the store runs on the pure-Python planner and there is nothing to compare",
        allow_module_level=True,
    )

Body = bytes | bytearray | memoryview


def _as_buffer(data: bytes, kind: str) -> Body:
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "strided":  # a non-contiguous buffer: bytes() of it takes every other byte
        return memoryview(data + data)[::2]
    return data


@st.composite
def tails(draw: st.DrawFn, segment_bytes: int) -> LogTail:
    segment = draw(st.integers(0, 3))
    near_end = st.integers(max(0, segment_bytes - 300), max(0, segment_bytes - MIN_BLANK_LEN))
    offset = draw(st.integers(0, max(0, segment_bytes - MIN_BLANK_LEN)) | near_end)
    end_term = draw(st.integers(-1, 5))
    return LogTail(
        next_index=draw(st.integers(0, 1 << 40)),
        write_pos=segment * segment_bytes + offset,
        end_term=end_term,
        chain_crc=draw(st.integers(0, 0xFFFFFFFF)),
    )


@st.composite
def batches(draw: st.DrawFn) -> tuple[LogTail, int, list[Body], int, EntryType, int, int]:
    segment_bytes = draw(st.sampled_from([4096, 4096, 8192]) | st.integers(40, 20_000))
    tail = draw(tails(segment_bytes))
    term = draw(st.integers(max(0, tail.end_term - 1), tail.end_term + 3))
    sizes = st.integers(0, 40) | st.integers(0, 3000)
    raw = draw(st.lists(sizes, min_size=1, max_size=24) | st.just([]))
    kinds = st.sampled_from(["bytes", "bytes", "bytearray", "memoryview", "strided"])
    bodies = [_as_buffer(os.urandom(n), draw(kinds)) for n in raw]
    channel = draw(st.integers(-(1 << 31), (1 << 31) - 1) | st.just(0))
    max_body = draw(st.integers(0, 5000) | st.just(4 << 20))
    return tail, term, bodies, channel, draw(st.sampled_from(EntryType)), segment_bytes, max_body


def _run(
    planner: Callable[..., AppendPlan],
    tail: LogTail,
    term: int,
    bodies: Sequence[Body],
    channel: int,
    entry_type: EntryType,
    segment_bytes: int,
    max_body: int,
) -> AppendPlan | tuple[type[BaseException], str]:
    try:
        return planner(tail, term, bodies, channel, entry_type, segment_bytes, max_body)
    except (EntryTooLargeError, InconsistentLogError) as exc:
        return type(exc), str(exc)


@settings(max_examples=400, deadline=None)
@given(batches())
def test_c_planner_matches_the_reference(
    batch: tuple[LogTail, int, list[Body], int, EntryType, int, int],
) -> None:
    expected = _run(_plan_leader_append_py, *batch)
    actual = _run(_plan_leader_append_c, *batch)
    assert actual == expected
    if not isinstance(actual, AppendPlan):
        return
    assert isinstance(expected, AppendPlan)
    bodies = batch[2]
    for entry, body in zip(actual.entries, bodies, strict=True):
        assert type(entry) is Entry
        assert type(entry.body) is bytes
        assert entry.entry_type is batch[4]
        if type(body) is bytes:
            assert entry.body is body  # exact bytes are referenced, never copied
    assert all(type(piece) is bytes for _, piece in actual.data_writes)
    assert type(actual.index_records) is bytes
    segment_bytes = batch[5]
    for pos, piece in actual.data_writes:  # each piece lies inside one segment
        assert pos // segment_bytes == (pos + len(piece) - 1) // segment_bytes


def test_a_batch_that_rolls_over_writes_a_blank_record() -> None:
    tail = LogTail(7, 4096 - 100, 1, 12345)
    bodies = [b"a" * 10, b"b" * 60, b"c" * 200]
    plan = _plan_leader_append_c(tail, 2, bodies, 3, EntryType.NORMAL, 4096, 1 << 20)
    assert plan == _plan_leader_append_py(tail, 2, bodies, 3, EntryType.NORMAL, 4096, 1 << 20)
    assert [pos for pos, _ in plan.data_writes] == [3996, 4096]
    first = plan.data_writes[0][1]
    assert first[-MIN_BLANK_LEN:] == (-1).to_bytes(4, "big", signed=True) + (42).to_bytes(4, "big")
    assert plan.entries[2].pos == 4096 + HEADER_SIZE + 60


def test_errors_match_the_reference() -> None:
    tail = LogTail(0, 0, 5, 0)
    for args in (
        (tail, 4, [b"x"], 0, EntryType.NORMAL, 4096, 100),  # term below the log's last term
        (tail, 5, [b"x", b"y" * 101], 0, EntryType.NORMAL, 4096, 100),  # over max_body_bytes
        (tail, 5, [b"y" * 4041], 0, EntryType.NORMAL, 4096, 1 << 20),  # over a segment
    ):
        expected = _run(_plan_leader_append_py, *args)
        assert isinstance(expected, tuple)
        assert _run(_plan_leader_append_c, *args) == expected


def test_no_reference_leaks() -> None:
    body = os.urandom(1000)
    tail = LogTail(0, 0, 1, 0)
    not_a_buffer: list[bytes] = [body, 17]  # type: ignore[list-item]  # the TypeError path
    before = sys.getrefcount(body)
    for _ in range(200):
        _plan_leader_append_c(tail, 1, [body] * 8, 0, EntryType.NORMAL, 4096, 1 << 20)
        with pytest.raises(EntryTooLargeError):
            _plan_leader_append_c(tail, 1, [body, b"x" * 5000], 0, EntryType.NORMAL, 4096, 1 << 20)
        with pytest.raises(TypeError):
            _plan_leader_append_c(tail, 1, not_a_buffer, 0, EntryType.NORMAL, 4096, 1 << 20)
    assert sys.getrefcount(body) == before


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 0xFFFFFFFF))
def test_crc32c_matches_the_crc32c_package(data: bytes, value: int) -> None:
    assert _speedups.crc32c(data, value) == crc32c(data, value)
    assert _speedups.crc32c(data, value, True) == crc32c(data, value)  # the table fallback
    assert _speedups.crc32c(memoryview(bytearray(data))) == crc32c(data)


def test_crc32c_check_value() -> None:
    # The CRC-32C check value of RFC 3720 appendix B.4.
    assert _speedups.crc32c(b"123456789") == 0xE3069283
    assert _speedups.crc32c(b"123456789", 0, True) == 0xE3069283


@pytest.mark.parametrize(("pure", "expected"), [("1", "_py"), ("0", "_c")])
def test_the_environment_picks_the_planner(pure: str, expected: str) -> None:
    code = "from ledgermq.store import append_plan as a; print(a.plan_leader_append.__name__)"
    env = {**os.environ, "LEDGERMQ_PURE_PYTHON": pure}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"_plan_leader_append{expected}"
