"""Pinned npm packages for the tests that run real Node.js clients (ali-ons, the official
RocketMQ 5 client): installed once with ``npm ci`` from a directory's ``package.json`` and
``package-lock.json`` into a directory named after the hash of the two, kept in the pytest
cache across sessions (a session's temporary directory without the cache). The install goes to
a scratch directory renamed into place, so concurrent sessions do not trip over each other.
Without ``node`` and ``npm``, or when the registry cannot be reached, the calling test is
skipped with one line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

NPM_TIMEOUT_S = 90
"""Within the tests' 120 s: a registry that does not answer fails each fetch after 20 s."""


def pinned_version(package_dir: Path, name: str) -> str:
    dependencies: dict[str, str] = json.loads((package_dir / "package.json").read_text())[
        "dependencies"
    ]
    return dependencies[name]


def npm_failure(output: str) -> str:
    """The line of npm's error output that says what went wrong (not its code lines, stack
    or log path)."""
    lines = [line.removeprefix("npm error").strip() for line in output.splitlines()]
    said = [
        line
        for line in lines
        if len(line.split()) > 2 and not line.startswith(("A complete log", "at "))
    ]
    return (said or [line for line in lines if line] or ["(no output)"])[0]


def installed_node_modules(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    package_dir: Path,
    name: str,
) -> Path:
    """``node_modules`` holding package ``name`` as ``package_dir`` pins it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"the {name} tests need node and npm on PATH")
    files = [package_dir / "package.json", package_dir / "package-lock.json"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:16]
    cache: pytest.Cache | None = getattr(request.config, "cache", None)
    label = package_dir.name
    base = cache.mkdir(label) if cache is not None else tmp_path_factory.mktemp(label)
    target = base / digest
    modules = target / "node_modules"
    if (modules / name / "package.json").is_file():
        return modules
    scratch = base / f"install-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for f in files:
        shutil.copy(f, scratch / f.name)
    command = [
        npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error",
        "--fetch-timeout=20000", "--fetch-retries=1",
    ]  # fmt: skip
    version = pinned_version(package_dir, name)
    try:
        done = subprocess.run(
            command, cwd=scratch, capture_output=True, text=True, timeout=NPM_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(scratch, ignore_errors=True)
        pytest.skip(f"npm ci of {name} {version} took over {NPM_TIMEOUT_S} s")
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        why = npm_failure(done.stderr or done.stdout)
        pytest.skip(f"npm ci could not install {name} {version}: {why}")
    try:
        scratch.rename(target)
    except OSError:  # another session put it there first
        shutil.rmtree(scratch, ignore_errors=True)
    return modules
