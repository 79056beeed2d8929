"""Every ``ledgermq ...`` command named in the sources (error messages, help, docstrings), in
README.md and in the documentation site's pages exists in the real argument parser.

Issue 13 item 15: the producer's TopicNotFoundError told users to run ``ledgermq admin
create-topic``, a command that does not exist (it is ``topic-create``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ledgermq.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    *sorted((ROOT / "src" / "ledgermq").rglob("*.py")),
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
_MENTION = re.compile(r"\bledgermq((?:[ \t]+[^\s`'\"()]+)+)")
_WORD = re.compile(r"[a-z][a-z0-9-]*")
_IMPORT = re.compile(r"^\s*(from|import)\s")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
"""A line that is an HTML comment: a marker the site's hooks read (``<!-- generated: rooms
ledgermq -->`` names the package whose rooms the architecture page draws), never shown."""
PROSE: frozenset[str] = frozenset({"and", "source"})
"""Words that follow "ledgermq" in prose, not as a command ("the ledgermq source's schema",
"workers must see ledgermq and pyarrow"). Keep this list short and look at each addition."""


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_command(words: list[str]) -> str | None:
    """Walk ``words`` (what follows ``ledgermq``) down the parser; the first word that should
    be a command and is not one, or None. Options and their values are skipped; the walk stops
    at a placeholder (``DIR``, ``|``, ...) or where a command takes no further command."""
    parser = build_parser()
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
            continue
        if word.startswith("-"):
            action = parser._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                return word
            skip_value = "=" not in word and action.nargs != 0
            continue
        choices = _subcommands(parser)
        if not choices or not _WORD.fullmatch(word):
            return None
        if word not in choices:
            return word
        parser = choices[word]
    return None


def mentions() -> list[tuple[str, int, str]]:
    found = []
    for path in SOURCES:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _IMPORT.match(line) or _COMMENT.match(line):
                continue
            for match in _MENTION.finditer(line):
                words = match.group(1).split()
                if words[0] not in PROSE:
                    found.append((str(path.relative_to(ROOT)), number, words))
    return [(where, number, " ".join(words)) for where, number, words in found]


def test_the_scan_finds_the_commands_named_in_messages() -> None:
    named = {text for _, _, text in mentions()}
    assert any(text.startswith("admin topic-create") for text in named)
    assert any(text.startswith("produce") for text in named)
    assert len(named) > 20


@pytest.mark.parametrize(
    ("words", "bad"),
    [
        ("admin create-topic", "create-topic"),
        ("admin topic-create -t T", None),
        ("admin -n 127.0.0.1:9876 cluster-list", None),
        ("admin -n 127.0.0.1:9876 list-clusters", "list-clusters"),
        ("store info DIR", None),
        ("bench produce | consume", None),
        ("serve", "serve"),
    ],
)
def test_the_walk_tells_commands_from_typos(words: str, bad: str | None) -> None:
    assert unknown_command(words.split()) == bad


def test_every_command_named_in_src_readme_and_docs_exists() -> None:
    wrong = [
        f"{where}:{number}: ledgermq {text} (no command {bad!r})"
        for where, number, text in mentions()
        if (bad := unknown_command(text.split())) is not None
    ]
    assert not wrong, "\n".join(wrong)
