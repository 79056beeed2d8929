from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.store import LedgerStore, LogStore, MemoryLedgerStore

if TYPE_CHECKING:
    from pathlib import Path

SMALL_SEGMENT = 4096
SMALL_INDEX_ENTRIES = 16

StoreFactory = Callable[..., LogStore]


def open_file_store(path: Path | str, **kwargs: Any) -> LedgerStore:
    kwargs.setdefault("data_segment_bytes", SMALL_SEGMENT)
    kwargs.setdefault("index_segment_entries", SMALL_INDEX_ENTRIES)
    kwargs.setdefault("background", False)
    return LedgerStore.open(path, **kwargs)


@pytest.fixture(params=["file", "memory"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory for a fresh store of either implementation (the conformance axis)."""
    opened: list[LogStore] = []

    def factory(**kwargs: Any) -> LogStore:
        store: LogStore
        if request.param == "file":
            store = open_file_store(tmp_path / f"store{len(opened)}", **kwargs)
        else:
            kwargs.pop("index_segment_entries", None)
            kwargs.pop("background", None)
            kwargs.setdefault("data_segment_bytes", SMALL_SEGMENT)
            store = MemoryLedgerStore(**kwargs)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
