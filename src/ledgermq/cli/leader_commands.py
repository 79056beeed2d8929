"""``ledgermq admin cluster-list``, ``transfer-leader``, ``set-preferred-leader`` and
``balance-leaders``: the broker groups as their replicas describe them, and where their masters
are (``client.leader_balance``; docs/operations/leader-balance.md).

A group's preferred leader is the ``preferredLeaderId`` key of each replica's ``broker.conf``
(DLedger's ``preferredLeaderIds``): ``set-preferred-leader`` changes it live on every replica
(UPDATE_BROKER_CONFIG, which rewrites the file, so a restart keeps it) and the group's leader
hands over to it within about a second once it is caught up.

``transfer-leader`` moves a master now. Where the group has a preferred leader other than the
target, that preference would take the leadership back within a second (DLedger's check), so by
default the command makes the target the preferred leader too, and says so; with
``--keep-preference`` it moves the master only and says when the preference moves it back. A
Kafka operator expects the same: a manual move that is meant to last changes the preferred
replica (a reassignment), and the preferred-replica election is explicit (``balance-leaders``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import emit, with_admin
from ledgermq.client.leader_balance import GroupSurvey, plan_leaders, survey
from ledgermq.errors import LedgerMQError
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

    from ledgermq.client import Admin

__all__ = ["register_leaders"]

_MOVE_WAIT_S = 5.0
"""How long a command waits to see a group's new master (a transfer takes about 1 s)."""


def register_leaders(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listing = sub.add_parser(
        "cluster-list",
        help="broker groups, their replicas and roles; a group without a master, members "
        "that do not answer and replicas whose peer lists differ are shown",
    )
    listing.add_argument("-c", "--cluster", help="only this cluster")
    listing.set_defaults(handler=cmd_cluster_list)
    transfer = sub.add_parser("transfer-leader", help="move a broker group's master")
    transfer.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    transfer.add_argument("--to", required=True, help="the replica to lead, e.g. n1")
    transfer.add_argument(
        "--keep-preference",
        action="store_true",
        help="leave the group's preferred leader as it is (it takes the leadership back "
        "within about 1 s); by default --to becomes the preferred leader where one is set",
    )
    transfer.set_defaults(handler=cmd_transfer)
    prefer = sub.add_parser(
        "set-preferred-leader",
        help="the replica a broker group's leader hands over to whenever it is caught up "
        "(preferredLeaderId on every replica, live and persisted)",
    )
    prefer.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    which = prefer.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="the preferred replica, e.g. n1")
    which.add_argument("--clear", action="store_true", help="no preferred leader")
    prefer.add_argument(
        "--no-wait", action="store_true", help="do not wait to see the replica lead"
    )
    prefer.set_defaults(handler=cmd_set_preferred_leader)
    balance = sub.add_parser(
        "balance-leaders",
        help="move every group's master to its preferred replica, or spread the masters "
        "over the hosts where no preference is set",
    )
    balance.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    balance.add_argument("--dry-run", action="store_true", help="show the moves, make none")
    balance.add_argument(
        "--pin",
        action="store_true",
        help="also make each group's planned master its preferred leader, so that the groups "
        "return to this placement by themselves after restarts",
    )
    balance.set_defaults(handler=cmd_balance_leaders)


# ---------------------------------------------------------------------- cluster-list
def cmd_cluster_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        rows: list[tuple[object, ...]] = []
        for group in await survey(admin, args.cluster):
            rows.extend(_group_rows(group))
        emit(
            args,
            ("cluster", "broker", "id", "address", "role", "replica", "term", "committed",
             "preferred", "note"),
            ("cluster", "brokerName", "brokerId", "address", "role", "replica", "term",
             "committedIndex", "preferredLeaderId", "note"),
            rows,
        )  # fmt: skip
        return 0

    return run(with_admin(args, work))


