"""The dispatch checkpoint: round trip, absent or damaged file, flush-then-write ordering."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
from ledgermq.broker.storage.dispatch_checkpoint import (
    DISPATCH_CHECKPOINT_NAME,
    DispatchCheckpoint,
    flush_and_checkpoint,
    read_dispatch_checkpoint,
    write_dispatch_checkpoint,
)
from ledgermq.broker.storage.key_index import KeyIndex

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_round_trip(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert read_dispatch_checkpoint(root) == DispatchCheckpoint(-1, -1)
    write_dispatch_checkpoint(root, DispatchCheckpoint(41, 123_456))
    assert read_dispatch_checkpoint(root) == DispatchCheckpoint(41, 123_456)
    write_dispatch_checkpoint(root, DispatchCheckpoint(42, 130_000))
    assert read_dispatch_checkpoint(root) == DispatchCheckpoint(42, 130_000)
    assert sorted(os.listdir(root)) == [DISPATCH_CHECKPOINT_NAME]  # no temporary left
    with open(os.path.join(root, DISPATCH_CHECKPOINT_NAME)) as f:
        assert f.read() == "dispatchedIndex=42\nreputFromOffset=130000\n"


def test_damaged_file_means_start_over(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = str(tmp_path)
    path = os.path.join(root, DISPATCH_CHECKPOINT_NAME)
    for text in [b"dispatchedIndex=4\n", b"dispatchedIndex=x\nreputFromOffset=9\n", b"\xff\xfe"]:
        with open(path, "wb") as f:
            f.write(text)
        assert read_dispatch_checkpoint(root) == DispatchCheckpoint()
    assert "dispatching from the start" in caplog.text


def test_flush_and_checkpoint_flushes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path)
    queues = ConsumeQueueStore(root, units_per_file=4)
    index = KeyIndex(root, records_per_file=4)
    try:
        queues.get_or_create("t", 0).put(0, 48, 10, 0)
        index.add("t", ["k"], 48, 1)
        calls: list[str] = []
        monkeypatch.setattr(queues, "flush_all", lambda: calls.append("queues"))
        monkeypatch.setattr(index, "flush", lambda: calls.append("index"))
        import ledgermq.broker.storage.dispatch_checkpoint as module

        real_write = module.write_dispatch_checkpoint

        def write(r: str, cp: DispatchCheckpoint) -> None:
            calls.append("checkpoint")
            real_write(r, cp)

        monkeypatch.setattr(module, "write_dispatch_checkpoint", write)
        flush_and_checkpoint(root, DispatchCheckpoint(0, 158), queues, index)
        assert calls == ["queues", "index", "checkpoint"]
        assert read_dispatch_checkpoint(root) == DispatchCheckpoint(0, 158)
    finally:
        queues.close()
        index.close()
