"""``ledgermq init-conf DIR``: write the sample configuration for an operator to edit.

The samples ship inside the package (``ledgermq/samples/``, copied from the repository's ``conf/``
and ``deploy/`` when the wheel is built: setup.py), so that an installed wheel has what the README
points to; in a source tree (a clone, an editable install) they are the repository's ``conf/``
and ``deploy/`` themselves. DIR gets the repository's layout, so every path the README names
works from DIR: ``conf/`` (one host: a ``namesrv.conf`` and RocketMQ's three DLedger replicas)
and ``deploy/`` (three machines: ``deploy/conf/``, the systemd units, the Grafana dashboard).

The copies are the operator's: the ``ledgermq-sample:`` line that marks a shipped sample is left
out, so ``ledgermq admin broker-config update`` persists into them (it refuses to rewrite a
sample: ``broker.live_config``). Existing files are never overwritten without ``--force``; with
any of them in the way nothing is written, and the error names them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import ledgermq
from ledgermq.broker.live_config import SAMPLE_MARKER
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    import argparse

__all__ = ["register", "sample_files", "samples_root", "write_samples"]

SAMPLE_DIRS: Final = ("conf", "deploy")
"""The folders written (the repository's names for them)."""

_SKIPPED: Final = frozenset({"__pycache__", ".DS_Store"})


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init-conf",
        help="write the sample configuration (one host; three machines) into DIR",
        description="Write the sample configuration shipped with LedgerMQ into DIR, in the "
        "layout the documentation names: DIR/conf/ (one host: namesrv.conf and RocketMQ's three "
        "DLedger replicas broker-n0..n2.conf) and DIR/deploy/ (three machines: deploy/conf/, "
        "the systemd units, the Grafana dashboard). The copies are yours to edit, and "
        "`ledgermq admin broker-config update` persists into them.",
    )
    init.add_argument("directory", metavar="DIR", help="where to write (made if missing)")
    init.add_argument(
        "--force", action="store_true", help="overwrite files that exist (default: refuse)"
    )
    init.set_defaults(handler=cmd_init_conf)


def samples_root() -> Path:
    """The folder holding ``conf/`` and ``deploy/``: the installed package's ``samples``, else
    the source tree's root.

    Raises:
        LedgerMQError: neither has them (a package built without its samples).
    """
    package = Path(ledgermq.__file__).resolve().parent
    for root in (package / "samples", package.parents[1]):
        if all((root / name).is_dir() for name in SAMPLE_DIRS):
            return root
    raise LedgerMQError(
        f"this LedgerMQ ({package}) was installed without its sample configuration "
        "(ledgermq/samples/): reinstall it from a wheel or sdist built by scripts/build-wheels"
    )


def sample_files(root: Path) -> list[Path]:
    """Every sample file under ``root``'s sample folders, relative to ``root``, sorted."""
    paths = [path for name in SAMPLE_DIRS for path in sorted((root / name).rglob("*"))]
    return [
        path.relative_to(root)
        for path in paths
        if path.is_file() and not _SKIPPED & set(path.relative_to(root).parts)
    ]


def operator_copy(data: bytes) -> bytes:
    """A sample's bytes without its ``ledgermq-sample:`` marker line (the copy is not one)."""
    lines = data.splitlines(keepends=True)
    marker = SAMPLE_MARKER.encode()
    return b"".join(line for line in lines if not line.lstrip(b"#! \t").startswith(marker))


def write_samples(directory: Path, *, force: bool = False) -> list[Path]:
    """Write the samples under ``directory``; the paths written, relative to it.

    Raises:
        LedgerMQError: a file would be overwritten without ``force`` (nothing is written), or
            one cannot be written.
    """
    root = samples_root()
    files = sample_files(root)
    if not force:
        existing = [str(f) for f in files if (directory / f).exists()]
        if existing:
            shown = ", ".join(existing[:3]) + (
                f" and {len(existing) - 3} more" if existing[3:] else ""
            )
            raise LedgerMQError(
                f"not written: {shown} already exist(s) under {directory} (--force overwrites)"
            )
    try:
        for relative in files:
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(operator_copy((root / relative).read_bytes()))
    except OSError as exc:
        raise LedgerMQError(f"cannot write the samples under {directory}: {exc}") from exc
    return files


def cmd_init_conf(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    written = write_samples(directory, force=args.force)
    print(f"wrote {len(written)} files under {directory}:")
    print("  conf/          one host: namesrv.conf and RocketMQ's three DLedger replicas")
    print("                 (broker-n0.conf ... broker-n2.conf)")
    print("  deploy/conf/   three machines: namesrv.conf and two groups of three replicas")
    print("                 (broker-a-n0.conf ... broker-b-n2.conf; edit the 10.0.0.x addresses)")
    print("  deploy/        systemd units and the Grafana dashboard beside them")
    print(f"one host: cd {directory} && ledgermq namesrv -c conf/namesrv.conf, then")
    print("          ledgermq broker -c conf/broker-n0.conf (and n1, n2), each in its own shell")
    return 0
