"""``--metrics-listen HOST:PORT`` of the servers whose port flag is ``--listen HOST:PORT`` (the
standalone proxy, the console): Prometheus ``/metrics`` with the process figures (memory, CPU,
file descriptors; ``net.metrics_http``), off unless asked for, on a port of its own so that a
scrape never needs the console's sign-in or the proxy's gRPC port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.errors import ConfigError, LedgerMQError, NetworkError
from ledgermq.net.metrics_http import MetricsEndpoint

if TYPE_CHECKING:
    import argparse

__all__ = ["FLAG", "add_metrics_listen_arg", "start_metrics"]

FLAG = "--metrics-listen"


def add_metrics_listen_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FLAG,
        metavar="HOST:PORT",
        help="also serve Prometheus /metrics (process memory, CPU, file descriptors) there; "
        "port 0: any free one (default: not served). It has no access control: keep it on "
        "loopback or where only Prometheus reaches it",
    )


def start_metrics(listen: str | None) -> MetricsEndpoint | None:
    """Serve ``/metrics`` on ``listen`` (``HOST:PORT``); None when not asked for. A malformed
    address is a ``ConfigError``, a taken port a ``LedgerMQError`` naming the flag."""
    if listen is None:
        return None
    host, sep, text = listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 <= port <= 65535:
        raise ConfigError(f"{FLAG} {listen!r} is not HOST:PORT (port 0..65535)")
    endpoint = MetricsEndpoint()
    try:
        endpoint.serve(host, port)
    except NetworkError as exc:
        raise LedgerMQError(f"{exc}; choose another address with {FLAG} HOST:PORT") from exc
    return endpoint
