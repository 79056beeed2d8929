"""TLS on the command line: the options on every client command, the environment, and what
each combination means."""

from __future__ import annotations

import argparse

import pytest

from ledgermq.cli.main import build_parser
from ledgermq.cli.tls_args import tls_from
from ledgermq.client import TlsClientConfig
from ledgermq.errors import ConfigError

ENV = (
    "LEDGERMQ_TLS",
    "LEDGERMQ_TLS_CA",
    "LEDGERMQ_TLS_CERT",
    "LEDGERMQ_TLS_KEY",
    "LEDGERMQ_TLS_KEY_PASSWORD",
    "LEDGERMQ_TLS_INSECURE",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ("admin", "--tls-ca", "ca.pem", "topic-list"),
        ("admin", "topic-list", "--tls-ca", "ca.pem"),
        ("produce", "-t", "T", "--tls-ca", "ca.pem"),
        ("consume", "-t", "T", "-g", "G", "--tls-ca", "ca.pem"),
        ("bench", "produce", "--tls-ca", "ca.pem"),
        ("bench", "consume", "--tls-ca", "ca.pem"),
        ("ledger", "status", "-g", "g", "-p", "n0-127.0.0.1:1", "--tls-ca", "ca.pem"),
    ],
)
def test_every_client_command_takes_the_options(argv: tuple[str, ...]) -> None:
    assert tls_from(parse(*argv)) == TlsClientConfig(trust_cert_path="ca.pem")


def test_no_option_means_plain() -> None:
    assert tls_from(parse("admin", "topic-list")) is None


def test_tls_alone_trusts_the_system_cas() -> None:
    assert tls_from(parse("admin", "--tls", "topic-list")) == TlsClientConfig()


def test_client_certificate_and_insecure() -> None:
    args = parse(
        "produce", "-t", "T", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-insecure"
    )
    assert tls_from(args) == TlsClientConfig(cert_path="c.pem", key_path="k.pem", test_mode=True)


def test_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGERMQ_TLS_CA", "env-ca.pem")
    monkeypatch.setenv("LEDGERMQ_TLS_CERT", "c.pem")
    monkeypatch.setenv("LEDGERMQ_TLS_KEY", "k.pem")
    monkeypatch.setenv("LEDGERMQ_TLS_KEY_PASSWORD", "pw")
    config = tls_from(parse("admin", "topic-list", "--tls-ca", "flag-ca.pem"))
    assert config == TlsClientConfig(
        trust_cert_path="flag-ca.pem", cert_path="c.pem", key_path="k.pem", key_password="pw"
    )
    monkeypatch.delenv("LEDGERMQ_TLS_CA")
    monkeypatch.delenv("LEDGERMQ_TLS_CERT")
    monkeypatch.delenv("LEDGERMQ_TLS_KEY")
    monkeypatch.setenv("LEDGERMQ_TLS", "true")
    assert tls_from(parse("admin", "topic-list")) == TlsClientConfig(key_password="pw")


def test_a_key_without_its_certificate_is_refused() -> None:
    with pytest.raises(ConfigError, match="--tls-key needs --tls-cert"):
        tls_from(parse("admin", "topic-list", "--tls-key", "k.pem"))
