"""The C follower planner (``_speedups.plan_replicated_append``) against the Python reference.

``_plan_replicated_append_c`` must return what ``_plan_replicated_append_py`` returns, field for
field, byte for byte and object for object, and raise the same errors with the same messages
(the C code hands every batch it does not accept to the reference, which raises). The batches
are a leader's, valid or with one thing changed: each check a follower makes (index, term, size,
position, body CRC, chain CRC) must refuse the entry that breaks it, and the C code must take the
valid ones itself, not leave them all to the reference.
"""

from __future__ import annotations

import gc
import os
import re
import struct
import subprocess
import sys
from typing import TYPE_CHECKING, cast

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ledgermq.errors import EntryTooLargeError, InconsistentLogError
from ledgermq.store.append_plan import (
    AppendPlan,
    LogTail,
    _plan_leader_append_c,
    _plan_leader_append_py,
    _plan_replicated_append_c,
    _plan_replicated_append_py,
)
from ledgermq.store.entry_format import HEADER_SIZE, MIN_BLANK_LEN, Entry, EntryType

if TYPE_CHECKING:
    from collections.abc import Callable

try:
    from ledgermq.store import _speedups
except ImportError:
    pytest.skip(
        "the C extension ledgermq.store._speedups is not built (installed without a C "
        "compiler?); the store runs on the pure-Python planner and there is nothing to compare",
        allow_module_level=True,
    )

Outcome = AppendPlan | tuple[type[BaseException], str]
_untyped_planner = cast("Callable[..., object]", _speedups.plan_replicated_append)
"""The C function, for calls with arguments of the wrong kind."""

# How a received entry can differ from what the leader sent. Each is one field changed; most
# must be refused (a check), the others change the bytes written (channel, entry type with
# verify_chain off) or take the reference's path (a body that is not bytes, an int subclass).
MUTATIONS = (
    "index",
    "term_down",
    "term_up",
    "pos",
    "size",
    "body",
    "body_crc",
    "chain_crc",
    "channel",
    "entry_type",
    "body_bytearray",
    "body_memoryview",
    "bool_channel",
    "chain_out_of_range",
    "huge_term",
)


def _mutate(entry: Entry, how: str) -> Entry:
    if how == "index":
        return entry._replace(index=entry.index + 1)
    if how == "term_down":
        return entry._replace(term=entry.term - 1)
    if how == "term_up":
        return entry._replace(term=entry.term + 1)
    if how == "pos":
        return entry._replace(pos=entry.pos + 8)
    if how == "size":
        return entry._replace(size=entry.size + 1)
    if how == "body":
        return entry._replace(body=entry.body + b"!")
    if how == "body_crc":
        return entry._replace(body_crc=entry.body_crc ^ 1)
    if how == "chain_crc":
        return entry._replace(chain_crc=entry.chain_crc ^ 0x80000000)
    if how == "channel":
        return entry._replace(channel=entry.channel + 1 if entry.channel < 1000 else 0)
    if how == "entry_type":
        other = EntryType.NOOP if entry.entry_type is not EntryType.NOOP else EntryType.NORMAL
        return entry._replace(entry_type=other)
    if how == "body_bytearray":
        return entry._replace(body=bytearray(entry.body))  # type: ignore[arg-type]  # a buffer
    if how == "body_memoryview":
        return entry._replace(body=memoryview(entry.body))  # type: ignore[arg-type]  # a buffer
    if how == "bool_channel":
        return entry._replace(channel=True)
    if how == "chain_out_of_range":
        return entry._replace(chain_crc=entry.chain_crc + (1 << 32))
    assert how == "huge_term"
    return entry._replace(term=1 << 70)


