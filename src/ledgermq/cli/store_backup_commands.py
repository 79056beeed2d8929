"""``ledgermq store backup`` and ``store restore``: copy a running replica's data, and seed a
new or replacement replica from the copy (``broker.backup``; docs/operations/backup-and-restore.md).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ledgermq.broker.backup import BackupManifest, backup_replica, restore_replica

if TYPE_CHECKING:
    import argparse

__all__ = ["register_backup"]


def register_backup(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = sub.add_parser(
        "backup",
        help="copy a replica's data while it runs (its log and metadata snapshot) into a new "
        "directory",
    )
    backup.add_argument(
        "--data", required=True, metavar="ROOT", help="the replica's storePathRootDir"
    )
    backup.add_argument("--to", required=True, metavar="DEST", help="a new directory")
    backup.add_argument("--id", help="the replica (dLegerSelfId) when ROOT holds several ledgers")
    backup.add_argument("--json", action="store_true", help="print the manifest as JSON")
    backup.set_defaults(handler=cmd_backup)
    restore = sub.add_parser(
        "restore",
        help="lay a backup out as a new replica's storePathRootDir (start the replica on it "
        "next; it catches up from the backup's end)",
    )
    restore.add_argument("--from", dest="source", required=True, metavar="BACKUP")
    restore.add_argument(
        "--data", required=True, metavar="ROOT", help="the new replica's storePathRootDir"
    )
    restore.add_argument("--id", help="the new replica's dLegerSelfId (default: the backup's)")
    restore.add_argument("--json", action="store_true", help="print the manifest as JSON")
    restore.set_defaults(handler=cmd_restore)


def _show(args: argparse.Namespace, manifest: BackupManifest, verb: str) -> None:
    if args.json:
        print(json.dumps(manifest.to_json(), indent=2))
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(manifest.created_ms / 1000))
    print(
        f"{verb} replica {manifest.self_id}'s log [{manifest.begin_index}, "
        f"{manifest.end_index}] (committed {manifest.committed_index}, metadata snapshot at "
        f"{manifest.metadata_applied_index}), taken {stamp}, "
        f"{manifest.disk_bytes / 1e6:.1f} MB, copied in {manifest.seconds:.2f} s"
    )


def cmd_backup(args: argparse.Namespace) -> int:
    manifest = backup_replica(args.data, args.to, self_id=args.id)
    _show(args, manifest, f"backed up into {args.to}:")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    manifest = restore_replica(args.source, args.data, self_id=args.id)
    _show(args, manifest, f"restored into {args.data} (as {args.id or manifest.self_id}):")
    if not args.json:
        print(
            "start the replica on it now: it catches up from entry "
            f"{manifest.end_index + 1} and votes only once it has caught up"
        )
    return 0
