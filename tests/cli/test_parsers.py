"""Every argparse parser of the package refuses abbreviated long options (issue 13, item 14).

With abbreviations on, ``ledgermq quickstart --port 30000`` was silently taken as
``--port-offset 30000``. The parser tree of the ``ledgermq`` command is walked at run time (so a
sub-command added later is checked too); parsers built elsewhere in the package are found in
the source.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

import ledgermq
from benchmarks.peers.pysyncobj_log import _build_parser as pysyncobj_parser
from ledgermq.cli.main import build_parser, main

PACKAGE = Path(ledgermq.__file__).parent


def walk(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(walk(sub, f"{path} {name}"))
    return found


@pytest.mark.parametrize(
    ("root", "name"), [(build_parser, "ledgermq"), (pysyncobj_parser, "pysyncobj_log")]
)
def test_every_parser_of_the_tree_refuses_abbreviations(
    root: type[argparse.ArgumentParser], name: str
) -> None:
    parsers = walk(root(), name)
    assert len(parsers) > 1
    abbreviating = [path for path, parser in parsers if parser.allow_abbrev]
    assert abbreviating == []


def test_every_parser_built_in_the_package_sets_allow_abbrev_false() -> None:
    """``ArgumentParser(...)`` anywhere, and ``add_parser(...)`` outside the ``ledgermq``
    command (whose sub-parsers inherit the class ``cli.main.Parser``), pass allow_abbrev=False."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        in_cli = path.parent.name == "cli"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name != "ArgumentParser" and not (name == "add_parser" and not in_cli):
                continue
            ok = any(
                k.arg == "allow_abbrev"
                and isinstance(k.value, ast.Constant)
                and k.value.value is False
                for k in node.keywords
            )
            if not ok:
                missing.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert missing == []


def test_an_abbreviated_option_is_an_error_not_another_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["quickstart", "--port", "30000", "--run-for", "0"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --port 30000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["consume", "-t", "T", "-g", "g", "--from-begin"])
    assert "unrecognized arguments: --from-begin" in capsys.readouterr().err