@st.composite
def follower_batches(
    draw: st.DrawFn, mutation: str | None = None
) -> tuple[LogTail, list[Entry], int, int]:
    """A tail, the entries a leader with that tail appended (with ``mutation`` applied to one
    of them), the segment size and the largest body allowed."""
    segment_bytes = draw(st.sampled_from([4096, 8192]) | st.integers(200, 20_000))
    segment = draw(st.integers(0, 3))
    near_end = st.integers(max(0, segment_bytes - 300), segment_bytes - MIN_BLANK_LEN)
    offset = draw(st.integers(0, segment_bytes - MIN_BLANK_LEN) | near_end)
    term = draw(st.integers(0, 5))
    tail = LogTail(
        next_index=draw(st.integers(0, 1 << 40)),
        write_pos=segment * segment_bytes + offset,
        end_term=draw(st.integers(-1, term)),
        chain_crc=draw(st.integers(0, 0xFFFFFFFF)),
    )
    max_body = 1 << 20
    entries: list[Entry] = []
    leader_tail = tail
    for _ in range(draw(st.integers(1, 3))):  # runs of rising terms, as a leader's log has
        cap = min(2000, segment_bytes - MIN_BLANK_LEN - HEADER_SIZE)
        sizes = draw(st.lists(st.integers(0, min(40, cap)) | st.integers(0, cap), max_size=12))
        channel = draw(st.integers(-(1 << 31), (1 << 31) - 1) | st.just(0))
        entry_type = draw(st.sampled_from(EntryType))
        bodies = [os.urandom(n) for n in sizes]
        plan = _plan_leader_append_py(
            leader_tail, term, bodies, channel, entry_type, segment_bytes, max_body
        )
        entries += plan.entries
        if plan.entries:
            last = plan.entries[-1]
            leader_tail = LogTail(last.index + 1, plan.end_pos, term, last.chain_crc)
        term += draw(st.integers(0, 2))
    if entries and mutation is not None:
        at = draw(st.integers(0, len(entries) - 1))
        entries[at] = _mutate(entries[at], mutation)
    follower_tail = tail
    change = draw(st.sampled_from(["none", "none", "none", "unknown_chain", "tail", "max_body"]))
    if change == "unknown_chain":  # the chain value before the batch is unknown: not checked
        follower_tail = LogTail(
            tail.next_index, tail.write_pos, tail.end_term, draw(st.integers(0, 99)), False
        )
    elif change == "tail":
        follower_tail = LogTail(
            tail.next_index + draw(st.integers(-1, 1)),
            tail.write_pos + draw(st.sampled_from([0, 8, segment_bytes])),
            tail.end_term + draw(st.integers(0, 1)),
            tail.chain_crc ^ draw(st.integers(0, 1)),
        )
    elif change == "max_body":
        max_body = draw(st.integers(0, 2000))
    return follower_tail, entries, segment_bytes, max_body


def _run(planner: object, batch: tuple[LogTail, list[Entry], int, int]) -> Outcome:
    assert callable(planner)
    try:
        plan = planner(*batch)
    except (EntryTooLargeError, InconsistentLogError, struct.error) as exc:
        return type(exc), str(exc)
    assert isinstance(plan, AppendPlan)
    return plan


def _fast(batch: tuple[LogTail, list[Entry], int, int]) -> object:
    tail, entries, segment_bytes, max_body = batch
    return _speedups.plan_replicated_append(
        tail.next_index,
        tail.write_pos,
        tail.end_term,
        tail.chain_crc,
        tail.verify_chain,
        entries,
        segment_bytes,
        max_body,
        Entry,
    )


@pytest.mark.parametrize("mutation", [None, *MUTATIONS])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_c_planner_matches_the_reference(mutation: str | None, data: st.DataObject) -> None:
    batch = data.draw(follower_batches(mutation))
    expected = _run(_plan_replicated_append_py, batch)
    actual = _run(_plan_replicated_append_c, batch)
    assert actual == expected
    event("appended" if isinstance(actual, AppendPlan) else re.sub(r"[-\d]+", "N", actual[1]))
    if isinstance(actual, AppendPlan):
        assert isinstance(expected, AppendPlan)
        # The same objects: received entries are kept, not copied (a body that is not bytes is
        # copied into a new Entry by both).
        assert [a is b for a, b in zip(actual.entries, batch[1], strict=True)] == [
            a is b for a, b in zip(expected.entries, batch[1], strict=True)
        ]
        assert all(type(piece) is bytes for _, piece in actual.data_writes)
        assert type(actual.index_records) is bytes


@pytest.mark.parametrize("mutation", [None, *MUTATIONS])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_c_code_takes_valid_batches_itself(mutation: str | None, data: st.DataObject) -> None:
    """Whatever the reference accepts unchanged, the C code accepts without handing it over;
    whatever the reference refuses, the C code refuses too (and leaves the error to it)."""
    batch = data.draw(follower_batches(mutation))
    expected = _run(_plan_replicated_append_py, batch)
    plain = all(
        type(e.body) is bytes and type(e.channel) is int and e.term < (1 << 63) for e in batch[1]
    )
    if isinstance(expected, AppendPlan) and plain and batch[0].chain_crc >= 0:
        assert _fast(batch) is not None
    elif not isinstance(expected, AppendPlan):
        assert _fast(batch) is None  # every refusal is the reference's


