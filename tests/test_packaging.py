"""The sdist and the wheel built from it carry the sample configuration (issue 28 item 9).

The README points to ``conf/`` and ``deploy/``; a wheel used to have neither, so an installed
LedgerMQ could not follow its own documentation. Now MANIFEST.in puts both folders into the
sdist and setup.py copies them into the wheel as ``ledgermq/samples/`` (``ledgermq init-conf``
writes them out). This builds the sdist from the tracked files, the way ``python -m build``
does (setuptools' PEP 517 hook, no isolation: the dev venv's setuptools), then the wheel from
that sdist with pip (compiling the C extensions), and looks inside both. The manylinux repair
and the install in fresh venvs are the release script's (scripts/build-wheels), which needs
PyPI.

Slow (a minute: the C extensions compile): select with ``-m slow``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]


def _tracked_tree(target: Path) -> None:
    """A copy of the files git knows (tracked or new, not ignored): a clean checkout's tree."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tree to package cannot be told from build output")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def test_the_sdist_and_its_wheel_carry_conf_and_deploy(tmp_path: Path) -> None:
    tree, dist = tmp_path / "tree", tmp_path / "dist"
    tree.mkdir()
    dist.mkdir()
    _tracked_tree(tree)
    hook = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    built = subprocess.run(
        [sys.executable, "-c", hook, str(dist)],
        check=False,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    sdist = dist / built.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    shipped = {
        str(path.relative_to(tree))
        for folder in ("conf", "deploy")
        for path in (tree / folder).rglob("*")
        if path.is_file()
    }
    assert "conf/broker-n0.conf" in shipped
    assert "deploy/systemd/ledgermq-broker@.service" in shipped
    assert shipped <= in_sdist, sorted(shipped - in_sdist)
    assert {"scripts/build-wheels", "src/ledgermq/wire/_frame_codec.c"} <= in_sdist

    wheel_built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(dist), str(sdist)],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    assert wheel_built.returncode == 0, wheel_built.stderr[-3000:]
    [wheel] = dist.glob("ledgermq-*.whl")
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    samples = {f"ledgermq/samples/{name}" for name in shipped}
    assert samples <= in_wheel, sorted(samples - in_wheel)
    assert not any(name.startswith(("conf/", "deploy/")) for name in in_wheel)
    assert sum(name.endswith(".so") for name in in_wheel) == 6  # every C extension built
