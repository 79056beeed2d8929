"""``ledgermq namesrv``: run a NameServer until SIGTERM or SIGINT.

Settings come from a RocketMQ-style ``namesrv.conf`` (``-c``; keys ``listenPort``,
``listenHost``/``bindAddress``, ``scanNotActiveBrokerInterval``, ``brokerTimeoutMillis``) with
the flags on top. Once listening it prints ``NameServer listening on HOST:PORT`` on stdout, with
the real port when ``--listen HOST:0`` asked for any free one, so scripts and tests can read it;
with ``--metrics-listen HOST:PORT`` (``metricsHost`` / ``metricsPort``; the older
``--metrics-port`` still works) it serves Prometheus ``/metrics`` (the process figures) and the
line ends ``(metrics http://HOST:PORT/metrics)``.
"""

from __future__ import annotations

import argparse

from ledgermq.cli.serving import address_in_use, wait_for_stop
from ledgermq.errors import LedgerMQError, NetworkError
from ledgermq.ledger.config import load_properties
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import run


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    namesrv = commands.add_parser("namesrv", help="run a NameServer (until SIGTERM)")
    namesrv.add_argument("--config", "-c", help="namesrv.conf file of key=value settings")
    namesrv.add_argument(
        "--listen",
        type=_host_port,
        metavar="HOST:PORT",
        help="where to listen, as console and proxy take it (default 127.0.0.1:9876; port 0: "
        "any free port; HOST alone keeps the port, :PORT alone keeps the host)",
    )
    namesrv.add_argument(
        "--metrics-listen",
        type=_host_port,
        metavar="HOST:PORT",
        help="also serve Prometheus /metrics (process memory, CPU, fds) there, as console and "
        "proxy take it (metricsHost / metricsPort; default: not served; HOST defaults to "
        "127.0.0.1; port 0: any free one)",
    )
    # The older spellings, kept working (scripts use them) but not shown.
    namesrv.add_argument("--listen-port", type=int, help=argparse.SUPPRESS)
    namesrv.add_argument("--listen-host", help=argparse.SUPPRESS)
    namesrv.add_argument("--metrics-port", type=int, help=argparse.SUPPRESS)
    namesrv.set_defaults(handler=cmd_namesrv)


def _host_port(text: str) -> tuple[str | None, int | None]:
    """``HOST:PORT``, ``HOST`` or ``:PORT`` (argparse type); ``[v6]:PORT`` for IPv6."""
    host, sep, port = text.rpartition(":") if not text.endswith("]") else ("", "", "")
    if not sep:
        host, port = text, ""
    try:
        number = int(port) if port else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT") from None
    if number is not None and not 0 <= number < 65536:
        raise argparse.ArgumentTypeError(f"port {number} is not between 0 and 65535")
    return host.strip("[]") or None, number


def namesrv_settings(args: argparse.Namespace) -> dict[str, str]:
    """The config file's settings with the flags on top, as ``namesrv.conf`` key names."""
    values = load_properties(args.config) if args.config else {}
    if args.listen is not None:
        host, port = args.listen
        args.listen_host = host if host is not None else args.listen_host
        args.listen_port = port if port is not None else args.listen_port
    if args.listen_port is not None:
        values["listenPort"] = str(args.listen_port)
    if args.listen_host is not None:
        values.pop("bindAddress", None)
        values["listenHost"] = args.listen_host
    if args.metrics_listen is not None:
        host, port = args.metrics_listen
        if host is not None:
            values["metricsHost"] = host
        args.metrics_port = port if port is not None else args.metrics_port
    if args.metrics_port is not None:
        values["metricsPort"] = str(args.metrics_port)
    return values


def cmd_namesrv(args: argparse.Namespace) -> int:
    config = NameServerConfig.from_properties(namesrv_settings(args))
    return run(_serve(config))


async def _serve(config: NameServerConfig) -> int:
    server = NameServer(config)
    try:
        await server.start()
    except NetworkError as exc:
        if not address_in_use(exc):
            raise
        flag = (
            "--metrics-listen HOST:PORT (metricsPort)"
            if "/metrics" in str(exc)
            else "--listen HOST:PORT (listenPort)"
        )
        raise LedgerMQError(
            f"{exc}; another process uses it: stop it, or choose another port with {flag}"
        ) from exc
    try:
        metrics = f" (metrics {server.metrics.url})" if server.metrics.url else ""
        print(f"NameServer listening on {config.listen_host}:{server.port}{metrics}", flush=True)
        await wait_for_stop()
    finally:
        await server.close()
    return 0
