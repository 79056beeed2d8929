"""Back up a running replica's data and seed a new or replacement replica from it.

A replica's ``storePathRootDir`` holds its ledger (``dledger-<id>/``: the replicated log, its
checkpoint and ``currterm``), the metadata snapshot (``config/metadata.json``: topics, groups,
offsets, POP, transactions and timers as of a ledger index) and data derived from the log
(consume queues, the key index, ``dispatch_checkpoint``, ``quarantine.jsonl``).

A backup (``backup_replica``) copies, while the replica runs:

1. the metadata snapshot, first: it covers the log up to its ``appliedIndex`` A, which was
   committed when it was written;
2. the ledger, with ``store.backup.copy_live_store`` (checkpoint, index, data, in that order),
   then recovered as after a crash and recorded as committed up to at least A (the copy holds
   the log as it was later than the snapshot, so its entries up to A are the committed ones).

It leaves out the derived data (the restored replica rebuilds its consume queues and key index
from its own log when it starts: local work, no network) and ``currterm`` (see restore), and
writes ``backup.json``, the manifest: the log's range, its committed index and the snapshot's.
The backup is the log as it was when its last data segment was copied: it is as old as the
backup itself, and every entry committed after that is streamed by the leader on restore.

A restore (``restore_replica``) lays the backup out as a replica's ``storePathRootDir`` (under
``dledger-<id>`` for the id the new replica will have) and writes ``currterm`` with the
backup's term, no vote, and ``rebuilding=true``. That last key matters: the backup may be
older than votes and acknowledgements its source gave since, so the restored replica must act
like a replica whose disk was replaced until it has caught up with a leader (it does not vote
for a log it cannot judge nor campaign; ``raft.core``'s rebuilding rules). Once started, the
leader finds the restored log matching its own up to the backup's end and streams only the
entries after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Final

from ledgermq.clock import Clock, SystemClock
from ledgermq.errors import ConfigError
from ledgermq.ledger.hard_state import read_hard_state, write_hard_state
from ledgermq.raft import HardState
from ledgermq.store.backup import BackupError, copy_live_store, copy_tree_sparse, open_copy

__all__ = [
    "MANIFEST_NAME",
    "BackupManifest",
    "backup_replica",
    "read_manifest",
    "restore_replica",
]

MANIFEST_NAME: Final = "backup.json"
BACKUP_FORMAT: Final = 1
"""The layout of a backup directory; ``restore_replica`` refuses any other."""
_METADATA: Final = os.path.join("config", "metadata.json")
_LEDGER_PREFIX: Final = "dledger-"


@dataclass(frozen=True)
class BackupManifest:
    """``backup.json``: what a backup holds (module docstring)."""

    format: int
    self_id: str
    created_ms: int
    seconds: float
    begin_index: int
    end_index: int
    end_term: int
    committed_index: int
    metadata_applied_index: int
    term: int
    disk_bytes: int

    def to_json(self) -> dict[str, object]:
        return {_camel(k): v for k, v in asdict(self).items()}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _ledger_id(root: str, self_id: str | None) -> str:
    """The replica id whose ledger ``root`` holds (``self_id`` if given and present)."""
    if not os.path.isdir(root):
        raise ConfigError(f"{root} does not exist: give the replica's storePathRootDir")
    found = sorted(
        n[len(_LEDGER_PREFIX) :]
        for n in os.listdir(root)
        if n.startswith(_LEDGER_PREFIX) and os.path.isdir(os.path.join(root, n))
    )
    if self_id is not None:
        if self_id not in found:
            raise ConfigError(
                f"{root} has no ledger of replica {self_id} (found: {found or 'none'})"
            )
        return self_id
    if len(found) != 1:
        raise ConfigError(
            f"{root} holds {len(found)} ledgers ({', '.join(found) or 'none'}): name one with "
            "--id, or give the replica's storePathRootDir"
        )
    return found[0]


def _require_new(path: str, what: str) -> None:
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise ConfigError(f"{what} {path} exists and is not empty: give a new directory")


def backup_replica(
    root: str,
    destination: str,
    *,
    self_id: str | None = None,
    clock: Clock | None = None,
    committed_at_start: int = -1,
) -> BackupManifest:
    """Copy the replica whose ``storePathRootDir`` is ``root`` into the new directory
    ``destination`` (module docstring); the manifest it wrote there.

    ``committed_at_start``: the commit index a running replica knows when the copy starts (an
    admin request). Its files tell only what their last checkpoint and metadata snapshot say,
    which may be nothing yet on a replica that has not written either; a committed entry is
    never truncated, so the copy, taken after, holds every entry up to it that the replica had
    written out."""
    clock = clock or SystemClock()
    started = clock.monotonic_ms()
    replica = _ledger_id(root, self_id)
    _require_new(destination, "the backup directory")
    os.makedirs(os.path.join(destination, "config"), exist_ok=True)
    applied = -1
    try:
        shutil.copyfile(os.path.join(root, _METADATA), os.path.join(destination, _METADATA))
        with open(os.path.join(destination, _METADATA), "rb") as f:
            applied = int(json.loads(f.read())["appliedIndex"])
    except FileNotFoundError:
        pass  # a replica that never snapshotted: the log alone rebuilds its metadata
    except (ValueError, KeyError, TypeError) as exc:
        raise BackupError(f"{os.path.join(root, _METADATA)} is not a snapshot: {exc}") from None
    ledger = os.path.join(root, _LEDGER_PREFIX + replica)
    copied = os.path.join(destination, _LEDGER_PREFIX + replica)
    copy_live_store(ledger, copied)
    log = open_copy(copied, committed_at_least=applied, committed_when_copied=committed_at_start)
    for leftover in ("lock", "currterm"):  # not part of a backup (module docstring)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(copied, leftover))
    manifest = BackupManifest(
        format=BACKUP_FORMAT,
        self_id=replica,
        created_ms=int(clock.wall_time_s() * 1000),
        seconds=(clock.monotonic_ms() - started) / 1000,
        begin_index=log.begin_index,
        end_index=log.end_index,
        end_term=log.end_term,
        committed_index=log.committed_index,
        metadata_applied_index=applied,
        term=max(read_hard_state(ledger).term, log.end_term),
        disk_bytes=log.disk_bytes,
    )
    _write_json(os.path.join(destination, MANIFEST_NAME), manifest.to_json())
    return manifest


def _write_json(path: str, value: dict[str, object]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def read_manifest(backup: str) -> BackupManifest:
    """The manifest of the backup directory ``backup``; ``ConfigError`` if it is not one."""
    path = os.path.join(backup, MANIFEST_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        fields = {name: raw[_camel(name)] for name in BackupManifest.__dataclass_fields__}
    except FileNotFoundError:
        raise ConfigError(f"{backup} is not a backup (no {MANIFEST_NAME})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged: {exc}") from None
    if fields["format"] != BACKUP_FORMAT:
        raise ConfigError(
            f"{backup} has backup format {fields['format']}; this release reads {BACKUP_FORMAT}"
        )
    return BackupManifest(**fields)


def restore_replica(backup: str, root: str, *, self_id: str | None = None) -> BackupManifest:
    """Lay ``backup`` out as the new ``storePathRootDir`` ``root`` of replica ``self_id`` (the
    backup's own by default), marked rebuilding (module docstring); the backup's manifest."""
    manifest = read_manifest(backup)
    _require_new(root, "the replica's storePathRootDir")
    replica = self_id or manifest.self_id
    ledger = os.path.join(root, _LEDGER_PREFIX + replica)
    copy_tree_sparse(os.path.join(backup, _LEDGER_PREFIX + manifest.self_id), ledger)
    if os.path.exists(os.path.join(backup, _METADATA)):
        os.makedirs(os.path.join(root, "config"), exist_ok=True)
        shutil.copyfile(os.path.join(backup, _METADATA), os.path.join(root, _METADATA))
    write_hard_state(ledger, HardState(manifest.term, None, rebuilding=True))
    return manifest
