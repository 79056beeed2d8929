"""The layering of DESIGN.md, checked: import-linter contracts plus bans it cannot express."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ledgermq"

# Pure layers: no I/O, no clocks, no randomness, no concurrency (STYLE.md section 7.12).
PURE_PACKAGES = ("raft", "wire", "broker/pop", "broker/timers", "security/acl", "messaging")
PURE_BANNED = {"asyncio", "socket", "threading", "time", "random", "os", "selectors", "mmap"}
# Core layers never import the layers above them (their own package aside: broker.pop's
# modules import each other).
CORE_PACKAGES = ("raft", "store", "wire", "broker/pop", "broker/timers", "security/acl")
UPPER_LAYERS = {
    "net", "ledger", "broker", "namesrv", "client", "spark", "cli", "testing", "proxy",
    "security",
}  # fmt: skip


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:`` blocks (not imported at run time)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            hidden.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return hidden


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    hidden = _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def python_files(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py")) if (SRC / package).is_dir() else []


def test_pure_layers_do_no_io() -> None:
    offenders = [
        f"{path.relative_to(SRC)} imports {name}"
        for package in PURE_PACKAGES
        for path in python_files(package)
        for name in imported_modules(path)
        if name.split(".")[0] in PURE_BANNED
    ]
    assert offenders == []


def test_core_layers_do_not_import_upper_layers() -> None:
    offenders = [
        f"{path.relative_to(SRC)} imports {name}"
        for package in CORE_PACKAGES
        for path in python_files(package)
        for name in imported_modules(path)
        if name.startswith("ledgermq.")
        and name.split(".")[1] in UPPER_LAYERS
        and not _within(name, package)
    ]
    assert offenders == []
    assert all(python_files(package) for package in CORE_PACKAGES), "a core package is missing"


def _within(module: str, package: str) -> bool:
    own = "ledgermq." + package.replace("/", ".")
    return module == own or module.startswith(own + ".")


def test_the_package_never_imports_the_clone() -> None:
    """benchmarks/ and tests/ are not installed: the package reaches them only by name, through
    ``bench.checkout`` (issue 26 item 7), never with an import statement."""
    offenders = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in sorted(SRC.rglob("*.py"))
        for name in _all_imported_modules(path)
        if name.split(".")[0] in {"benchmarks", "tests"}
    ]
    assert offenders == []


def _all_imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, under ``TYPE_CHECKING`` or in a function too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


# What the messaging contract (issue 26 item 1) may not name, even for type checking: a door, a
# broker room, the client, a connection, a remoting frame or header, protobuf or gRPC.
MESSAGING_BANNED = (
    "ledgermq.broker", "ledgermq.proxy", "ledgermq.client", "ledgermq.namesrv", "ledgermq.net",
    "ledgermq.wire.frame", "ledgermq.wire.codes", "ledgermq.wire.ext_fields",
    "ledgermq.wire.json_fields", "ledgermq.wire.headers", "grpc", "google",
)  # fmt: skip


def test_the_messaging_contract_names_no_protocol() -> None:
    """Type-checking imports count too (import-linter's contract says the same at run time)."""
    offenders = []
    for path in python_files("messaging"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(SRC)} imports {name}"
                for name in names
                if any(name == b or name.startswith(b + ".") for b in MESSAGING_BANNED)
            ]
    assert python_files("messaging"), "the messaging package must exist"
    assert offenders == []


def test_c_speedups_are_built_where_required() -> None:
    """CI sets LEDGERMQ_REQUIRE_SPEEDUPS=1: a failed (optional) compile must not pass silently."""
    from ledgermq.ledger import codec
    from ledgermq.store.append_plan import HAVE_SPEEDUPS

    if os.environ.get("LEDGERMQ_REQUIRE_SPEEDUPS") == "1":
        assert HAVE_SPEEDUPS, "the C extension ledgermq.store._speedups was not built"
        # An extension built before the codec functions existed imports, but lacks them.
        assert codec.HAVE_SPEEDUPS, "ledgermq.store._speedups lacks the entry codec: rebuild it"
        assert importlib.util.find_spec("ledgermq.wire._record_columns") is not None, (
            "the C extension ledgermq.wire._record_columns (the Spark read path) was not built"
        )
        assert importlib.util.find_spec("ledgermq.wire._dispatch_scan") is not None, (
            "the C extension ledgermq.wire._dispatch_scan (the dispatcher's scan) was not built"
        )
        assert importlib.util.find_spec("ledgermq.wire._record_decode") is not None, (
            "the C extension ledgermq.wire._record_decode (the consumers' decoder) was not built"
        )
        assert importlib.util.find_spec("ledgermq.wire._frame_codec") is not None, (
            "the C extension ledgermq.wire._frame_codec (binary-header frames) was not built"
        )
        assert importlib.util.find_spec("ledgermq.broker.storage._key_index") is not None, (
            "the C extension ledgermq.broker.storage._key_index (the key index loop) was not built"
        )


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint_imports).exists():
        pytest.fail("lint-imports is not installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [lint_imports, "--no-cache"],
        capture_output=True,
        text=True,
        cwd=SRC.parents[1],
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
