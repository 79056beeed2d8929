"""TLS on ``TcpNetwork`` (issue 17): RocketMQ's modes, mutual TLS, and the errors a user reads.

Certificates are made at test time (``tls_certificates``, tests/conftest.py). Every server runs
on asyncio and on uvloop where the path differs (the accept loop and the first-byte peek).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

import pytest
import uvloop

from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError, ConnectError, NetworkError
from ledgermq.net import (
    ClientAuth,
    TcpNetwork,
    TlsClientConfig,
    TlsMode,
    TlsServerConfig,
    tls_client_from_properties,
    tls_server_from_properties,
)
from ledgermq.wire import MQResponseCode
from ledgermq.wire.http2 import HTTP2_CLIENT_PREFACE

from .conftest import HOST, echo, ignore, request

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ledgermq.net.tcp import TcpListener, TlsListener
    from ledgermq.testing.tls_certs import CertificateSet

pytestmark = pytest.mark.timeout(30)

OK = 0


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a coroutine, bounded, on a fresh asyncio or uvloop loop."""

    def runner(main: Coroutine[Any, Any, Any]) -> Any:
        bounded = asyncio.wait_for(main, 10)
        return asyncio.run(bounded) if request.param == "asyncio" else uvloop.run(bounded)

    return runner


def server_config(
    certs: CertificateSet, mode: str, auth: str = "none", **extra: Any
) -> TlsServerConfig:
    settings: dict[str, Any] = {
        "mode": TlsMode(mode),
        "cert_path": str(certs.server_cert),
        "key_path": str(certs.server_key),
        "trust_cert_path": str(certs.ca),
        "need_client_auth": ClientAuth(auth),
    }
    return TlsServerConfig(**(settings | extra))


def client(certs: CertificateSet, *, with_cert: bool = False, ca: str | None = None) -> TcpNetwork:
    return TcpNetwork(
        tls_client=TlsClientConfig(
            trust_cert_path=ca or str(certs.ca),
            cert_path=str(certs.client_cert) if with_cert else None,
            key_path=str(certs.client_key) if with_cert else None,
        )
    )


async def ask(network: TcpNetwork, port: int, body: bytes = b"hello") -> tuple[int, bytes, str]:
    """One request over a new connection: (code, body, remark) of the answer."""
    conn = await network.connect(HOST, port, ignore, timeout_s=3)
    try:
        answer = await conn.request(request(body=body), timeout_s=3)
    finally:
        conn.close()
        await conn.wait_closed()
    return answer.code, answer.body, answer.remark or ""


async def serving(network: TcpNetwork, **kwargs: Any) -> TcpListener | TlsListener:
    return await network.serve(HOST, 0, echo, **kwargs)


# ---------------------------------------------------------------------- modes


def test_enforcing_serves_tls_and_refuses_plain_with_an_answer_that_says_why(
    tls_certificates: CertificateSet, run: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> tuple[Any, Any, int]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing"))
        )
        try:
            tls = await ask(client(tls_certificates), listener.port)
            plain = await ask(TcpNetwork(), listener.port)
            return tls, plain, getattr(listener, "refused_plain", -1)
        finally:
            listener.close()
            await listener.wait_closed()

    with caplog.at_level(logging.WARNING, logger="ledgermq"):
        tls, plain, refused = run(main())
    assert tls == (OK, b"hello", "")
    code, body, remark = plain
    assert code == MQResponseCode.NO_PERMISSION
    assert body == b""
    assert "accepts only TLS" in remark
    assert "--tls" in remark
    assert refused == 1
    assert any("tls.server.mode=enforcing" in r.getMessage() for r in caplog.records)


def test_permissive_serves_plain_and_tls_on_one_port(
    tls_certificates: CertificateSet, run: Callable[..., Any]
) -> None:
    async def main() -> list[tuple[int, bytes, str]]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "permissive"))
        )
        try:
            # interleaved, and concurrently: each connection is judged on its own first byte
            return list(
                await asyncio.gather(
                    ask(TcpNetwork(), listener.port, b"plain-1"),
                    ask(client(tls_certificates), listener.port, b"tls-1"),
                    ask(TcpNetwork(), listener.port, b"plain-2"),
                    ask(client(tls_certificates, with_cert=True), listener.port, b"tls-2"),
                )
            )
        finally:
            listener.close()
            await listener.wait_closed()

    answers = run(main())
    assert [(code, body) for code, body, _ in answers] == [
        (OK, b"plain-1"),
        (OK, b"tls-1"),
        (OK, b"plain-2"),
        (OK, b"tls-2"),
    ]


