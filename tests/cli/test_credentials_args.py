"""Credentials on the command line: flags before or after the admin subcommand, the
environment, a tools.yml-style file, and half a pair refused."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.credentials_args import credentials_from
from ledgermq.cli.main import build_parser
from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "LEDGERMQ_ACCESS_KEY",
        "LEDGERMQ_SECRET_KEY",
        "LEDGERMQ_SECURITY_TOKEN",
        "LEDGERMQ_CREDENTIALS_FILE",
    ):
        monkeypatch.delenv(name, raising=False)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ("admin", "--access-key", "RocketMQ", "--secret-key", "12345678", "topic-list"),
        ("admin", "topic-list", "--access-key", "RocketMQ", "--secret-key", "12345678"),
        ("produce", "-t", "T", "--access-key", "RocketMQ", "--secret-key", "12345678"),
        ("consume", "-t", "T", "-g", "G", "--access-key", "RocketMQ", "--secret-key", "12345678"),
        ("bench", "produce", "--access-key", "RocketMQ", "--secret-key", "12345678"),
        ("bench", "consume", "--access-key", "RocketMQ", "--secret-key", "12345678"),
    ],
)
def test_flags_anywhere_a_client_is_made(argv: tuple[str, ...]) -> None:
    credentials = credentials_from(parse(*argv))
    assert credentials is not None
    assert (credentials.access_key, credentials.secret_key) == ("RocketMQ", "12345678")


def test_nothing_given_is_no_credentials() -> None:
    assert credentials_from(parse("admin", "topic-list")) is None


def test_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGERMQ_ACCESS_KEY", "envKey01")
    monkeypatch.setenv("LEDGERMQ_SECRET_KEY", "envSecret")
    credentials = credentials_from(parse("admin", "topic-list"))
    assert credentials is not None
    assert credentials.access_key == "envKey01"
    flagged = credentials_from(parse("admin", "--access-key", "flagKey1", "topic-list"))
    assert flagged is not None
    assert flagged.access_key == "flagKey1"  # the flag wins


def test_a_tools_yml_file(tmp_path: Path) -> None:
    path = tmp_path / "tools.yml"
    path.write_text("accessKey: RocketMQ\nsecretKey: 12345678\n")  # YAML reads an int
    credentials = credentials_from(parse("admin", "--credentials-file", str(path), "topic-list"))
    assert credentials is not None
    assert credentials.secret_key == "12345678"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (("admin", "--access-key", "RocketMQ", "topic-list"), "--secret-key is missing"),
        (("admin", "--secret-key", "12345678", "topic-list"), "--access-key is missing"),
        (("admin", "--credentials-file", "/nonexistent/tools.yml", "topic-list"), "cannot read"),
    ],
)
def test_half_a_pair_or_a_missing_file_is_a_clear_error(
    argv: tuple[str, ...], complaint: str
) -> None:
    with pytest.raises(ConfigError, match=complaint):
        credentials_from(parse(*argv))
