"""The quickstart's disk footprint: small sparse segments, and old data folders still open."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.main import main
from ledgermq.cli.quickstart import broker_configs
from ledgermq.store import LedgerStore

from .test_cli import _free_port_offset

if TYPE_CHECKING:
    from pathlib import Path

MIB = 1 << 20


def disk_bytes(path: Path) -> int:
    """Bytes of disk blocks (``st_blocks * 512``) of every file under ``path``."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def test_quickstart_uses_16_mib_segments(tmp_path: Path) -> None:
    for config in broker_configs(str(tmp_path)):
        assert config.mapped_file_size_commit_log == 16 * MIB
        assert config.index_file_size == 4 * MIB


def test_a_data_folder_of_an_earlier_quickstart_keeps_its_segment_sizes(tmp_path: Path) -> None:
    """Segment sizes cannot change over a store's life: a folder made with the old 64 MiB files
    must keep opening rather than be refused as damaged."""
    old = tmp_path / "n1" / "dledger-n1"
    with LedgerStore.open(old, data_segment_bytes=64 * MIB, index_segment_entries=131072) as s:
        s.append(term=1, body=b"made by an earlier quickstart")
    configs = {c.dleger_self_id: c for c in broker_configs(str(tmp_path))}
    assert configs["n1"].mapped_file_size_commit_log == 64 * MIB
    assert configs["n1"].index_file_size == 4 * MIB
    assert configs["n0"].mapped_file_size_commit_log == 16 * MIB


@pytest.mark.timeout(120)
def test_a_quickstart_takes_a_few_megabytes(tmp_path: Path) -> None:
    """It took 371 MB at start when every file was preallocated (three 64 MiB commit-log
    files, 6 MB per queue file and 34 MB of key index per replica)."""
    offset = _free_port_offset()
    args = ["quickstart", "--dir", str(tmp_path), "--port-offset", str(offset), "--run-for", "0.2"]
    assert main(args) == 0
    assert disk_bytes(tmp_path) < 16 * MIB
