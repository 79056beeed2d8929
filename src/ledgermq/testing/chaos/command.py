"""``ledgermq chaos run | cleanup``: the arguments and what each command prints.

``ledgermq.cli.chaos_commands`` only hangs these under the ``ledgermq`` command; everything
the command does lives here, next to the harness it drives.
"""

from __future__ import annotations

import argparse
import signal
from typing import TYPE_CHECKING

from ledgermq.testing.chaos.checker import format_report
from ledgermq.testing.chaos.disks import DEFAULT_DISK_MIB, cleanup_leftover_disks
from ledgermq.testing.chaos.nemesis import ALL_KINDS, DEFAULT_KINDS
from ledgermq.testing.chaos.netns import NetnsError, cleanup_leftovers
from ledgermq.testing.chaos.runner import BUGS, RunOptions, run_chaos

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["add_cleanup_arguments", "add_run_arguments", "cmd_cleanup", "cmd_run"]


def _kinds(text: str) -> list[str]:
    kinds = [kind.strip() for kind in text.split(",") if kind.strip()]
    unknown = sorted(set(kinds) - set(ALL_KINDS))
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown fault kinds {unknown}; choose from {', '.join(ALL_KINDS)}"
        )
    return kinds


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True, help="picks every fault and its time")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    parser.add_argument(
        "--faults",
        type=_kinds,
        default=list(DEFAULT_KINDS),
        help=f"comma-separated fault kinds of {','.join(ALL_KINDS)} (default: the survivable "
        f"ones, {','.join(DEFAULT_KINDS)}; wipe is unsafe by design)",
    )
    parser.add_argument("--producers", type=int, default=3, help="producer tasks sending")
    parser.add_argument("--queues", type=int, default=4, help="queues of the test topic")
    parser.add_argument("--dir", help="keep the logs and the history here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir of a valid run")
    parser.add_argument(
        "--loopback", action="store_true", help="no namespaces: process faults only"
    )
    parser.add_argument(
        "--unsafe",
        action="store_true",
        help="faults may hit two replicas of three at once (a majority): writes stop until "
        "healed, nothing acknowledged may be lost",
    )
    parser.add_argument(
        "--namesrvs",
        type=int,
        choices=(1, 2),
        default=1,
        help="NameServers; with two, a NameServer fault leaves clients the other one",
    )
    parser.add_argument(
        "--groups",
        type=int,
        choices=(1, 2),
        default=1,
        help="broker groups of three replicas; the topic has --queues queues in each",
    )
    parser.add_argument(
        "--no-overlap",
        dest="overlap",
        action="store_false",
        help="one fault at a time (by default about one in three gets a second, compatible "
        "fault during its hold)",
    )
    parser.add_argument(
        "--disk-mib",
        type=int,
        default=DEFAULT_DISK_MIB,
        help="size of each replica's loop disk with disk faults (default %(default)s); a run "
        "that writes more than this makes retention delete what it must check (about 1 MiB "
        "per second of run at the default load: use 4096 for an hour)",
    )
    parser.add_argument(
        "--pop-receivers",
        type=int,
        default=3,
        help="POP receivers of the run's POP group (0: no POP consumption; default %(default)s)",
    )
    parser.add_argument(
        "--inject-bug",
        choices=sorted(BUGS),
        help="run the brokers with a bug put in on purpose (the checker must catch it)",
    )


def cmd_run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """Exit code 0 when the history checks out, 1 when it does not, 2 when the run itself
    could not go on (a fault that could not be put in or healed): one line, no traceback."""
    options = RunOptions(
        seed=args.seed,
        duration_s=args.duration,
        faults=args.faults,
        producers=args.producers,
        queues=args.queues,
        base_dir=args.dir,
        keep=args.keep,
        loopback=args.loopback,
        inject_bug=args.inject_bug,
        unsafe=args.unsafe,
        overlap=args.overlap,
        namesrvs=args.namesrvs,
        groups=args.groups,
        disk_mib=args.disk_mib,
        pop_receivers=args.pop_receivers,
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_chaos(options, out)
    except NetnsError as exc:
        out(
            f"ledgermq chaos: error: seed {options.seed}: the run stopped before its history "
            f"could be checked: {exc}"
        )
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    out(f"seed {options.seed} ({result.mode})")
    out(format_report(result.report))
    for note in [*result.history.notes, *result.notes]:
        out(f"note: {note}")
    if result.report.valid:
        if result.timeline is not None:
            out(f"timeline: {result.timeline}")
        return 0
    out(f"replay: {result.replay}")
    out(f"logs and history: {result.base_dir}")
    if result.timeline is not None:
        out(f"timeline: {result.timeline}")
    return 1


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: the run's ``finally`` blocks kill the cluster and delete the
    namespaces (by default SIGTERM ends the interpreter without running them)."""
    raise KeyboardInterrupt


def add_cleanup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all",
        action="store_true",
        help="also remove the namespaces of runs that are still going",
    )


def cmd_cleanup(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    removed = [
        *cleanup_leftover_disks(include_live=args.all),
        *cleanup_leftovers(include_live=args.all),
    ]
    out("\n".join(f"removed {name}" for name in removed) or "nothing to remove")
    return 0
