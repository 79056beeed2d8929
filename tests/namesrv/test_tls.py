"""A NameServer over TLS (issue 17): ``tls.*`` keys in namesrv.conf, our clients and the CLI.

In-process first (the ``Admin`` client with ``tls=``), then a real ``ledgermq namesrv -c``
process asked by ``ledgermq admin --tls-ca ...`` (the CLI runs uvloop when it is installed).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.main import main
from ledgermq.client import Admin, TlsClientConfig
from ledgermq.errors import ConfigError, LedgerMQError, MQResponseError
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import ClientAuth, TlsMode
from ledgermq.wire import MQResponseCode
from tests.namesrv.test_cli import SRC, read_line

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.testing.tls_certs import CertificateSet

pytestmark = pytest.mark.timeout(30)


def tls_conf(certs: CertificateSet, mode: str = "enforcing", auth: str = "none") -> dict[str, str]:
    return {
        "listenPort": "0",
        "tls.server.mode": mode,
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.trustCertPath": str(certs.ca),
        "tls.server.need.client.auth": auth,
        # a shared tls.properties also holds the client side: accepted, unused here
        "tls.enable": "true",
        "tls.client.trustCertPath": str(certs.ca),
    }


def test_namesrv_conf_takes_rocketmq_tls_keys(tls_certificates: CertificateSet) -> None:
    config = NameServerConfig.from_properties(tls_conf(tls_certificates, "permissive", "optional"))
    assert config.tls.mode is TlsMode.PERMISSIVE
    assert config.tls.need_client_auth is ClientAuth.OPTIONAL
    assert NameServerConfig().tls.mode is TlsMode.DISABLED
    with pytest.raises(ConfigError, match=r"tls\.server\.mode=enforcing needs"):
        NameServerConfig.from_properties({"tls.server.mode": "enforcing"})


def test_admin_over_mutual_tls_and_the_errors_of_the_others(
    tls_certificates: CertificateSet,
) -> None:
    certs = tls_certificates

    async def main_() -> None:
        server = NameServer(NameServerConfig.from_properties(tls_conf(certs, auth="require")))
        await server.start()
        address = f"127.0.0.1:{server.port}"
        mutual = TlsClientConfig(
            trust_cert_path=str(certs.ca),
            cert_path=str(certs.client_cert),
            key_path=str(certs.client_key),
        )
        try:
            async with Admin(address, tls=mutual) as admin:
                assert await admin.topic_list() == []
            async with Admin(address) as plain:
                with pytest.raises(MQResponseError, match="accepts only TLS") as refused:
                    await plain.topic_list()
                assert refused.value.code == MQResponseCode.NO_PERMISSION
                assert not refused.value.retriable
            no_cert = TlsClientConfig(trust_cert_path=str(certs.ca))
            async with Admin(address, tls=no_cert) as uncertified:
                with pytest.raises(MQResponseError, match="requires a client certificate"):
                    await uncertified.topic_list()
            wrong_ca = TlsClientConfig(
                trust_cert_path=str(certs.other_ca),
                cert_path=str(certs.client_cert),
                key_path=str(certs.client_key),
            )
            async with Admin(address, tls=wrong_ca, request_timeout_s=2) as fooled:
                with pytest.raises(LedgerMQError, match="certificate was refused"):
                    await fooled.topic_list()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main_(), 25))


def test_namesrv_process_with_tls_and_the_admin_cli(
    tmp_path: Path, tls_certificates: CertificateSet, capsys: pytest.CaptureFixture[str]
) -> None:
    certs = tls_certificates
    conf = tmp_path / "namesrv.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in tls_conf(certs).items()))
    process = subprocess.Popen(
        [sys.executable, "-m", "ledgermq", "namesrv", "-c", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    try:
        line = read_line(process.stdout, timeout_s=10)
        match = re.fullmatch(r"NameServer listening on 127\.0\.0\.1:(\d+)\n", line)
        assert match, line
        address = f"127.0.0.1:{match.group(1)}"
        # the TLS options go before or after the admin subcommand
        assert main(["admin", "-n", address, "--tls-ca", str(certs.ca), "topic-list"]) == 0
        assert main(["admin", "-n", address, "topic-list", "--tls-ca", str(certs.ca)]) == 0
        capsys.readouterr()
        assert main(["admin", "-n", address, "topic-list"]) != 0
        err = capsys.readouterr().err
        assert "accepts only TLS" in err
        assert err.count("\n") == 1
        wrong = ["admin", "-n", address, "topic-list", "--tls-ca", str(certs.other_ca)]
        assert main(wrong) != 0
        assert "--tls-ca" in capsys.readouterr().err
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_tls_cli_options_need_cert_and_key_together(
    capsys: pytest.CaptureFixture[str], tls_certificates: CertificateSet
) -> None:
    cert = str(tls_certificates.client_cert)
    assert main(["admin", "-n", "127.0.0.1:1", "topic-list", "--tls-cert", cert]) != 0
    assert "--tls-cert needs --tls-key" in capsys.readouterr().err
