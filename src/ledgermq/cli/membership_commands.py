"""``ledgermq admin replica-list / replica-add / replica-remove``: a broker group's members.

etcd's model (``member list / add / remove``), so operators recognise it. The commands go to the
group's master (found through the NameServer), which proposes the change through its log
(single-server changes, ``ledgermq.raft.membership``); admin accounts only (ACL).

- ``replica-list -b GROUP [--json]``: every member with its id, ledger address, role
  (``leader`` / ``follower`` / ``learner``), log end, lag (entries behind the leader) and last
  contact (ms since the master last heard from it); ``--json`` prints a list of objects with
  the keys ``id``, ``address``, ``role``, ``logEnd``, ``lag``, ``lastContactMs``.
- ``replica-add -b GROUP --peer nX-HOST:PORT``: the new member enters as a learner (it gets the
  log, does not vote); start it next with a broker.conf whose ``dLegerPeers`` lists the members
  as ``replica-list`` shows them plus itself. The master promotes it to voter once it has caught
  up (within 100 entries for 5 heartbeats).
- ``replica-remove -b GROUP --id nX``: the member leaves (the master itself too: it hands over
  once the change is committed); stop its process afterwards.
- ``backup -b GROUP --replica nX --to DIR [--json]``: replica ``nX`` copies its data (metadata
  snapshot, then its live log, recovered as after a crash) into ``DIR`` on its own host, an
  absolute path that is new or empty, while it serves; ``ledgermq store restore`` seeds a
  replica from it (docs/operations/backup-and-restore.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import emit, with_admin
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

    from ledgermq.client import Admin

__all__ = ["register_membership"]

KEYS = ("id", "address", "role", "logEnd", "lag", "lastContactMs")


def register_membership(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listing = sub.add_parser("replica-list", help="a broker group's replicas, roles and lags")
    listing.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    listing.set_defaults(handler=cmd_replica_list)
    add = sub.add_parser("replica-add", help="add a replica to a broker group (as a learner)")
    add.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    add.add_argument(
        "--peer", required=True, help="the new replica as in dLegerPeers: nX-HOST:LEDGERPORT"
    )
    add.set_defaults(handler=cmd_replica_add)
    remove = sub.add_parser("replica-remove", help="remove a replica from a broker group")
    remove.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    remove.add_argument("--id", required=True, help="the replica's dLegerSelfId, e.g. n2")
    remove.set_defaults(handler=cmd_replica_remove)
    backup = sub.add_parser(
        "backup", help="a running replica copies its data into a new directory on its host"
    )
    backup.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    backup.add_argument("--replica", required=True, help="the replica's dLegerSelfId, e.g. n1")
    backup.add_argument(
        "--to",
        required=True,
        metavar="DIR",
        help="an absolute path on the replica's host, new or empty",
    )
    backup.set_defaults(handler=cmd_backup)


def cmd_replica_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        replicas = await admin.replica_list(args.broker)
        rows = [tuple(r.get(k) for k in KEYS) for r in replicas]
        emit(args, ("id", "address", "role", "log end", "lag", "last contact ms"), KEYS, rows)
        return 0

    return run(with_admin(args, work))


def cmd_replica_add(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        index = await admin.replica_add(args.broker, args.peer)
        member = args.peer.partition("-")[0]
        if args.json:
            print(json.dumps({"brokerName": args.broker, "added": member, "index": index}))
        else:
            print(
                f"{member} joined broker group {args.broker} as a learner (log index {index}); "
                "start it with dLegerPeers listing the members plus itself"
            )
        return 0

    return run(with_admin(args, work))


def cmd_replica_remove(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        index = await admin.replica_remove(args.broker, args.id)
        if args.json:
            print(json.dumps({"brokerName": args.broker, "removed": args.id, "index": index}))
        else:
            print(f"{args.id} left broker group {args.broker} (log index {index}); stop it now")
        return 0

    return run(with_admin(args, work))


def cmd_backup(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        manifest = await admin.replica_backup(args.broker, args.replica, args.to)
        if args.json:
            print(json.dumps(manifest, indent=2))
        else:
            print(
                f"replica {args.replica} of {args.broker} backed up into {args.to} on its host: "
                f"log [{manifest.get('beginIndex')}, {manifest.get('endIndex')}] (committed "
                f"{manifest.get('committedIndex')}, metadata snapshot at "
                f"{manifest.get('metadataAppliedIndex')}), {manifest.get('diskBytes')} bytes, "
                f"copied in {manifest.get('seconds')} s; seed a replica with `ledgermq store "
                "restore --from DIR`"
            )
        return 0

    return run(with_admin(args, work))
