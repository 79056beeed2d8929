"""``ledgermq chaos run | cleanup``: the fault suite of ``ledgermq.testing.chaos``.

Thin on purpose: the commands' arguments and output live in ``ledgermq.testing.chaos.command``.
This is the one module of the shipped CLI that imports ``ledgermq.testing`` (an exception
listed in the import contracts of pyproject.toml), so that ``ledgermq chaos`` exists wherever
``ledgermq`` is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.testing.chaos import command

if TYPE_CHECKING:
    import argparse


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = commands.add_parser(
        "chaos", help="fault-injection runs against a real cluster, checked (needs root)"
    )
    sub = chaos.add_subparsers(dest="chaos_command", metavar="CHAOS_COMMAND", required=True)
    run = sub.add_parser(
        "run", help="a seeded run: partitions, kills, pauses under load; prints the verdict"
    )
    command.add_run_arguments(run)
    run.set_defaults(handler=command.cmd_run)
    cleanup = sub.add_parser(
        "cleanup", help="remove the namespaces and processes a crashed chaos run left behind"
    )
    command.add_cleanup_arguments(cleanup)
    cleanup.set_defaults(handler=command.cmd_cleanup)
