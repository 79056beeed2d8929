"""Without matplotlib, ``ledgermq chaos run`` says which extra brings it (issue 28 item 10): it
used to say only "no timeline.png: matplotlib is not installed", which leaves a user to find
out that ``pip install 'ledgermq[bench]'`` is the answer."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from ledgermq.testing.chaos import runner, timeline
from ledgermq.testing.chaos.history import History

ROOT = Path(__file__).resolve().parents[2]


def test_the_note_names_an_extra_that_brings_matplotlib() -> None:
    named = re.search(r"pip install 'ledgermq\[(\w+)\]'", timeline.NO_MATPLOTLIB)
    assert named is not None, timeline.NO_MATPLOTLIB
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(dep.startswith("matplotlib") for dep in extras[named.group(1)])


def test_without_matplotlib_no_picture_and_the_run_uses_that_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "matplotlib" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert timeline.write_timeline(History(seed=1), tmp_path / "timeline.png") is None
    assert not (tmp_path / "timeline.png").exists()
    assert vars(runner)["NO_MATPLOTLIB"] is timeline.NO_MATPLOTLIB  # the note a run appends
