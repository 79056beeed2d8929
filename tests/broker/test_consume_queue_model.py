"""Model-based test: random puts, re-dispatches, gaps, truncations, retention and reopens
(clean, or with a torn tail) on a ConsumeQueue, checked after every step against a dict."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ledgermq.broker.storage.consume_queue import BLANK_SIZE, UNIT_SIZE, ConsumeQueue, CqUnit

UPF = 3
BLANK = CqUnit(0, BLANK_SIZE, 0)


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="ledgermq-cq-model-")
        self.queue = ConsumeQueue(self.root, "T", 0, units_per_file=UPF)
        # The model: real units by offset, [min, max), and the commit log's next offset.
        self.units: dict[int, CqUnit] = {}
        self.min = 0
        self.max = 0
        self.next_phy = 48
        self.min_phy = 0

    def teardown(self) -> None:
        self.queue.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def model_read(self, start: int, stop: int) -> list[CqUnit]:
        return [self.units.get(q, BLANK) for q in range(start, stop)]

    def first_real_at_or_after_phy(self, phy: int) -> int:
        live = [
            q for q, u in self.units.items() if self.min <= q < self.max and u.phy_offset >= phy
        ]
        return min(live, default=self.max)

    @rule(size=st.integers(1, 500), tags=st.integers(-(2**63), 2**63 - 1), gap=st.integers(0, 5))
    def put(self, size: int, tags: int, gap: int) -> None:
        q = self.max + (gap if gap > 3 else 0)  # mostly in order, sometimes a gap
        u = CqUnit(self.next_phy, size, tags)
        assert self.queue.put(q, *u)
        if q > self.max and self.min == self.max:
            self.min = q
        self.units[q] = u
        self.max = q + 1
        self.next_phy += size + 48

    @precondition(lambda self: self.max > self.min)
    @rule(data=st.data())
    def re_put(self, data: st.DataObject) -> None:
        q = data.draw(st.integers(self.min, self.max - 1))
        u = self.units.get(q, BLANK)
        if not u.is_blank:
            assert not self.queue.put(q, *u)

    @rule(back=st.integers(0, 3000))
    def truncate_dirty(self, back: int) -> None:
        limit = max(48, self.min_phy, self.next_phy - back)  # the log's end is >= its start
        cut = self.first_real_at_or_after_phy(limit)
        while cut > self.min and cut - 1 not in self.units:  # the blanks before it go too
            cut -= 1
        removed = self.queue.truncate_dirty(limit)
        assert removed == max(0, self.max - cut)
        for q in [q for q in self.units if q >= cut]:
            del self.units[q]
        self.max = min(self.max, cut)
        if self.min == self.max:
            # Emptied: the queue may also drop blanks below min that a restart at a later
            # offset left (the model does not track them); it stays empty, ending no later.
            assert self.queue.min_offset == self.queue.max_offset <= self.max
            self.min = self.max = self.queue.max_offset
        self.next_phy = limit  # the log was cut there: new messages start at the limit

    @rule(back=st.integers(0, 3000))
    def delete_expired(self, back: int) -> None:
        self.min_phy = max(self.min_phy, self.next_phy - back)
        self.queue.delete_expired(self.min_phy)
        self.min = self.first_real_at_or_after_phy(self.min_phy)

    @rule()
    def reopen(self) -> None:
        self.queue.close()
        self.queue = ConsumeQueue(self.root, "T", 0, units_per_file=UPF)
        self.queue.correct_min_offset(self.min_phy)  # what the broker does at start

    @precondition(lambda self: self.max > self.min)
    @rule(kind=st.sampled_from(["zero", "partial", "garbage"]))
    def crash_with_torn_tail(self, kind: str) -> None:
        """The last unit did not fully reach the disk before a crash (re-dispatched later)."""
        self.queue.close()
        last = self.max - 1
        directory = self.queue.directory
        file_bytes = UPF * UNIT_SIZE
        base = last * UNIT_SIZE // file_bytes * file_bytes
        name = f"{base:020d}"
        off = last * UNIT_SIZE - base
        with open(os.path.join(directory, name), "r+b") as f:
            f.seek(off)
            if kind == "zero":
                f.write(bytes(UNIT_SIZE))
            elif kind == "partial":
                f.seek(off + 8)
                f.write(bytes(12))
            else:  # the unit is gone and garbage follows it where there is room
                f.write(bytes(UNIT_SIZE) + b"\xab" * (os.path.getsize(f.name) - off - UNIT_SIZE))
        self.queue = ConsumeQueue(self.root, "T", 0, units_per_file=UPF)
        self.queue.correct_min_offset(self.min_phy)
        lost = self.units.pop(last)
        self.max = last
        while self.max > self.min and self.max - 1 not in self.units:
            self.max -= 1  # blanks that led up to the lost unit go too
        self.min = min(self.min, self.max)
        # Re-dispatch from before the crash puts the unit back at its offset.
        assert self.queue.put(last, *lost)
        if last > self.max and self.min == self.max:
            self.min = last
        self.units[last] = lost
        self.max = last + 1

    @invariant()
    def matches_model(self) -> None:
        queue = self.queue
        assert (queue.min_offset, queue.max_offset) == (self.min, self.max)
        assert queue.read(self.min, 1000) == self.model_read(self.min, self.max)
        # The PULL path's columns hold the same units (blanks included), from any offset.
        for start in (self.min, (self.min + self.max) // 2):
            model = self.model_read(start, self.max)
            assert queue.read_columns(start, 1000) == (
                tuple(u.phy_offset for u in model),
                tuple(u.size for u in model),
                tuple(u.tags_code for u in model),
            )
        reals = [q for q in self.units if self.min <= q < self.max]
        if reals:  # (a unit below min may be gone from the disk with its file)
            assert queue.last_phy_offset == self.units[max(reals)].phy_offset
        for q in range(self.min, self.max):
            assert queue.get(q) == self.units.get(q, BLANK)


QueueMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)
TestQueueModel = QueueMachine.TestCase