def _group_rows(group: GroupSurvey) -> list[tuple[object, ...]]:
    """One row per registered replica, then one per member that did not answer for itself,
    then, when no replica is master, a row saying so (the group takes no writes)."""
    rows: list[tuple[object, ...]] = []
    differs = group.membership_differs
    for a in group.answers:
        info = a.info
        if info is None:
            rows.append((group.cluster, group.name, a.broker_id, a.address,
                         f"unreachable ({(a.error or '').split(':')[0]})", "?", "?", "?", "?",
                         a.error or ""))  # fmt: skip
            continue
        note = ""
        if differs:
            ids = ",".join(p.partition("-")[0] for p in a.peers)
            note = f"membership differs: this replica's peers are {ids}"
        rows.append((group.cluster, group.name, a.broker_id, a.address,
                     info.get("brokerRole", "?"), info.get("dLegerSelfId", "?"),
                     info.get("dLegerTerm", "?"), info.get("committedIndex", "?"),
                     a.preferred or "-", note))  # fmt: skip
    members = group.members
    missing = ("a member (in the replicas' dLegerPeers) that is not registered with the "
               "NameServer or does not answer")  # fmt: skip
    rows.extend(
        (group.cluster, group.name, "-", members[r], "missing", r, "?", "?", "?", missing)
        for r in group.missing
    )
    if group.master is None:
        why = (
            "no replica is master: the group takes no writes (an election, or its majority is lost)"
        )
        rows.append((group.cluster, group.name, "-", "-", "NO MASTER", "-", "-", "-", "-", why))
    return rows


# ---------------------------------------------------------------------- preferences
async def _group(admin: Admin, name: str) -> GroupSurvey:
    groups = await survey(admin)
    for group in groups:
        if group.name == name:
            return group
    known = ", ".join(g.name for g in groups) or "none"
    raise LedgerMQError(f"broker group {name!r} is not registered; known: {known}")


def _check_member(group: GroupSurvey, replica: str) -> None:
    members = group.members or dict.fromkeys(group.hosts(), "")
    if replica not in members:
        raise LedgerMQError(
            f"{replica!r} is not a replica of group {group.name} "
            f"({', '.join(members) or 'no replica answered'})"
        )


async def _set_preference(admin: Admin, group: GroupSurvey, value: str) -> dict[str, str]:
    """``preferredLeaderId=value`` on every replica that answers; replica -> why it was not
    set, for each member where it was not (did not answer, or refused)."""
    failed: dict[str, str] = {}
    for answer in group.answers:
        if answer.replica is None:
            failed[f"brokerId {answer.broker_id} ({answer.address})"] = (
                answer.error or "did not answer"
            )
            continue
        try:
            await admin.update_broker_config(answer.address, {"preferredLeaderId": value})
        except LedgerMQError as exc:
            failed[answer.replica] = str(exc)
    for replica in group.missing:
        failed.setdefault(replica, "not registered with the NameServer or not answering")
    return failed


async def _leader_of(admin: Admin, name: str) -> str | None:
    group = await _group(admin, name)
    master = group.master
    return master.replica if master is not None else None


