"""The documentation site's pages as the tests read them: the Markdown files under ``docs/``,
their marked code snippets, and the generator of the Reference pages (``docs/hooks``).

A ```` ```python ```` block of a page must follow a marker that says how the tests run it:

- ``<!-- snippet: alone -->``: a script, run in an empty folder;
- ``<!-- snippet: cluster -->``: a script against a NameServer and a 3-replica broker group (its
  ``127.0.0.1:9876`` is replaced by theirs);
- ``<!-- snippet: ledger -->``: a script against a 3-replica ledger group (its ``"g"`` group and
  ``n0-127.0.0.1:20911;...`` peers are replaced by the group's);
- ``<!-- snippet: fragment -->``: lines of a larger program (a Spark session, the official
  RocketMQ 5 client): compiled, not run.

Shell blocks (```` ```bash ````) are checked line by line against the real argument parser
(``tests/docs/test_snippets.py``).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOK = DOCS / "hooks" / "reference.py"
KINDS = frozenset({"alone", "cluster", "ledger", "fragment"})
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!-- snippet: (\w+) -->$")


def pages() -> list[Path]:
    """Every Markdown page of the site (the hooks folder holds no page)."""
    return sorted(p for p in DOCS.rglob("*.md") if HOOK.parent not in p.parents)


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    kind: str | None
    """The marker's kind (``KINDS``), None when the block has no marker."""
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """The fenced code blocks of ``path``, with the snippet marker just above each, if any."""
    lines = path.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        marker = _MARKER.match(lines[i - 1].strip()) if i else None
        kind = marker.group(1) if marker else None
        code = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Snippet(path, i + 1, fence.group(1), kind, code))
        i = end + 1
    return found


def all_snippets() -> list[Snippet]:
    """The snippets of the front page (README.md) and of every page of the site."""
    return [s for path in [ROOT / "README.md", *pages()] for s in snippets(path)]


def reference_hook() -> ModuleType:
    """``docs/hooks/reference.py``, the generator of the Reference pages, as a module."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
