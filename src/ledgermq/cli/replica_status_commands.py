"""``ledgermq admin replica-status``: is a replica caught up, may its group lose another?

The check a rolling restart waits on between two replicas (docs/operations/rolling-restarts.md).
With ``--ready`` the exit status is the verdict: 0 ready, 1 not (with the sentence saying what
is missing); ``--wait`` polls until ready or the time is up. The rule is
``client.readiness``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import table
from ledgermq.cli.admin_common import with_admin as _with_admin
from ledgermq.client.readiness import DEFAULT_MAX_LAG, Readiness, replica_status
from ledgermq.errors import ConfigError
from ledgermq.net import run

if TYPE_CHECKING:
    from ledgermq.client import Admin

__all__ = ["register_replica_status"]

_POLL_S = 0.5


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def register_replica_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser(
        "replica-status",
        help="a broker group's replicas caught up or not; --ready: exit 0 only when the "
        "replica has caught up and the group can lose another",
    )
    status.add_argument("-b", "--broker", help="broker group (brokerName)")
    status.add_argument("--id", help="the replica judged (dLegerSelfId, e.g. n1)")
    status.add_argument(
        "-a",
        "--address",
        help="the replica judged, by its broker address HOST:PORT (asked directly, so it "
        "counts even before the NameServer lists it); gives --broker and --id",
    )
    status.add_argument(
        "--ready",
        action="store_true",
        help="exit 1 unless ready (the replica caught up and every voter of the group too)",
    )
    status.add_argument(
        "--max-lag",
        type=_count,
        default=DEFAULT_MAX_LAG,
        metavar="ENTRIES",
        help=f"entries a caught-up replica may be behind the leader's commit "
        f"(default {DEFAULT_MAX_LAG})",
    )
    status.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="with --ready: ask again until ready or SECONDS have passed (default 0: once)",
    )
    status.set_defaults(handler=cmd_replica_status)


def cmd_replica_status(args: argparse.Namespace) -> int:
    if args.broker is None and args.address is None:
        raise ConfigError("replica-status needs --broker GROUP or --address HOST:PORT")
    if args.wait and not args.ready:
        raise ConfigError("--wait goes with --ready: it waits until the replica is ready")

    async def work(admin: Admin) -> int:
        broker, target = args.broker, args.id
        extra: tuple[str, ...] = ()
        if args.address is not None:
            own = await admin.broker_runtime_info(args.address)
            if broker is not None and own.get("brokerName") != broker:
                raise ConfigError(
                    f"{args.address} serves broker group {own.get('brokerName')}, not {broker}"
                )
            if target is not None and own.get("dLegerSelfId") != target:
                raise ConfigError(
                    f"{args.address} is replica {own.get('dLegerSelfId')}, not {target}"
                )
            broker, target = own.get("brokerName", ""), own.get("dLegerSelfId")
            extra = (args.address,)
        deadline = time.monotonic() + args.wait
        while True:
            verdict = await replica_status(
                admin, broker, target=target, extra_addresses=extra, max_lag=args.max_lag
            )
            if verdict.ready or not args.ready or time.monotonic() >= deadline:
                break
            await asyncio.sleep(_POLL_S)
        _show(args, verdict)
        return 1 if args.ready and not verdict.ready else 0

    return run(_with_admin(args, work))


def _show(args: argparse.Namespace, verdict: Readiness) -> None:
    if args.json:
        print(json.dumps(verdict.as_json(), indent=2))
        return
    table(
        ("replica", "address", "role", "end", "committed", "dispatched", "behind", "caught up"),
        [
            (
                r.replica,
                r.address or "-",
                r.role,
                "-" if r.end_index is None else r.end_index,
                "-" if r.committed_index is None else r.committed_index,
                "-" if r.dispatched_index is None else r.dispatched_index,
                "-" if r.behind is None else r.behind,
                "yes" if r.problem is None else "no",
            )
            for r in verdict.replicas
        ],
    )
    print(verdict.sentence())
