"""A ledger group over TLS (issue 17): replicas on real sockets, mutual TLS between them.

The group is configured the way an operator would, with RocketMQ's ``tls.*`` keys through
``build_config``: enforcing mode, client certificates required, and no ``tls.client.*`` keys at
all (a replica dials its peers with its own certificate, ``replica_tls``).
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import free_ports
from ledgermq.errors import ConfigError, LedgerRequestError
from ledgermq.ledger.client import AsyncLedgerClient
from ledgermq.ledger.config import build_config, replica_tls
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import TlsClientConfig, TlsMode
from tests.ledger.test_server_inprocess import _leader

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.testing.tls_certs import CertificateSet

pytestmark = pytest.mark.timeout(60)


def tls_settings(certs: CertificateSet) -> dict[str, str]:
    return {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.trustCertPath": str(certs.ca),
        "tls.server.need.client.auth": "require",
    }


def test_replica_tls_dials_peers_with_the_replicas_own_certificate(
    tls_certificates: CertificateSet,
) -> None:
    server, client = replica_tls(tls_settings(tls_certificates))
    assert server.mode is TlsMode.ENFORCING
    assert client == TlsClientConfig(
        trust_cert_path=str(tls_certificates.ca),
        cert_path=str(tls_certificates.server_cert),
        key_path=str(tls_certificates.server_key),
    )
    # permissive: peers stay plain unless tls.enable says otherwise
    permissive = {**tls_settings(tls_certificates), "tls.server.mode": "permissive"}
    assert replica_tls(permissive)[1] is None
    assert replica_tls({**permissive, "tls.enable": "true"})[1] == client
    # explicit client keys win over the lent ones
    own = {
        **permissive,
        "tls.enable": "true",
        "tls.client.certPath": str(tls_certificates.client_cert),
        "tls.client.keyPath": str(tls_certificates.client_key),
    }
    explicit = replica_tls(own)[1]
    assert explicit is not None
    assert explicit.cert_path == str(tls_certificates.client_cert)


def test_bad_tls_settings_in_a_ledger_config_are_refused(tmp_path: Path) -> None:
    base = {"group": "g", "selfId": "n0", "peers": "n0-127.0.0.1:1", "storeBaseDir": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"tls\.server\.mode must be"):
        build_config({**base, "tls.server.mode": "on"})
    with pytest.raises(ConfigError, match=r"needs tls\.server\.certPath"):
        build_config({**base, "tls.server.mode": "enforcing"})
    with pytest.raises(ConfigError, match="unknown setting"):
        build_config({**base, "tls.server.modes": "enforcing"})


def test_a_group_over_mutual_tls_elects_and_commits_and_refuses_others(
    tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    certs = tls_certificates
    ports = free_ports(3)
    peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))

    async def main() -> None:
        servers: dict[str, LedgerServer] = {}
        for i in range(3):
            config = build_config(
                {
                    "group": "g",
                    "selfId": f"n{i}",
                    "peers": peers,
                    "storeBaseDir": os.fspath(tmp_path),
                    "dataFileSize": str(1 << 20),
                    **tls_settings(certs),
                }
            )
            servers[config.self_id] = LedgerServer(config)
        member = AsyncLedgerClient(
            "g",
            peers,
            tls=TlsClientConfig(
                trust_cert_path=str(certs.ca),
                cert_path=str(certs.client_cert),
                key_path=str(certs.client_key),
            ),
        )
        plain = AsyncLedgerClient("g", peers, retry_timeout_s=1)
        uncertified = AsyncLedgerClient(
            "g", peers, retry_timeout_s=1, tls=TlsClientConfig(trust_cert_path=str(certs.ca))
        )
        try:
            for server in servers.values():
                await server.start()
            leader = await _leader(servers)
            index = await member.append(b"over tls")
            assert (await member.get(index)).body == b"over tls"
            with pytest.raises(LedgerRequestError, match="accepts only TLS"):
                await plain.append(b"plain")
            with pytest.raises(LedgerRequestError, match="requires a client certificate"):
                await uncertified.append(b"no certificate")
            assert leader.store.end_index == index  # nothing else was stored
        finally:
            for client in (member, plain, uncertified):
                await client.close()
            for server in servers.values():
                await server.close()

    asyncio.run(asyncio.wait_for(main(), 45))