async def _wait_leader(admin: Admin, name: str, replica: str, wait_s: float) -> str | None:
    """The group's master after waiting up to ``wait_s`` for ``replica`` to be it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        leader = await _leader_of(admin, name)
        if leader == replica or loop.time() >= deadline:
            return leader
        await asyncio.sleep(0.2)


def _report_unset(args: argparse.Namespace, name: str, failed: dict[str, str]) -> None:
    for replica, why in sorted(failed.items()):
        print(
            f"preferredLeaderId not set on {name} {replica}: {why}; set it again once it "
            "answers (until then, if it leads, it keeps its old preference)",
            file=sys.stderr,
        )


def cmd_set_preferred_leader(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        group = await _group(admin, args.broker)
        value = "" if args.clear else args.id
        if value:
            _check_member(group, value)
        failed = await _set_preference(admin, group, value)
        _report_unset(args, group.name, failed)
        leader = None
        if value and not args.no_wait:
            leader = await _wait_leader(admin, group.name, value, _MOVE_WAIT_S)
        else:
            leader = await _leader_of(admin, group.name)
        if args.json:
            print(json.dumps({"brokerName": group.name, "preferredLeaderId": value,
                              "notSet": failed, "leader": leader}))  # fmt: skip
        elif not value:
            print(f"broker group {group.name} has no preferred leader now (leader {leader})")
        elif leader == value:
            print(f"{value} is the preferred leader of broker group {group.name} and leads it")
        else:
            now = leader or "no replica"
            print(
                f"{value} is the preferred leader of broker group {group.name}; {now} leads it "
                f"now: the leader hands over once {value} is caught up (checked every second)"
            )
        return 1 if failed else 0

    return run(with_admin(args, work))


# ---------------------------------------------------------------------- transfer
def cmd_transfer(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        group = await _group(admin, args.broker)
        _check_member(group, args.to)
        preferred = sorted({p.split(";")[0] for p in group.preferred.values() if p})
        other = [p for p in preferred if p != args.to]
        failed: dict[str, str] = {}
        if other and not args.keep_preference:
            failed = await _set_preference(admin, group, args.to)
            _report_unset(args, group.name, failed)
        try:
            await admin.transfer_leadership(group.name, args.to)
        except LedgerMQError:
            # With its new preference the leader may be handing over on its own already:
            # what counts is who leads once that is over.
            changed = other and not args.keep_preference
            if not changed or await _wait_leader(admin, group.name, args.to, _MOVE_WAIT_S) != (
                args.to
            ):
                raise
        notes = []
        if other and args.keep_preference:
            notes.append(
                f"its preferred leader {other[0]} takes the leadership back within about 1 s "
                f"once it is caught up (set-preferred-leader -b {group.name} --id {args.to} "
                "makes this move last)"
            )
        elif other:
            notes.append(f"{args.to} is its preferred leader now (was {', '.join(other)})")
        if args.json:
            print(json.dumps({"brokerName": group.name, "leader": args.to,
                              "preferredLeaderId": other[0] if args.keep_preference and other
                              else (args.to if other else ""), "notes": notes}))  # fmt: skip
        else:
            print(f"{args.to} leads broker group {group.name}")
            for note in notes:
                print(f"  {note}")
        return 1 if failed else 0

    return run(with_admin(args, work))


# ---------------------------------------------------------------------- balance
async def _pin(admin: Admin, group: GroupSurvey, target: str) -> dict[str, str]:
    """``--pin``: ``target`` becomes the group's preferred leader where it is not yet; the
    replicas where that failed (also named on stderr)."""
    if all(p.split(";")[0] == target for p in group.preferred.values()) and not group.missing:
        return {}
    failed = await _set_preference(admin, group, target)
    for replica, why in sorted(failed.items()):
        print(f"preferredLeaderId not set on {group.name} {replica}: {why}", file=sys.stderr)
    return failed


def cmd_balance_leaders(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        groups = await survey(admin, args.cluster)
        plan = plan_leaders(groups)
        rows: list[tuple[object, ...]] = []
        failures = 0
        for group in groups:
            master = group.master
            current = master.replica if master is not None else None
            target = plan.get(group.name)
            host = "-"
            if current is None or target is None:
                outcome = "no master: skipped"
                failures += 1
            elif target == current:
                outcome = "stays"
            elif args.dry_run:
                outcome = "would move"
            else:
                try:
                    await admin.transfer_leadership(group.name, target)
                    outcome = "moved"
                except LedgerMQError as exc:
                    outcome = f"not moved: {exc}"
                    failures += 1
            if target is not None:
                host = group.hosts().get(target, "-")
                if args.pin and not args.dry_run:
                    unset = await _pin(admin, group, target)
                    outcome += f"; preferred leader {target}" if not unset else ""
                    failures += bool(unset)
            rows.append((group.name, current or "-", target or "-", host, outcome))
        emit(
            args,
            ("broker", "master", "target", "target host", "outcome"),
            ("brokerName", "master", "target", "targetHost", "outcome"),
            rows,
        )
        return 1 if failures else 0

    return run(with_admin(args, work))
