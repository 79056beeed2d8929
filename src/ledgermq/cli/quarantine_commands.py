"""``ledgermq admin quarantined-entries [-b GROUP] [-c CLUSTER] [--since INDEX]``.

Lists, replica by replica, the committed records each one skipped because no replica can apply
them (a message for a topic name that cannot be a queue, a metadata op that does not apply;
README "Operations"). Every replica of a group skips the same records, so a group whose
replicas list different ones is worth a look. Exit status 0 when every replica answered, 1
otherwise (an unreachable replica is listed with the reason).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import emit, replicas_of, with_admin
from ledgermq.errors import LedgerMQError
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

    from ledgermq.client import Admin

__all__ = ["register_quarantine"]


def register_quarantine(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "quarantined-entries",
        help="committed entries each replica skipped because no replica can apply them",
    )
    parser.add_argument("-b", "--broker", help="only this broker group")
    parser.add_argument("-c", "--cluster", help="only this cluster")
    parser.add_argument(
        "--since", type=int, default=0, metavar="INDEX", help="from this ledger index on"
    )
    parser.add_argument("--limit", type=int, default=1000, help="at most this many per replica")
    parser.set_defaults(handler=cmd_quarantined_entries)


def cmd_quarantined_entries(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        replicas = await replicas_of(admin, args.cluster, args.broker)
        rows: list[tuple[object, ...]] = []
        status = 0
        for name, by_id in replicas.items():
            for broker_id, address in by_id.items():
                try:
                    _total, entries = await admin.quarantined_entries(
                        address, args.since, args.limit
                    )
                except LedgerMQError as exc:
                    rows.append((name, broker_id, address, "", "", "", f"unreachable: {exc}"))
                    status = 1
                    continue
                rows.extend(
                    (name, broker_id, address, e.index, e.record, e.topic, e.reason)
                    for e in entries
                )
        emit(
            args,
            ("broker", "id", "address", "index", "record", "topic", "reason"),
            ("brokerName", "brokerId", "address", "index", "record", "topic", "reason"),
            rows,
        )
        return status

    return run(with_admin(args, work))
