"""The clone the package runs from: ``benchmarks/`` and ``tests/`` beside ``src/``, never installed.

The peer systems that ``ledgermq bench peers`` and ``ledgermq ledger bench`` measure LedgerMQ
against (``benchmarks/peers``: NATS, RabbitMQ, etcd, PySyncObj) and the brokers with a bug put in
on purpose that ``ledgermq chaos run --inject-bug`` and ``--faults poison`` start
(``tests/chaos/buggy``) are tools of the project, not the product: a wheel does not carry them.
When ``ledgermq`` is imported from a clone's ``src/`` (``pip install -e .`` or ``PYTHONPATH=src``)
they are found beside it; from an installed wheel those commands say in one sentence that they
run from a clone (``CloneOnlyError``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import ledgermq
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["CloneOnlyError", "clone_has", "clone_root", "import_from_clone", "require_clone"]


class CloneOnlyError(LedgerMQError):
    """A command needs the repository's ``benchmarks/`` or ``tests/``, and this ``ledgermq`` is
    an installed package, not a clone."""


def clone_root() -> Path | None:
    """The repository this ``ledgermq`` was imported from (``<root>/src/ledgermq``), or None
    when it is an installed package."""
    root = Path(ledgermq.__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "src" / "ledgermq").is_dir():
        return root
    return None


def _path_of(module: str, root: Path) -> Path:
    return root.joinpath(*module.split("."))


def clone_has(module: str) -> bool:
    """Whether ``module`` (``"benchmarks.peers"``, ``"tests.chaos.buggy.buggy_pop"``) is in the
    clone; nothing is imported."""
    root = clone_root()
    if root is None:
        return False
    path = _path_of(module, root)
    return path.is_dir() or path.with_suffix(".py").is_file()


def require_clone(module: str, what: str) -> Path:
    """The clone's root, which holds ``module`` and is on ``sys.path`` from now on (children get
    it through ``processes.child_env``); ``CloneOnlyError`` naming ``what`` otherwise."""
    root = clone_root()
    if root is None or not clone_has(module):
        place = "/".join(module.split(".")[:-1])
        raise CloneOnlyError(
            f"{what} run from a clone of the LedgerMQ repository ({place}/ is not part of the "
            f"installed package): clone it, pip install -e . there, and run the command again"
        )
    if str(root) not in sys.path:
        # first: the clone's `tests` and `benchmarks` win over any installed package of that name
        sys.path.insert(0, str(root))
    return root


def import_from_clone(module: str, what: str) -> ModuleType:
    """``module`` imported from the clone (``require_clone``)."""
    require_clone(module, what)
    return importlib.import_module(module)
