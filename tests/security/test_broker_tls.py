"""A NameServer and a 3-replica broker group whose every port enforces TLS, as real processes:
the replicas elect and replicate over TLS, TLS clients send and read, a plain client is told
to use TLS (issue 17).

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Producer, PullConsumer, TlsClientConfig
from ledgermq.errors import LedgerMQError
from ledgermq.testing.child_process import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.testing.tls_certs import CertificateSet

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_a_cluster_with_tls_everywhere(
    broker_clusters: MakeCluster, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates
    server = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.trustCertPath": str(certs.ca),
        "tls.client.trustCertPath": str(certs.ca),
    }
    tls = TlsClientConfig(trust_cert_path=str(certs.ca))
    cluster = broker_clusters(replicas=3, extra_settings=server, namesrv_settings=server, tls=tls)
    cluster.wait_routable()
    master = cluster.wait_master("broker-a")  # elected over TLS links between the replicas
    ns = cluster.namesrv_addr

    async def main() -> None:
        producer = Producer("tls-producer", ns, tls=tls)
        plain = Producer("plain-producer", ns, retry_times=0, send_timeout_s=3)
        await producer.start()
        await plain.start()
        try:
            sent = [await producer.send("Secure", f"m{i}".encode()) for i in range(5)]
            with pytest.raises(LedgerMQError, match="TLS"):
                await plain.send("Secure", b"in clear")
        finally:
            await producer.shutdown()
            await plain.shutdown()
        reader = PullConsumer("tls-reader", ns, tls=tls)
        await reader.start()
        try:
            bodies = []
            for mq in await reader.fetch_queues("Secure"):
                bodies += [m.body for m in (await reader.pull(mq, 0, 32)).messages]
        finally:
            await reader.shutdown()
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(len(sent)))

    asyncio.run(main())

    def replicated() -> bool:  # every replica, over TLS, committed the same log
        info = cluster.runtime_info("broker-a")
        return len(info) == 3 and len({t.get("committedIndex") for t in info.values()}) == 1

    assert wait_until(replicated, 10), cluster.runtime_info("broker-a")
    assert master in cluster.runtime_info("broker-a")
