"""The documentation site builds with ``mkdocs build --strict`` (issue 28): a broken link or
anchor, a page missing from the navigation or a nav entry without its page is a warning, and
--strict makes every warning fail the build. CI runs this test; mkdocs-material comes with the
``docs`` extra (and the ``dev`` one), so a missing mkdocs is a failure here, never a skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ledgermq.bench.processes import child_env
from tests.docs.pages import ROOT


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = child_env({"NO_MKDOCS_2_WARNING": "1"})  # mkdocs-material's banner about its successor
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "reference" / "cli" / "index.html").exists()
    assert "ledgermq admin topic-create" in (site / "reference" / "cli" / "index.html").read_text()
    assert (site / "benchmarks" / "peers-2026-11-26.png").exists()
    # the architecture page's diagrams (docs/hooks/architecture.py), for mkdocs-material to draw
    assert '<pre class="mermaid">' in (site / "architecture" / "index.html").read_text()
