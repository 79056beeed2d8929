"""Model-based test: random operations on both stores, checked against a plain list.

Every step runs on the file store and on the in-memory twin; after every step both must agree with
the model and with each other, entry for entry, including positions and CRCs.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ledgermq.errors import InconsistentLogError
from ledgermq.store import LedgerStore, MemoryLedgerStore

from .conftest import SMALL_INDEX_ENTRIES, SMALL_SEGMENT, open_file_store

bodies = st.binary(max_size=700)


@dataclass(frozen=True)
class ModelEntry:
    index: int
    term: int
    body: bytes
    channel: int


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="ledgermq-stateful-")
        self.file: LedgerStore | None = None
        self.memory = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT)
        self.model: list[ModelEntry] = []
        self.begin = 0
        self.term = 1
        self.committed = -1

    @initialize(flush=st.sampled_from(["async", "sync"]))
    def open_stores(self, flush: str) -> None:
        self.file = open_file_store(self.directory, flush=flush)
        self.memory = MemoryLedgerStore(data_segment_bytes=SMALL_SEGMENT, flush=flush)  # type: ignore[arg-type]

    def teardown(self) -> None:
        if self.file is not None:
            self.file.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.begin + len(self.model) - 1 if self.model else -1

    def both(self) -> tuple[LedgerStore, MemoryLedgerStore]:
        assert self.file is not None
        return self.file, self.memory

    @rule(body=bodies, channel=st.integers(0, 3), bump=st.booleans())
    def append(self, body: bytes, channel: int, bump: bool) -> None:
        self.term += bump
        results = [s.append(self.term, body, channel) for s in self.both()]
        assert results[0] == results[1]
        assert results[0].index == self.end + 1 if self.model else True
        if not self.model:
            self.begin = results[0].index
        self.model.append(ModelEntry(results[0].index, self.term, body, channel))

    @rule(batch=st.lists(bodies, min_size=1, max_size=20), bump=st.booleans())
    def append_batch(self, batch: list[bytes], bump: bool) -> None:
        self.term += bump
        results = [s.append_batch(self.term, batch) for s in self.both()]
        assert results[0] == results[1]
        if not self.model:
            self.begin = results[0][0].index
        self.model.extend(ModelEntry(e.index, self.term, e.body, 0) for e in results[0])

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(self.committed, self.end + 2))
        for store in self.both():
            store.set_committed_index(index)
        self.committed = max(self.committed, min(index, self.end))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(self.begin, self.end + 1))
        for store in self.both():
            try:
                store.truncate_from(index)
                refused = False
            except InconsistentLogError:
                refused = True
        if index <= self.committed or (index == self.begin and self.begin > 0):
            assert refused
            return
        assert not refused
        del self.model[index - self.begin :]

    @precondition(lambda self: self.committed >= 0 and self.committed >= self.begin)
    @rule(data=st.data())
    def retention(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(self.begin, self.committed))
        begins = [store.reset_begin(index) for store in self.both()]
        assert begins[0] == begins[1]
        assert self.begin <= begins[0] <= index
        del self.model[: begins[0] - self.begin]
        self.begin = begins[0]

    @rule()
    def flush(self) -> None:
        for store in self.both():
            store.flush()

    @rule()
    def reopen(self) -> None:
        file, memory = self.both()
        flush_mode = file.flush_mode
        file.close()
        self.file = open_file_store(self.directory, flush=flush_mode)
        memory.flush()
        self.memory = memory.crashed()
        assert self.file.recovery.repairs == []

    @invariant()
    def stores_match_the_model(self) -> None:
        if self.file is None:
            return
        for store in self.both():
            assert store.end_index == self.end
            assert store.begin_index == (self.begin if self.model else -1)
            assert store.end_term == (self.model[-1].term if self.model else -1)
            assert store.committed_index == self.committed
        if not self.model:
            return
        file_entries = self.file.read_range(self.begin, 1 << 30)
        memory_entries = self.memory.read_range(self.begin, 1 << 30)
        assert file_entries == memory_entries
        assert [(e.index, e.term, e.body, e.channel) for e in file_entries] == [
            (m.index, m.term, m.body, m.channel) for m in self.model
        ]
        assert self.file.get(self.end) == file_entries[-1]


StoreMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreMachine = StoreMachine.TestCase

assert SMALL_INDEX_ENTRIES  # the index segments roll too (16 records per file)