def _leader_entries(count: int, term: int = 1) -> list[Entry]:
    tail = LogTail(0, 0, -1, 0)
    return _plan_leader_append_c(
        tail, term, [os.urandom(100)] * count, 0, EntryType.NORMAL, 4096, 1 << 20
    ).entries


def test_a_batch_that_rolls_over_writes_a_blank_record() -> None:
    tail = LogTail(7, 4096 - 100, 1, 12345)
    bodies = [b"a" * 10, b"b" * 60, b"c" * 200]
    entries = _plan_leader_append_py(tail, 2, bodies, 3, EntryType.NORMAL, 4096, 1 << 20).entries
    assert _fast((tail, entries, 4096, 1 << 20)) is not None
    plan = _plan_replicated_append_c(tail, entries, 4096, 1 << 20)
    assert plan == _plan_replicated_append_py(tail, entries, 4096, 1 << 20)
    assert [pos for pos, _ in plan.data_writes] == [3996, 4096]
    assert plan.data_writes[0][1][-MIN_BLANK_LEN:] == b"\xff\xff\xff\xff" + (42).to_bytes(4, "big")


def test_an_empty_batch() -> None:
    tail = LogTail(3, 500, 1, 77)
    assert _plan_replicated_append_c(tail, [], 4096, 100) == AppendPlan([], [], b"", 500)


def test_entries_are_taken_out_of_the_cyclic_gc() -> None:
    """A log keeps its entries: the C planners untrack those that cannot be in a cycle."""
    leader = _leader_entries(4)
    assert not any(gc.is_tracked(e) for e in leader)
    received = [e._replace() for e in leader]  # built in Python: tracked
    assert all(gc.is_tracked(e) for e in received)
    plan = _plan_replicated_append_c(LogTail(0, 0, -1, 0), received, 4096, 1 << 20)
    assert plan.entries == leader
    assert not any(gc.is_tracked(e) for e in received)


def test_entries_holding_a_gc_object_stay_tracked() -> None:
    class Term:  # an int-like object the C encoder accepts; it could sit in a cycle
        def __index__(self) -> int:
            return 1

    term = Term()
    entries = _plan_leader_append_c(
        LogTail(0, 0, -1, 0),
        term,  # type: ignore[arg-type]  # what __index__ makes of it is what counts
        [b"x"],
        0,
        EntryType.NORMAL,
        4096,
        1 << 20,
    ).entries
    assert id(entries[0].term) == id(term)  # the object passed, not a converted int
    assert gc.is_tracked(entries[0])


def test_no_reference_leaks() -> None:
    entries = _leader_entries(8)
    tail = LogTail(0, 0, -1, 0)
    diverging = [*entries[:3], entries[3]._replace(body_crc=0)]
    before = [sys.getrefcount(e) for e in entries]
    for _ in range(200):
        _plan_replicated_append_c(tail, entries, 4096, 1 << 20)
        with pytest.raises(InconsistentLogError):
            _plan_replicated_append_c(tail, diverging, 4096, 1 << 20)
        with pytest.raises(TypeError):
            _untyped_planner(0, 0, -1, 0, True, 17, 4096, 1 << 20, Entry)
    assert [sys.getrefcount(e) for e in entries] == before


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="9 arguments"):
        _untyped_planner(0, 0, -1, 0, True, [], 4096)
    with pytest.raises(TypeError, match="tuple subclass"):
        _untyped_planner(0, 0, -1, 0, True, [], 4096, 100, int)
    # A tail the C code does not take (a float, a position past its range) goes to the
    # reference.
    assert _untyped_planner(0.0, 0, -1, 0, True, [], 4096, 100, Entry) is None
    assert _untyped_planner(0, 1 << 63, -1, 0, True, [], 4096, 100, Entry) is None


@pytest.mark.parametrize(("pure", "expected"), [("1", "_py"), ("0", "_c")])
def test_the_environment_picks_the_planner(pure: str, expected: str) -> None:
    code = "from ledgermq.store import append_plan as a; print(a.plan_replicated_append.__name__)"
    env = {**os.environ, "LEDGERMQ_PURE_PYTHON": pure}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"_plan_replicated_append{expected}"
