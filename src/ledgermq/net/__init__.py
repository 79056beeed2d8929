"""asyncio transport: framed connections with request ids, TCP and in-memory networks, peer links.

Imports only ``wire`` and ``errors`` (DESIGN.md). The one place that turns OS errors into ours is
``map_os_error``.
"""

from ledgermq.net.connection import Connection, Handler
from ledgermq.net.loop import run, uvloop_available
from ledgermq.net.memory import MemoryNetwork
from ledgermq.net.network import Listener, Network
from ledgermq.net.os_errors import map_os_error
from ledgermq.net.peer import PeerLink
from ledgermq.net.pool import ConnectionPool, split_address
from ledgermq.net.tcp import TcpNetwork
from ledgermq.net.tls import (
    ClientAuth,
    TlsClientConfig,
    TlsMode,
    TlsServerConfig,
    tls_client_from_properties,
    tls_server_from_properties,
)

__all__ = [
    "ClientAuth",
    "Connection",
    "ConnectionPool",
    "Handler",
    "Listener",
    "MemoryNetwork",
    "Network",
    "PeerLink",
    "TcpNetwork",
    "TlsClientConfig",
    "TlsMode",
    "TlsServerConfig",
    "map_os_error",
    "run",
    "split_address",
    "tls_client_from_properties",
    "tls_server_from_properties",
    "uvloop_available",
]
