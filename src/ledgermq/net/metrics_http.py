"""A server's Prometheus ``/metrics`` endpoint: its own registry, with the process figures.

Every LedgerMQ server that serves ``/metrics`` (a broker replica, a ledger replica, the
NameServer, the standalone proxy, the console) makes one ``MetricsEndpoint``: a registry of its
own (not the process-global one, so tests can run several servers in one process) that already
holds prometheus-client's process collectors (``process_resident_memory_bytes``,
``process_cpu_seconds_total``, ``process_open_fds``, ... and ``python_info``), so every scrape
answers "is it the process that is short of memory, CPU or file descriptors" without a node
exporter. The HTTP server is prometheus-client's own threaded one: a scrape never runs on the
event loop that serves clients or drives Raft.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from ledgermq.errors import NetworkError
from ledgermq.net.os_errors import describe_os_error, format_address

if TYPE_CHECKING:
    from threading import Thread
    from wsgiref.simple_server import WSGIServer

__all__ = ["MetricsEndpoint", "process_registry"]


def process_registry() -> CollectorRegistry:
    """A new registry holding the process collectors (RSS, CPU, fds, start time) and the
    platform one (``python_info``)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


class MetricsEndpoint:
    """One server's registry and, once ``serve`` is called, its ``/metrics`` HTTP endpoint."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else process_registry()
        self.port: int | None = None
        """The port ``/metrics`` is served on; None until ``serve``."""
        self.host = ""
        self._server: WSGIServer | None = None
        self._thread: Thread | None = None

    def serve(self, host: str, port: int) -> int:
        """Start serving ``/metrics`` on ``host:port`` (0: any free port); returns the port.

        A port that cannot be bound raises ``NetworkError`` naming the address, as the other
        ports' listeners do, so commands can say which flag moves it."""
        try:
            self._server, self._thread = start_http_server(port, host, registry=self.registry)
        except OSError as exc:
            address = format_address(host, port)
            raise NetworkError(
                f"cannot serve /metrics on {address}: {describe_os_error(exc)}", address
            ) from exc
        self.host = host
        self.port = int(self._server.server_port)
        return self.port

    @property
    def url(self) -> str:
        """``http://HOST:PORT/metrics`` once served, else empty."""
        if self.port is None:
            return ""
        return f"http://{format_address(self.host, self.port)}/metrics"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
