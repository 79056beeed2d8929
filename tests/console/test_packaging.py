"""The console's assets ship in the wheel, and without its extra the commands say what to
install in one line (the quickstart runs without the console)."""

from __future__ import annotations

import fnmatch
import socket
import tomllib
from pathlib import Path

import pytest

from ledgermq.cli import console_commands, quickstart
from ledgermq.cli.main import main
from tests.test_cli import _free_port_offset

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "src" / "ledgermq" / "console"


def test_every_template_and_asset_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["ledgermq.console"]
    assets = [
        p.relative_to(CONSOLE).as_posix()
        for folder in ("templates", "static")
        for p in (CONSOLE / folder).rglob("*")
        if p.is_file()
    ]
    assert assets
    assert [a for a in assets if not any(fnmatch.fnmatch(a, g) for g in globs)] == []


def test_the_console_command_without_its_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(console_commands, "console_available", lambda: False)
    assert main(["console", "-n", "127.0.0.1:9876"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "ledgermq: error: the console needs the `console` extra: pip install 'ledgermq[console]'\n"
    )


@pytest.mark.timeout(60)
def test_the_quickstart_without_the_extra_runs_without_the_console(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(quickstart, "console_available", lambda: False)
    offset = _free_port_offset()
    args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset), "--run-for", "0"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Console         not started: the console needs the `console` extra" in out
    assert "self-check: 100 messages sent" in out


def test_the_console_command_on_a_taken_port_says_how_to_move_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("uvicorn", reason="the console extra is not installed")
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        assert main(["console", "-n", "127.0.0.1:1", "--listen", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ledgermq: error: the console cannot listen on 127.0.0.1:{port}: ")
    assert err.endswith("; choose another address with --listen HOST:PORT\n")
    assert len(err.splitlines()) == 1
