"""``examples/spark_pipeline.py``'s default folders, without Spark: under the current
directory, so two users (or two projects) never share a checkpoint by default."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline_defaults", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_output_and_checkpoint_are_under_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = _example()._options([])
    assert Path(args.checkpoint) == tmp_path / "ledgermq-spark-pipeline" / "checkpoint"
    assert Path(args.output_dir) == tmp_path / "ledgermq-spark-pipeline" / "parquet"
    # given folders are kept, made absolute (the start line prints where the state is)
    args = _example()._options(["--checkpoint", "ck", "--output-dir", "/data/out"])
    assert Path(args.checkpoint) == tmp_path / "ck"
    assert Path(args.output_dir) == Path("/data/out")
