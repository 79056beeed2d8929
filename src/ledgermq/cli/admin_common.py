"""What every ``ledgermq admin`` command shares: ``--json``, one ``Admin`` per run, tables.

Kept apart from the commands so that command modules (``client_commands``,
``broker_config_commands``) stay small and import these without importing one another.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ledgermq.cli.credentials_args import credentials_from
from ledgermq.cli.tls_args import tls_from
from ledgermq.client import Admin
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["emit", "json_arg", "name_absent", "namesrv_arg", "table", "with_admin"]


DEFAULT_NAMESRV = "127.0.0.1:9876"


def namesrv_arg(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """``-n`` / ``--namesrv-addr``; ``inherited``: on a subcommand, so that it may be given
    before or after the subcommand's name (as credentials and ``--json`` may)."""
    parser.add_argument(
        "-n",
        "--namesrv-addr",
        default=argparse.SUPPRESS if inherited else os.environ.get("NAMESRV_ADDR", DEFAULT_NAMESRV),
        help=f"NameServers, 'host:port;host:port' (default: $NAMESRV_ADDR or {DEFAULT_NAMESRV})",
    )


def json_arg(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    """``--json``; ``inherited``: on a subcommand, where it must not reset the parent's value."""
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if inherited else False,
        help="print JSON instead of a table",
    )


async def with_admin(args: argparse.Namespace, work: Any) -> int:
    """Run ``await work(admin)`` with an ``Admin`` started on the command's NameServers,
    credentials and TLS, closed afterwards whatever happens."""
    admin = Admin(args.namesrv_addr, credentials=credentials_from(args), tls=tls_from(args))
    await admin.start()
    try:
        result: int = await work(admin)
        return result
    finally:
        await admin.close()


def emit(
    args: argparse.Namespace,
    header: tuple[str, ...],
    keys: tuple[str, ...],
    rows: list[tuple[object, ...]],
) -> None:
    """A table, or with ``--json`` a JSON list of objects with ``keys``."""
    if getattr(args, "json", False):
        print(json.dumps([dict(zip(keys, row, strict=True)) for row in rows], indent=2))
    else:
        table(header, rows)


def table(header: tuple[str, ...], rows: list[tuple[object, ...]], *, indent: str = "") -> None:
    """Columns padded to their widest cell, two spaces apart, each line after ``indent``."""
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


async def replicas_of(
    admin: Admin, cluster: str | None, broker: str | None
) -> dict[str, dict[int, str]]:
    """Broker group -> replica id -> address, from the NameServer: every group of ``cluster``
    (None: all), or only ``broker``, refused with the known names when it is not registered."""
    replicas = await admin.broker_addresses(cluster)
    if broker is None:
        return replicas
    if broker not in replicas:
        raise LedgerMQError(
            f"broker group {broker!r} is not registered; known: {', '.join(replicas) or 'none'}"
        )
    return {broker: replicas[broker]}


def name_absent(absent: Mapping[str, str], what: str) -> None:
    """On stderr, one line per broker group a command that spans groups left out, and why
    (``Admin``'s ``absent``): the answer on stdout covers the others only."""
    for name, why in sorted(absent.items()):
        print(f"broker group {name} is not in {what}: {why}", file=sys.stderr)