def test_disabled_mode_is_the_plain_listener(tls_certificates: CertificateSet) -> None:
    network = TcpNetwork(tls_server=TlsServerConfig(mode=TlsMode.DISABLED))
    assert network.tls_server is None  # serve() takes the untouched create_server path

    async def main() -> str:
        listener = await serving(network)
        try:
            assert type(listener).__name__ == "TcpListener"
            with pytest.raises(ConnectError) as caught:
                await ask(client(tls_certificates), listener.port)
            return str(caught.value)
        finally:
            listener.close()
            await listener.wait_closed()

    message = asyncio.run(asyncio.wait_for(main(), 10))
    assert "TLS" in message
    assert "tls.server.mode" in message


def test_large_frames_cross_tls_in_both_directions(
    tls_certificates: CertificateSet, run: Callable[..., Any]
) -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: many TLS records, writelines path

    async def main() -> tuple[int, bytes, str]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing"))
        )
        try:
            return await ask(client(tls_certificates), listener.port, body)
        finally:
            listener.close()
            await listener.wait_closed()

    code, echoed, _ = run(main())
    assert code == OK
    assert echoed == body


def test_a_grpc_client_on_a_permissive_port_still_gets_the_grpc_line(
    tls_certificates: CertificateSet, caplog: pytest.LogCaptureFixture
) -> None:
    def read_to_eof(port: int) -> bytes:
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(HTTP2_CLIENT_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            return sock.recv(4096)

    async def main() -> bytes:
        listener = await TcpNetwork(tls_server=server_config(tls_certificates, "permissive")).serve(
            HOST, 0, echo, grpc_port=8081
        )
        try:
            return await asyncio.to_thread(read_to_eof, listener.port)
        finally:
            listener.close()
            await listener.wait_closed()

    with caplog.at_level(logging.WARNING, logger="ledgermq"):
        assert asyncio.run(asyncio.wait_for(main(), 10)) == b""
    assert any("gRPC is served on port 8081" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------- mutual TLS


def test_require_client_auth_refuses_a_client_without_a_certificate(
    tls_certificates: CertificateSet, run: Callable[..., Any]
) -> None:
    async def main() -> tuple[Any, Any]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing", "require"))
        )
        try:
            without = await ask(client(tls_certificates), listener.port)
            with_cert = await ask(client(tls_certificates, with_cert=True), listener.port)
            return without, with_cert
        finally:
            listener.close()
            await listener.wait_closed()

    without, with_cert = run(main())
    code, _, remark = without
    assert code == MQResponseCode.NO_PERMISSION
    assert "requires a client certificate" in remark
    assert "--tls-cert" in remark
    assert with_cert == (OK, b"hello", "")


def test_require_client_auth_refuses_a_certificate_from_another_ca(
    tls_certificates: CertificateSet, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A client certificate the server's CAs did not sign fails the handshake itself, and the
    server's log says it was the client's certificate, with the server's setting to look at
    (issue 25 item 15: it said "the server's certificate was refused" and gave client advice)."""
    certs = tls_certificates

    async def main() -> None:
        server = TcpNetwork(
            tls_server=TlsServerConfig(
                mode=TlsMode.ENFORCING,
                cert_path=str(certs.server_cert),
                key_path=str(certs.server_key),
                trust_cert_path=str(certs.other_ca),  # trusts only a CA that signed nothing
                need_client_auth=ClientAuth.REQUIRE,
            )
        )
        listener = await serving(server)
        try:
            with pytest.raises(NetworkError):
                await ask(client(certs, with_cert=True), listener.port)
        finally:
            listener.close()
            await listener.wait_closed()
        assert getattr(listener, "failed_handshakes", 0) == 1

    with caplog.at_level(logging.WARNING, logger="ledgermq.net"):
        asyncio.run(asyncio.wait_for(main(), 10))
    (line,) = [r.getMessage() for r in caplog.records if "TLS handshake" in r.getMessage()]
    assert "the client's certificate was refused" in line, line
    assert "tls.server.trustCertPath" in line, line
    assert "server's certificate" not in line, line
    assert "--tls-ca" not in line, line


def test_optional_client_auth_serves_clients_with_and_without_a_certificate(
    tls_certificates: CertificateSet,
) -> None:
    async def main() -> list[tuple[int, bytes, str]]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing", "optional"))
        )
        try:
            return [
                await ask(client(tls_certificates), listener.port),
                await ask(client(tls_certificates, with_cert=True), listener.port),
            ]
        finally:
            listener.close()
            await listener.wait_closed()

    assert asyncio.run(asyncio.wait_for(main(), 10)) == [(OK, b"hello", "")] * 2


# ---------------------------------------------------------------------- the client's checks


def test_a_server_signed_by_an_untrusted_ca_fails_with_a_clear_error(
    tls_certificates: CertificateSet, run: Callable[..., Any]
) -> None:
    async def main() -> str:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing"))
        )
        try:
            with pytest.raises(ConnectError) as caught:
                await ask(
                    client(tls_certificates, ca=str(tls_certificates.other_ca)), listener.port
                )
            return str(caught.value)
        finally:
            listener.close()
            await listener.wait_closed()

    message = run(main())
    assert message.startswith(f"cannot connect to {HOST}:")
    assert "server's certificate was refused" in message
    assert "--tls-ca" in message


def test_client_test_mode_and_auth_server_false_verify_nothing(
    tls_certificates: CertificateSet,
) -> None:
    wrong_ca = str(tls_certificates.other_ca)

    async def main() -> list[tuple[int, bytes, str]]:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "enforcing"))
        )
        try:
            return [
                await ask(TcpNetwork(tls_client=settings), listener.port)
                for settings in (
                    TlsClientConfig(trust_cert_path=wrong_ca, test_mode=True),
                    TlsClientConfig(trust_cert_path=wrong_ca, auth_server=False),
                )
            ]
        finally:
            listener.close()
            await listener.wait_closed()

    assert asyncio.run(asyncio.wait_for(main(), 10)) == [(OK, b"hello", "")] * 2


def test_closing_a_tls_listener_closes_silent_and_served_connections(
    tls_certificates: CertificateSet, run: Callable[..., Any]
) -> None:
    async def main() -> None:
        listener = await serving(
            TcpNetwork(tls_server=server_config(tls_certificates, "permissive"))
        )
        silent = socket.create_connection((HOST, listener.port))  # never says a byte
        conn = await client(tls_certificates).connect(HOST, listener.port, ignore, timeout_s=3)
        assert (await conn.request(request(body=b"x"), timeout_s=3)).code == OK
        listener.close()
        await listener.wait_closed()
        await conn.wait_closed()
        silent.close()
        with pytest.raises(ConnectError):
            await TcpNetwork().connect(HOST, listener.port, ignore, timeout_s=1)

    run(main())


# ---------------------------------------------------------------------- settings


def test_properties_use_rocketmq_names(tls_certificates: CertificateSet) -> None:
    certs = tls_certificates
    values = {
        "tls.server.mode": "Enforcing",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.encrypted_server_key),
        "tls.server.keyPassword": certs.key_password,
        "tls.server.trustCertPath": str(certs.ca),
        "tls.server.need.client.auth": "require",
        "tls.server.authClient": "true",
        "tls.enable": "true",
        "tls.client.trustCertPath": str(certs.ca),
        "tls.client.certPath": str(certs.client_cert),
        "tls.client.keyPath": str(certs.client_key),
        "tls.client.authServer": "true",
    }
    server = tls_server_from_properties(values)
    assert server.mode is TlsMode.ENFORCING
    assert server.need_client_auth is ClientAuth.REQUIRE
    assert certs.key_password not in repr(server)
    server.server_context()  # the encrypted key opens with its password
    tls_client = tls_client_from_properties(values)
    assert tls_client is not None
    assert tls_client.verifies_server
    tls_client.client_context()
    assert tls_client_from_properties({}) is None
    assert tls_client_from_properties({}, default_enable=True) == TlsClientConfig()
    assert tls_server_from_properties({}).mode is TlsMode.DISABLED


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"tls.server.mode": "strict"},
            "tls.server.mode must be disabled | permissive | enforcing",
        ),
        ({"tls.server.mode": "enforcing"}, "needs tls.server.certPath and tls.server.keyPath"),
        (
            {
                "tls.server.mode": "permissive",
                "tls.server.certPath": "c.pem",
                "tls.server.keyPath": "k.pem",
                "tls.server.need.client.auth": "require",
            },
            "needs tls.server.trustCertPath",
        ),
        ({"tls.server.need.client.auth": "always"}, "none | optional | require"),
        ({"tls.test.mode.enable": "yes"}, "tls.test.mode.enable must be true or false"),
    ],
)
def test_bad_server_settings_say_which_key(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("|", r"\|")):
        tls_server_from_properties(values)


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(ConfigError, match=r"tls\.client\.certPath is set but tls\.client\.keyPath"):
        tls_client_from_properties({"tls.enable": "true", "tls.client.certPath": "c.pem"})


def test_unusable_files_are_config_errors_naming_key_and_path(
    tls_certificates: CertificateSet, tmp_path: Any
) -> None:
    certs = tls_certificates
    missing = str(tmp_path / "missing.pem")
    cases: list[tuple[Callable[[], object], str]] = [
        (
            lambda: server_config(certs, "enforcing", cert_path=missing).server_context(),
            f"tls.server.certPath: cannot read {missing}: No such file or directory",
        ),
        (
            lambda: TlsServerConfig(
                TlsMode.ENFORCING, str(certs.server_cert), str(certs.encrypted_server_key)
            ).server_context(),
            "is encrypted: set tls.server.keyPassword",
        ),
        (
            lambda: TlsServerConfig(
                TlsMode.ENFORCING,
                str(certs.server_cert),
                str(certs.encrypted_server_key),
                key_password="wrong",
            ).server_context(),
            "or tls.server.keyPassword is wrong",
        ),
        (
            lambda: TlsServerConfig(
                TlsMode.ENFORCING, str(certs.server_key), str(certs.server_key)
            ).server_context(),
            "are not a PEM certificate and its private key",
        ),
        (
            lambda: TlsClientConfig(trust_cert_path=str(certs.client_key)).client_context(),
            "tls.client.trustCertPath: .* holds no PEM CA certificate",
        ),
        (
            lambda: TcpNetwork(tls_client=TlsClientConfig(trust_cert_path=missing)),
            "tls.client.trustCertPath: cannot read",
        ),
    ]
    for build, message in cases:
        with pytest.raises(ConfigError, match=message):
            build()


def test_server_test_mode_asks_no_client_certificate(tls_certificates: CertificateSet) -> None:
    config = server_config(tls_certificates, "enforcing", "require", test_mode=True)
    assert config.client_auth is ClientAuth.NONE
    assert config.server_context().verify_mode.name == "CERT_NONE"


def test_tls_config_file_supplies_and_overrides_settings(
    tls_certificates: CertificateSet, tmp_path: Any
) -> None:
    certs = tls_certificates
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(
        "# RocketMQ's /etc/rocketmq/tls.properties\n"
        f"tls.server.certPath={certs.server_cert}\n"
        f"tls.server.keyPath={certs.server_key}\n"
        "tls.server.need.client.auth=optional\n"
        f"tls.server.trustCertPath={certs.ca}\n"
        f"tls.client.trustCertPath={certs.ca}\n"
    )
    values = {
        "tls.server.mode": "enforcing",
        "tls.server.need.client.auth": "none",  # the file wins, as in RocketMQ
        "tls.enable": "true",
        "tls.config.file": str(tls_file),
    }
    server = tls_server_from_properties(values)
    assert server.mode is TlsMode.ENFORCING
    assert server.cert_path == str(certs.server_cert)
    assert server.need_client_auth is ClientAuth.OPTIONAL
    tls_client = tls_client_from_properties(values)
    assert tls_client is not None
    assert tls_client.trust_cert_path == str(certs.ca)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tls.server.mode=enforcing\n", r"tls\.server\.mode is not read from tls\.config\.file"),
        ("tls.server.colour=blue\n", r"tls\.server\.colour is not a TLS setting"),
        ("just words\n", "expected key=value"),
    ],
)
def test_bad_tls_config_files_say_which_line(tmp_path: Any, content: str, message: str) -> None:
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(content)
    with pytest.raises(ConfigError, match=message):
        tls_server_from_properties({"tls.config.file": str(tls_file)})
    with pytest.raises(ConfigError, match=r"tls\.config\.file: cannot read"):
        tls_server_from_properties({"tls.config.file": str(tmp_path / "missing")})


# ---------------------------------------------------------------------- the server's certificate


@pytest.mark.parametrize(
    ("shift_days", "expected"), [(30, "expired on "), (-30, "is not valid yet (valid from ")]
)
def test_an_out_of_date_server_certificate_is_one_warning_naming_the_file_and_dates(
    tls_certificates: CertificateSet,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    shift_days: int,
    expected: str,
) -> None:
    """Issue 25 item 16: a server started with an expired or not-yet-valid certificate without a
    word. It starts (clients that verify refuse it), with one WARNING per certificate."""
    certs = tls_certificates
    decoded = ssl._ssl._test_decode_cert(str(certs.server_cert))  # type: ignore[attr-defined]
    not_before = ssl.cert_time_to_seconds(decoded["notBefore"])
    not_after = ssl.cert_time_to_seconds(decoded["notAfter"])
    now_s = (not_after if shift_days > 0 else not_before) + shift_days * 86400
    monkeypatch.setattr(SystemClock, "wall_time_s", lambda self: float(now_s))
    config = server_config(certs, "enforcing")
    with caplog.at_level(logging.WARNING, logger="ledgermq.net"):
        TcpNetwork(tls_server=config)  # what a server builds at start
        TcpNetwork(tls_server=config)  # the ledger port's: no second line
    (record,) = caplog.records
    message = record.getMessage()
    assert message.startswith(f"tls.server.certPath: the certificate in {certs.server_cert} ")
    assert expected in message, message
    assert time.strftime("%Y-%m-%d", time.gmtime(not_after)) in message, message
    assert time.strftime("%Y-%m-%d", time.gmtime(not_before)) in message, message


def test_a_server_certificate_valid_now_says_nothing(
    tls_certificates: CertificateSet, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ledgermq.net"):
        TcpNetwork(tls_server=server_config(tls_certificates, "enforcing"))
    assert caplog.records == []
