"""``ledgermq console -n NAMESRV [--listen 127.0.0.1:8080]``: the web console (issue 18).

It takes the NameServer list and the credential and TLS options of ``ledgermq admin``, prints
its URL and serves until Ctrl-C. With ACL on the brokers and no account given, each visitor
signs in with an admin account (``--acl``, ``ledgermq.console.access``). The console's web
stack is an extra: without it the command says which one to install, in one line.
``--metrics-listen HOST:PORT`` serves Prometheus ``/metrics`` (the process figures) on a port of
its own, off by default. ``--history-interval SECONDS`` sets how often the last hour's charts
are sampled (``ledgermq.console.history``).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Final

from ledgermq.cli.credentials_args import add_credential_args, credentials_from
from ledgermq.cli.metrics_args import add_metrics_listen_arg, start_metrics
from ledgermq.cli.serving import wait_for_stop
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.console import MISSING_EXTRA, console_available
from ledgermq.errors import ConfigError, LedgerMQError, NetworkError
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

__all__ = ["DEFAULT_LISTEN", "register"]

DEFAULT_LISTEN: Final = "127.0.0.1:8080"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "console", help="the web console: cluster, topics, consumer groups, messages"
    )
    parser.add_argument(
        "-n",
        "--namesrv-addr",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="NameServers, 'host:port;host:port' (default: $NAMESRV_ADDR or 127.0.0.1:9876)",
    )
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve the console (default: {DEFAULT_LISTEN}; port 0 picks a free "
        "one). Anyone who reaches it can administer the cluster: keep it on loopback or "
        "behind an authenticating proxy",
    )
    parser.add_argument(
        "--acl",
        choices=("auto", "on", "off"),
        default="auto",
        help="ask each visitor to sign in with an admin ACL account: 'auto' (default) when the "
        "brokers refuse unsigned requests and no account is given below, 'on' always, 'off' "
        "never",
    )
    parser.add_argument(
        "--history-interval",
        type=_history_interval,
        default=10.0,
        metavar="SECONDS",
        help="how often the console samples the brokers' put and get counters for the last "
        "hour's charts (default: 10; 1 to 3600)",
    )
    add_metrics_listen_arg(parser)
    add_credential_args(parser)
    add_tls_args(parser)
    parser.set_defaults(handler=cmd_console)


def _history_interval(text: str) -> float:
    """``--history-interval``: seconds, at least 1 (a sample asks every broker and topic)."""
    import argparse  # noqa: PLC0415 - only its error type, when a value is refused

    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 1.0 <= seconds <= 3600.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: give the seconds between samples, 1 to 3600")
    return seconds


def cmd_console(args: argparse.Namespace) -> int:
    if not console_available():
        raise ConfigError(MISSING_EXTRA)
    return run(_serve(args))


async def _serve(args: argparse.Namespace) -> int:
    from ledgermq.console.access import AclMode  # noqa: PLC0415 - needs the console extra
    from ledgermq.console.link import ClusterLink  # noqa: PLC0415
    from ledgermq.console.server import ConsoleServer, parse_listen  # noqa: PLC0415

    host, port = parse_listen(args.listen)
    link = ClusterLink(args.namesrv_addr, credentials=credentials_from(args), tls=tls_from(args))
    server = ConsoleServer(
        link, host, port, acl=AclMode(args.acl), history_interval_s=args.history_interval
    )
    try:
        await server.start()
    except NetworkError as exc:
        await link.close()
        raise LedgerMQError(f"{exc}; choose another address with --listen HOST:PORT") from exc
    metrics = None
    try:
        metrics = start_metrics(args.metrics_listen)
        print(f"LedgerMQ console: {server.url} (NameServer {args.namesrv_addr})", flush=True)
        if metrics is not None:
            print(f"Metrics: {metrics.url}", flush=True)
        if link.credentials is not None and args.acl != "on":
            print(
                f"No sign-in: every visitor acts as {link.credentials.access_key} (the account "
                "given to the console); keep it on loopback or behind an authenticating proxy.",
                flush=True,
            )
        elif args.acl != "off":
            print(
                "Visitors sign in with an admin account when the brokers enforce ACL.", flush=True
            )
        print("Serving until Ctrl-C.", flush=True)
        await wait_for_stop()
    finally:
        if metrics is not None:
            await asyncio.to_thread(metrics.close)  # joins its thread: not on the loop
        await server.close()
    return 0
