"""What the pages say is true for a user of a clone (issue 13 item 18, issue 28): the front page's
links resolve, every repository path a page quotes exists, the examples do not collide, and CI's
test command is still where ``.ci/run`` reads it. (Links between the site's pages are checked by
``mkdocs build --strict``, tests/docs/test_site.py.)"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.docs.pages import DOCS, ROOT, pages

README = ROOT / "README.md"
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_PATH = re.compile(r"`((?:src|tests|docs|examples|benchmarks|scripts|conf|deploy)/[^`\s]*)`")
QUICKSTART_PORTS = {9876, 30911, 30921, 30931, 40911, 40912, 40913, 8080, 8081, 8082, 8083}
"""``ledgermq quickstart``'s ports (ledgermq.cli.quickstart: RocketMQ's DLedger samples)."""


def _relative_links(path: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(path.read_text())
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_the_front_page_links_resolve_inside_the_repository() -> None:
    links = _relative_links(README)
    assert any(link.startswith("docs/") for link in links)
    bad = [
        target
        for target in links
        if not (README.parent / target.split("#")[0]).resolve().is_relative_to(ROOT)
        or not (README.parent / target.split("#")[0]).exists()
    ]
    assert bad == []


OURS = [README, *(p for p in pages() if "specs" not in p.parts)]
"""The pages that speak of this repository (docs/specs/ quotes RocketMQ's and DLedger's paths)."""


@pytest.mark.parametrize("path", OURS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_repository_path_exists(path: Path) -> None:
    quoted = [
        p.split("::", 1)[0]  # a test's node id: its file
        for p in _CODE_PATH.findall(path.read_text())
        if not any(c in p for c in "<*$")  # placeholders, globs, variables
    ]
    missing = [p for p in quoted if not (ROOT / p.rstrip("/")).exists()]
    assert missing == []
    assert "../shared" not in path.read_text()


def test_ledger_example_ports_do_not_collide_with_the_quickstart() -> None:
    text = (DOCS / "guides" / "ledger.md").read_text()
    ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", text)}
    assert ports, "the ledger example names its ports"
    assert ports & QUICKSTART_PORTS == set()


def test_spark_setup_installs_from_a_clone() -> None:
    assert "pip install -e '.[spark]'" in (DOCS / "guides" / "spark.md").read_text()


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def ci_command() -> str:
    """The command ``.ci/run`` runs, read as it reads it (its awk line)."""
    script = (ROOT / ".ci" / "run").read_text()
    awk = re.search(r"awk '([^']+)' README\.md", script)
    assert awk is not None, ".ci/run reads the README with awk"
    done = subprocess.run(
        ["awk", awk.group(1), str(README)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_ci_runs_the_checks_with_the_docs_tools() -> None:
    """The README's test command installs the dev extra, which brings mkdocs-material, so the
    site's strict build (tests/docs/test_site.py) runs in CI and fails there without it."""
    command = ci_command()
    assert "scripts/test" in command
    extras = re.search(r"pip install -e '\.\[([\w,]+)\]'", command)
    assert extras is not None
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    installed = [d for extra in extras.group(1).split(",") for d in optional[extra]]
    assert any(d.startswith("mkdocs-material") for d in installed)
    assert any(d.startswith("mkdocs-material") for d in optional["docs"])
