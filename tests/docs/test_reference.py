"""The generated Reference pages (docs/hooks/reference.py, issue 28) name everything the program
has: every command the parser takes, every key the config loaders accept, every metric family,
request code and RPC. Each list is taken here from where the program itself looks, not from the
generator's own walk, so a command, key or metric the generator misses fails the test."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.config import broker_file_keys
from ledgermq.cli.client_commands import MQADMIN_NAMES
from ledgermq.cli.main import build_parser
from ledgermq.ledger.config import FILE_KEYS as LEDGER_KEYS
from ledgermq.namesrv.config import FILE_KEYS as NAMESRV_KEYS
from ledgermq.net.tls import TLS_KEYS
from ledgermq.wire.codes import LedgerRequestCode, MQRequestCode, MQResponseCode
from tests.docs.pages import DOCS, reference_hook

if TYPE_CHECKING:
    from collections.abc import Iterator

HOOK = reference_hook()


def _commands(prefix: str, parser: argparse.ArgumentParser) -> Iterator[str]:
    """Every command under ``parser`` as typed, mqadmin aliases left out (they are listed in a
    table of their own)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name not in MQADMIN_NAMES:
                    yield f"{prefix} {name}"
                    yield from _commands(f"{prefix} {name}", sub)


def test_every_command_has_a_section_with_its_help() -> None:
    page = HOOK.cli_page()
    headings = set(re.findall(r"^#+ `(ledgermq[^`]*)`$", page, re.MULTILINE))
    commands = set(_commands("ledgermq", build_parser()))
    assert len(commands) > 40
    assert commands - headings == set()
    assert "usage: ledgermq admin topic-create" in page
    for alias in MQADMIN_NAMES:
        assert f"| `{alias}` |" in page


def _rows(page: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", page, re.MULTILINE))


def test_every_config_key_the_loaders_accept_has_a_row() -> None:
    page = HOOK.config_page()
    rows = _rows(page)
    broker = {k for k in broker_file_keys() if not k.startswith("maped")}
    assert broker - rows == set()
    assert {k for k, v in NAMESRV_KEYS.items() if v != "tls"} - rows == set()
    assert {k for k, v in LEDGER_KEYS.items() if v != "tls"} - rows == set()
    listed = set(re.findall(r"^- `([^`]+)`$", page, re.MULTILINE))
    assert set(TLS_KEYS) - listed == set()


def test_the_config_rows_say_type_default_and_whether_live() -> None:
    page = HOOK.config_page()
    row = next(line for line in page.splitlines() if line.startswith("| `maxMessageSize` |"))
    assert "| integer | `4194304` | live:" in row
    row = next(line for line in page.splitlines() if line.startswith("| `flushDiskType` |"))
    assert "| string | `ASYNC_FLUSH` | restart |" in row


def test_every_metric_of_a_scrape_has_a_row() -> None:
    """What a replica's /metrics really shows (the dashboard test's exposition) is listed."""
    from tests.test_grafana_dashboard import _exported

    page = HOOK.metrics_page()
    rows = _rows(page)
    shown = set()
    for sample in _exported():
        name = re.sub(r"_(bucket|sum|count|created)$", "", sample)
        shown.add(name)
    listed = {re.sub(r"_total$", "", r) for r in rows} | rows
    missing = {n for n in shown if n not in listed and re.sub(r"_total$", "", n) not in listed}
    assert missing == set()


def test_every_request_code_rpc_and_response_code_is_listed() -> None:
    protocol = HOOK.protocol_page()
    for code in MQRequestCode:
        assert f"| {int(code)} | `{code.name}` |" in protocol
    for ledger_code in LedgerRequestCode:
        assert f"| {int(ledger_code)} | `{ledger_code.name}` |" in protocol
    errors = HOOK.errors_page()
    for response in MQResponseCode:
        assert f"| {int(response)} | `{response.name}` |" in errors


def test_every_rpc_has_a_row_in_the_hand_written_answers_table() -> None:
    """The RPC table of guides/v5-clients.md is prose; the RPC list comes from the .proto."""
    guide = (DOCS / "guides" / "v5-clients.md").read_text()
    table = guide.split("## What each RPC answers", 1)[1].split("\n## ", 1)[0]
    described = set(re.findall(r"\b[A-Z][A-Za-z]+\b", table))
    methods = HOOK.grpc_methods()
    assert "SendMessage" in methods
    assert set(methods) - described == set()


@pytest.mark.parametrize("path", sorted(HOOK.PAGES))
def test_generated_pages_are_not_written_by_hand(path: str) -> None:
    """The hook adds them at build time; a file of the same name would be a stale copy."""
    assert not (DOCS / path).exists()
