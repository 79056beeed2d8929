"""``ledgermq ledger serve`` whose disk fills up stops with exit status 74 (EX_IOERR), so that a
supervisor restarts it. A real process on a tmpfs; ``-m integration``, needs root."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.serving import EXIT_STORE_FAILED
from ledgermq.errors import LedgerMQError
from ledgermq.testing.child_process import wait_until
from ledgermq.testing.disk import TmpfsUnavailableError, resize_tmpfs, tmpfs, used_bytes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from ledgermq.testing.processes import ReplicaGroup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def store_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs under the store of ``replica_groups``' first group; set up before the group,
    so unmounted after its processes are killed, whatever happens."""
    try:
        with tmpfs(tmp_path / "group0" / "store", 256 << 20) as mount_point:
            yield mount_point
    except TmpfsUnavailableError as exc:
        pytest.skip(str(exc))


def test_a_replica_whose_disk_fills_up_exits_74(
    store_disk: Path, replica_groups: Callable[..., ReplicaGroup]
) -> None:
    group = replica_groups(n=1)
    group.start_all()
    group.wait_for_leader()
    client = group.client(retry_timeout_s=2.0)
    client.append(b"first")
    resize_tmpfs(store_disk, int(used_bytes(store_disk) / 0.85))  # ~3 MiB to the 90 % mark

    def fill() -> None:
        for _ in range(200):  # 50 MiB at most
            client.append_batch([b"x" * (64 << 10)] * 4)

    with pytest.raises(LedgerMQError):
        fill()
    assert wait_until(lambda: not group.is_running("n0"), 15.0), group.log_tail("n0")
    assert group.exit_code("n0") == EXIT_STORE_FAILED
    log = group.log_tail("n0")
    assert "CRITICAL" in log
    assert f"exit status {EXIT_STORE_FAILED}" in log
