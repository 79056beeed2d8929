"""Every code snippet of the documentation site runs, or at least parses (issue 28): a Python
block is run as a script (against a real cluster when it needs one) or, when it is lines of a
larger program, compiled; every ``ledgermq`` line of a shell block is parsed by the real
argument parser, so a renamed command or option, or a bad value, fails here. The marker rules
are in ``tests/docs/pages.py``."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env
from ledgermq.cli.main import build_parser
from ledgermq.testing.broker_cluster import BrokerCluster
from tests.docs.pages import KINDS, Snippet, all_snippets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from ledgermq.testing.processes import ReplicaGroup

SNIPPETS = all_snippets()
PYTHON = [s for s in SNIPPETS if s.language == "python"]
SHELL = [s for s in SNIPPETS if s.language in ("bash", "sh")]
QUICKSTART_NAMESRV = "127.0.0.1:9876"
LEDGER_PEERS = "n0-127.0.0.1:20911;n1-127.0.0.1:20912;n2-127.0.0.1:20913"


def _of(kind: str) -> list[Snippet]:
    return [s for s in PYTHON if s.kind == kind]


def test_every_python_block_says_how_it_is_checked() -> None:
    unmarked = [s.name for s in PYTHON if s.kind not in KINDS]
    assert unmarked == []
    assert len(_of("cluster")) >= 4
    assert _of("alone")
    assert _of("ledger")


@pytest.mark.parametrize("snippet", _of("fragment"), ids=lambda s: s.name)
def test_fragment_compiles(snippet: Snippet) -> None:
    compile(snippet.code, snippet.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


# ---------------------------------------------------------------------------------- shell
_STOP = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1"})


def shell_commands(snippet: Snippet) -> list[list[str]]:
    """The ``ledgermq`` command lines of a shell block, as argv without ``ledgermq``: comments,
    a trailing ``&`` and whatever follows a pipe or ``&&`` left out, ``$VAR`` given a value.
    A line that holds a placeholder (``...``, ``[``, ``<``) is not a command to parse."""
    commands = []
    for line in snippet.code.replace("\\\n", " ").splitlines():
        text = line.strip().removeprefix("sudo ")
        if not text.startswith("ledgermq "):
            continue
        words: list[str] = []
        for word in shlex.split(text, comments=True)[1:]:
            if word in _STOP:
                break
            words.append(re.sub(r"\$\{?\w+\}?", "n0-127.0.0.1:1;n1-127.0.0.1:2", word))
        if any("..." in w or w.startswith(("[", "<")) for w in words):
            continue
        commands.append(words)
    return commands


def test_the_shell_lines_are_found() -> None:
    found = [c for s in SHELL for c in shell_commands(s)]
    assert ["quickstart"] in found
    assert any(c[:2] == ["admin", "-n"] for c in found)
    assert len(found) > 20


@pytest.mark.parametrize("snippet", SHELL, ids=lambda s: s.name)
def test_shell_lines_parse(snippet: Snippet) -> None:
    parser = build_parser()
    refused = []
    for words in shell_commands(snippet):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                parser.parse_args(words)
            except SystemExit as exc:
                if exc.code:
                    refused.append(f"ledgermq {' '.join(words)}: {err.getvalue().strip()}")
    assert refused == []


# ---------------------------------------------------------------------------------- scripts
def _run(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("snippet", _of("alone"), ids=lambda s: s.name)
def test_standalone_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code)
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    """One NameServer and 3-replica broker group for every cluster snippet."""
    running = BrokerCluster(tmp_path_factory.mktemp("cluster"), replicas=3)
    try:
        running.wait_routable()
        yield running
    finally:
        running.close()


@pytest.mark.integration
@pytest.mark.timeout(180)
@pytest.mark.parametrize("snippet", _of("cluster"), ids=lambda s: s.name)
def test_cluster_snippet_runs(snippet: Snippet, cluster: BrokerCluster, tmp_path: Path) -> None:
    assert QUICKSTART_NAMESRV in snippet.code, "a cluster snippet names the quickstart's NameServer"
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code.replace(QUICKSTART_NAMESRV, cluster.namesrv_addr))
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the snippet prints what it did"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("snippet", _of("ledger"), ids=lambda s: s.name)
def test_ledger_snippet_runs(
    snippet: Snippet, replica_groups: Callable[..., ReplicaGroup], tmp_path: Path
) -> None:
    assert LEDGER_PEERS in snippet.code
    assert '"g"' in snippet.code
    group = replica_groups(3)
    group.start_all()
    code = snippet.code.replace(LEDGER_PEERS, group.peers).replace('"g"', repr(group.group))
    script = tmp_path / "snippet.py"
    script.write_text(code)
    done = _run(script, tmp_path)
    assert done.returncode == 0, done.stderr
