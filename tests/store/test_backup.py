"""``store.backup`` and ``broker.backup`` (issue 27 item 7): a copy of a store that is open and
being written reads back as the same log, its zeros stay holes, a torn tail is cut as after a
crash, and a restore marks the replica rebuilding; bad directories are refused with a sentence."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.backup import backup_replica, read_manifest, restore_replica
from ledgermq.errors import ConfigError
from ledgermq.ledger.hard_state import read_hard_state, write_hard_state
from ledgermq.raft import HardState
from ledgermq.store import LedgerStore
from ledgermq.store.backup import BackupError, copy_live_store, open_copy

if TYPE_CHECKING:
    from pathlib import Path

SEGMENT = 1 << 20


def _store(path: Path) -> LedgerStore:
    return LedgerStore.open(
        path, data_segment_bytes=SEGMENT, index_segment_entries=4096, background=False
    )


def test_a_store_open_in_its_owner_is_copied_as_the_same_log(tmp_path: Path) -> None:
    owner = _store(tmp_path / "live")
    try:
        bodies = [b"entry-%04d" % i + b"x" * 3000 for i in range(400)]  # 2 data segments
        for body in bodies:
            owner.append(2, body)
        owner.set_committed_index(350)
        owner.flush()
        owner.run_maintenance()  # its checkpoint
        copy_live_store(str(tmp_path / "live"), str(tmp_path / "copy"))
        owner.append(2, b"after the copy")
    finally:
        owner.close()
    log = open_copy(str(tmp_path / "copy"), committed_at_least=360)
    assert (log.begin_index, log.end_index, log.end_term) == (0, 399, 2)
    assert log.committed_index == 360
    apparent = sum(
        os.path.getsize(os.path.join(root, f))
        for root, _, files in os.walk(tmp_path / "copy")
        for f in files
    )
    assert log.disk_bytes < apparent  # the preallocated zeros are holes
    with _store(tmp_path / "copy") as copy:
        assert [copy.get(i).body for i in range(400)] == bodies


def test_a_torn_tail_in_the_copy_is_cut_as_after_a_crash(tmp_path: Path) -> None:
    with _store(tmp_path / "live") as owner:
        for i in range(10):
            owner.append(1, b"m%d" % i)
    copy_live_store(str(tmp_path / "live"), str(tmp_path / "copy"))
    data = tmp_path / "copy" / "data" / "00000000000000000000"
    raw = bytearray(data.read_bytes())
    with _store(tmp_path / "live") as owner:
        last = owner.get(9)
    raw[last.pos : last.pos + last.size] = bytes(last.size)  # its data not written yet
    data.write_bytes(bytes(raw))
    assert open_copy(str(tmp_path / "copy")).end_index == 8


def test_a_copy_that_ends_before_the_snapshot_is_refused(tmp_path: Path) -> None:
    with _store(tmp_path / "live") as owner:
        owner.append(1, b"one")
    copy_live_store(str(tmp_path / "live"), str(tmp_path / "copy"))
    with pytest.raises(BackupError, match="run the backup again"):
        open_copy(str(tmp_path / "copy"), committed_at_least=5)


def test_backup_then_restore_lays_out_a_rebuilding_replica(tmp_path: Path) -> None:
    root = tmp_path / "replica"
    with _store(root / "dledger-n1") as owner:
        for i in range(20):
            owner.append(3, b"m%d" % i)
    write_hard_state(str(root / "dledger-n1"), HardState(3, "n0"))
    (root / "config").mkdir()
    (root / "config" / "metadata.json").write_text(json.dumps({"version": 1, "appliedIndex": 7}))
    (root / "consumequeue").mkdir()  # derived data: not in the backup
    manifest = backup_replica(str(root), str(tmp_path / "backup"))
    assert (manifest.self_id, manifest.end_index, manifest.committed_index) == ("n1", 19, 7)
    assert (manifest.metadata_applied_index, manifest.term) == (7, 3)
    assert read_manifest(str(tmp_path / "backup")) == manifest
    assert sorted(os.listdir(tmp_path / "backup")) == ["backup.json", "config", "dledger-n1"]

    restore_replica(str(tmp_path / "backup"), str(tmp_path / "new"), self_id="n4")
    state = read_hard_state(str(tmp_path / "new" / "dledger-n4"))
    assert state == HardState(3, None, rebuilding=True)
    assert (tmp_path / "new" / "config" / "metadata.json").exists()
    with _store(tmp_path / "new" / "dledger-n4") as restored:
        assert (restored.end_index, restored.get(19).body) == (19, b"m19")


def test_bad_directories_are_refused_with_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist: give the replica's storePathRootDir"):
        backup_replica(str(tmp_path / "nowhere"), str(tmp_path / "b"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds 0 ledgers"):
        backup_replica(str(tmp_path / "empty"), str(tmp_path / "b"))
    with pytest.raises(ConfigError, match="is not a backup"):
        restore_replica(str(tmp_path / "empty"), str(tmp_path / "r"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with _store(tmp_path / "src" / "dledger-n0") as owner:
        owner.append(1, b"m")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        backup_replica(str(tmp_path / "src"), str(tmp_path / "full"))
