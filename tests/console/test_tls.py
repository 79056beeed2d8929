"""The console against a TLS-only NameServer (issue 17's options on ``ledgermq console``):
with the CA it shows the cluster, without TLS the page says the server refused plain TCP."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("uvicorn", reason="the console extra is not installed")

from ledgermq.cli.main import build_parser
from ledgermq.cli.tls_args import tls_from
from ledgermq.client import TlsClientConfig
from ledgermq.console.link import ClusterLink
from ledgermq.console.server import ConsoleServer
from ledgermq.namesrv import NameServer, NameServerConfig
from tests.console.test_server import fetch
from tests.namesrv.test_tls import tls_conf

if TYPE_CHECKING:
    from ledgermq.testing.tls_certs import CertificateSet

pytestmark = pytest.mark.timeout(60)


def test_the_console_takes_the_credential_and_tls_options() -> None:
    args = build_parser().parse_args(
        ["console", "-n", "h:9876", "--listen", "0.0.0.0:9000", "--tls-ca", "ca.pem",
         "--access-key", "ak", "--secret-key", "sk"]
    )  # fmt: skip
    assert isinstance(args, argparse.Namespace)
    assert (args.namesrv_addr, args.listen, args.access_key) == ("h:9876", "0.0.0.0:9000", "ak")
    tls = tls_from(args)
    assert tls is not None
    assert tls.trust_cert_path == "ca.pem"


def test_a_tls_only_namesrv_with_and_without_tls(tls_certificates: CertificateSet) -> None:
    async def main() -> None:
        namesrv = NameServer(NameServerConfig.from_properties(tls_conf(tls_certificates)))
        await namesrv.start()
        address = f"127.0.0.1:{namesrv.port}"
        secured = ConsoleServer(
            ClusterLink(address, tls=TlsClientConfig(trust_cert_path=str(tls_certificates.ca))),
            port=0,
        )
        plain = ConsoleServer(ClusterLink(address), port=0)
        await secured.start()
        await plain.start()
        try:
            status, page, _ = await asyncio.to_thread(fetch, secured.url + "topics")
            assert status == 200
            assert "No topic yet" in page
            status, page, _ = await asyncio.to_thread(fetch, plain.url + "topics")
            assert status == 502
            assert "The cluster answered with an error" in page
            assert "accepts only TLS" in page
            assert "Traceback" not in page
        finally:
            await secured.close()
            await plain.close()
            await namesrv.close()

    asyncio.run(main())
