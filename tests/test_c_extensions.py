"""The C extensions compile without a single warning under ``-Wall -Wextra -Werror``.

setup.py compiles them with the interpreter's flags, which warn little and never fail: a
sign-compare or an unused result would pass unnoticed, and those are how buffer bugs look in
C. Each file is compiled here on its own to an object file (nothing is linked or imported), at
the -O2 of setup.py, where gcc's flow analysis finds the most (maybe-uninitialized and the like).
docs/c-extensions.md lists the entry points and their references.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ledgermq"
C_FILES = sorted(SRC.rglob("*.c"))
STRICT_FLAGS = ("-O2", "-fPIC", "-Wall", "-Wextra", "-Werror")


def test_the_known_extensions_are_checked() -> None:
    names = {path.relative_to(SRC).as_posix() for path in C_FILES}
    assert {
        "store/_speedups.c",
        "wire/_record_columns.c",
        "wire/_dispatch_scan.c",
        "wire/_record_decode.c",
        "wire/_frame_codec.c",
        "broker/storage/_key_index.c",
    } <= names


@pytest.mark.parametrize("source", C_FILES, ids=lambda path: path.relative_to(SRC).as_posix())
def test_compiles_without_warnings(source: Path, tmp_path: Path) -> None:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        if os.environ.get("LEDGERMQ_REQUIRE_SPEEDUPS") == "1":
            pytest.fail("no C compiler (gcc or cc), but CI requires the C extensions")
        pytest.skip("no C compiler: the extensions are optional and not built here")
    include = sysconfig.get_paths()["include"]
    command = [compiler, *STRICT_FLAGS, f"-I{include}", "-c", str(source)]
    command += ["-o", str(tmp_path / f"{source.stem}.o")]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}{result.stderr}"
    assert result.stderr == "", result.stderr
