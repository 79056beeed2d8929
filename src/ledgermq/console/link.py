"""The console's connection to a cluster: one ``Admin`` and, once a test message is sent, one
``Producer``, shared by every request the console serves.

Sharing them keeps the connection pool warm (a page is a few requests on open connections, not
a TCP and TLS handshake per request), and the producer is made only when first needed, so a
console that only looks joins no producer group.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from ledgermq.client import Admin, Producer

if TYPE_CHECKING:
    from ledgermq.client import Credentials, TlsClientConfig

__all__ = ["PRODUCER_GROUP", "ClusterLink"]

PRODUCER_GROUP: Final = "LEDGERMQ_CONSOLE_PRODUCER"
"""The producer group of test messages sent from the Topics page."""


class ClusterLink:
    """``Admin`` and a lazily started ``Producer`` for one cluster.

    Args:
        namesrv_addr: ``"host:port;host:port"``.
        credentials: sign every request with this ACL account (``aclEnable=true`` clusters).
        tls: dial the NameServers and brokers with TLS.
        request_timeout_s: one request's timeout: short, so a page of a cluster that does not
            answer fails in seconds with a clear error rather than hanging the browser.
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
        request_timeout_s: float = 3.0,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self._credentials = credentials
        self._tls = tls
        self._request_timeout_s = request_timeout_s
        self.admin = Admin(
            namesrv_addr,
            credentials=credentials,
            tls=tls,
            request_timeout_s=request_timeout_s,
            client_id="ledgermq-console",
        )
        self._producer: Producer | None = None
        self._producer_lock = asyncio.Lock()

    @property
    def credentials(self) -> Credentials | None:
        return self._credentials

    def signed_as(self, credentials: Credentials | None) -> ClusterLink:
        """A new link to the same cluster (same TLS, same timeouts) signing as ``credentials``
        (a signed-in operator's own), or not signing (None: the sign-in's probe)."""
        return ClusterLink(
            self.namesrv_addr,
            credentials=credentials,
            tls=self._tls,
            request_timeout_s=self._request_timeout_s,
        )

    async def start(self) -> None:
        """Connects to nothing yet: a console may start before its cluster does."""
        await self.admin.start()

    async def producer(self) -> Producer:
        """The shared producer, started on first use."""
        async with self._producer_lock:
            if self._producer is None:
                producer = Producer(
                    PRODUCER_GROUP,
                    self.namesrv_addr,
                    credentials=self._credentials,
                    tls=self._tls,
                    client_id="ledgermq-console",
                )
                await producer.start()
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None
        await self.admin.close()
