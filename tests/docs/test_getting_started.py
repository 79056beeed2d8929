"""The Getting started pages say what the code does (issue 28 item 10): the quickstart's port
list has every port it opens (the gRPC ports were missing), the install page names every C
extension setup.py builds (it said "two" of six), the first command starts from a clone, and
the commands "from another shell" say to activate the venv first."""

from __future__ import annotations

import re

from ledgermq.cli import quickstart
from tests.docs.pages import DOCS, ROOT, snippets

QUICKSTART = DOCS / "getting-started" / "quickstart.md"
INSTALL = DOCS / "getting-started" / "install.md"


def test_the_port_list_has_every_port_the_quickstart_opens() -> None:
    ports = {
        quickstart.NAMESRV_PORT,
        quickstart.CONSOLE_PORT,
        *quickstart.BROKER_PORTS,
        *quickstart.LEDGER_PORTS,
        *quickstart.GRPC_PORTS,
        *quickstart.METRICS_PORTS,
    }
    table = QUICKSTART.read_text().split("## Ports", 1)[1].split("\n## ", 1)[0]
    listed = {int(p) for p in re.findall(r"\b(\d{4,5})\b", table)}
    assert ports - listed == set()
    offsets = re.search(r"from (-\d+) to (\d+)", table)
    assert offsets is not None
    assert (int(offsets.group(1)), int(offsets.group(2))) == (
        quickstart.MIN_PORT_OFFSET,
        quickstart.MAX_PORT_OFFSET,
    )


def test_the_install_page_names_every_c_extension() -> None:
    built = re.findall(r'Extension\(\s*"([\w.]+)"', (ROOT / "setup.py").read_text())
    assert len(built) >= 6
    text = INSTALL.read_text()
    assert [name for name in built if f"`{name}`" not in text] == []
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"{words[len(built)]} optional C extensions" in text


def test_the_first_command_starts_from_a_clone() -> None:
    first = snippets(INSTALL)[0]
    assert first.code.startswith("git clone ")
    assert "&& cd " in first.code.splitlines()[0]


def test_commands_from_another_shell_activate_the_venv_first() -> None:
    text = QUICKSTART.read_text()
    before = text.split("ledgermq produce -n 127.0.0.1:9876", 1)[0].rsplit("\n## ", 1)[1]
    assert "another shell" in before
    assert ". .venv/bin/activate" in before
