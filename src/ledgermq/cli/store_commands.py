"""``ledgermq store ...``: inspect and use a ledger store directory directly.

Opening a store runs recovery (and may repair a torn tail), so these commands take the store's
lock: stop the process that owns the store first.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from ledgermq.cli.store_backup_commands import register_backup
from ledgermq.errors import CorruptLogError, LedgerMQError
from ledgermq.store import LedgerStore
from ledgermq.store.backup import detect_segment_sizes
from ledgermq.store.layout import parse_segment_name

if TYPE_CHECKING:
    import argparse


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = commands.add_parser("store", help="inspect or use a ledger store directory")
    sub = store.add_subparsers(dest="store_command", metavar="STORE_COMMAND", required=True)

    info = sub.add_parser("info", help="begin, end, term, committed index and segment files")
    info.add_argument("directory")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(handler=cmd_info)

    verify = sub.add_parser("verify", help="read every entry, checking CRCs and the chain")
    verify.add_argument("directory")
    verify.set_defaults(handler=cmd_verify)

    get = sub.add_parser("get", help="print one entry")
    get.add_argument("directory")
    get.add_argument("index", type=int)
    get.add_argument("--json", action="store_true", help="print JSON (body as text if UTF-8)")
    get.set_defaults(handler=cmd_get)

    append = sub.add_parser("append", help="append one entry (body from --body or stdin)")
    append.add_argument("directory")
    append.add_argument("--term", type=int, required=True)
    append.add_argument("--body", help="UTF-8 text body; read from stdin when omitted")
    append.add_argument("--sync", action="store_true", help="open with flush=sync")
    append.set_defaults(handler=cmd_append)
    register_backup(sub)


def open_existing(directory: str) -> LedgerStore:
    if not os.path.isdir(os.path.join(directory, "data")):
        raise LedgerMQError(f"{directory} is not a ledger store (no data/ directory)")
    data_bytes, index_entries = detect_segment_sizes(directory)
    return LedgerStore.open(
        directory,
        background=False,
        data_segment_bytes=data_bytes,
        index_segment_entries=index_entries,
    )


def cmd_info(args: argparse.Namespace) -> int:
    with open_existing(args.directory) as store:
        data_dir = os.path.join(args.directory, "data")
        segments = sorted(n for n in os.listdir(data_dir) if parse_segment_name(n) is not None)
        info = {
            "directory": store.directory,
            "begin_index": store.begin_index,
            "end_index": store.end_index,
            "end_term": store.end_term,
            "committed_index": store.committed_index,
            "write_pos": store.write_pos,
            "data_segment_bytes": store.data_segment_bytes,
            "data_segments": segments,
            "repairs_at_open": store.recovery.repairs,
        }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key:<{width}}  {shown}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    with open_existing(args.directory) as store:
        index = store.begin_index
        count = 0
        total = 0
        if store.end_index >= 0:
            while index <= store.end_index:
                try:
                    batch = store.read_range(index, 4 << 20)
                except CorruptLogError as exc:
                    print(f"CORRUPT at entry {index} or just after: {exc}")
                    return 1
                count += len(batch)
                total += sum(e.size for e in batch)
                index = batch[-1].index + 1
        print(f"ok: {count} entries, {total} bytes, [{store.begin_index}, {store.end_index}]")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    with open_existing(args.directory) as store:
        entry = store.get(args.index)
    try:
        text: str | None = entry.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if args.json:
        record = entry._asdict()
        record["entry_type"] = entry.entry_type.name
        record["body"] = text if text is not None else entry.body.hex()
        record["body_encoding"] = "utf-8" if text is not None else "hex"
        print(json.dumps(record, indent=2))
    else:
        print(
            f"index={entry.index} term={entry.term} pos={entry.pos} size={entry.size} "
            f"type={entry.entry_type.name} channel={entry.channel}"
        )
        sys.stdout.write(text if text is not None else entry.body.hex())
        sys.stdout.write("\n")
    return 0


def cmd_append(args: argparse.Namespace) -> int:
    body = args.body.encode("utf-8") if args.body is not None else sys.stdin.buffer.read()
    os.makedirs(args.directory, exist_ok=True)
    data_bytes, index_entries = detect_segment_sizes(args.directory)
    with LedgerStore.open(
        args.directory,
        background=False,
        flush="sync" if args.sync else "async",
        data_segment_bytes=data_bytes,
        index_segment_entries=index_entries,
    ) as store:
        entry = store.append(args.term, body)
    print(f"appended index={entry.index} term={entry.term} pos={entry.pos} size={entry.size}")
    return 0
