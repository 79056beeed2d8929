"""A replica whose disk fills up stops for good (fail-stop) with exit status 74, and never
answers a pull as if its queues were empty meanwhile. Real ``ledgermq broker`` processes; the
failing replica's store is on a tmpfs that is shrunk under it.

Select with ``-m integration``; needs root to mount a tmpfs (skipped otherwise).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.serving import EXIT_STORE_FAILED
from ledgermq.errors import LedgerMQError
from ledgermq.testing.disk import TmpfsUnavailableError, resize_tmpfs, tmpfs, used_bytes
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire import RemotingCommand

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUP = "broker-a"
FAILING = "n2"
TOPIC = "Full"
_MIB = 1 << 20


@pytest.fixture
def failing_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs where ``broker_clusters`` puts replica n2's store (cluster 0), unmounted at the
    end whatever happens (after the cluster's processes are killed: this fixture is set up
    first, so it is torn down last)."""
    try:
        with tmpfs(tmp_path / "cluster0" / GROUP / FAILING, 512 * _MIB) as mount_point:
            yield mount_point
    except TmpfsUnavailableError as exc:
        pytest.skip(str(exc))


def _pull(cluster: BrokerCluster, node: str, offset: int) -> RemotingCommand:
    return cluster.request(
        cluster.address(GROUP, node),
        MQRequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "watcher",
            "topic": TOPIC,
            "queueId": "0",
            "queueOffset": str(offset),
            "maxMsgNums": "1",
            "sysFlag": "4",
            "commitOffset": "-1",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        },
        timeout_s=3.0,
    )


def _says_nothing(code: int, messages: int) -> bool:
    """A pull answer that says there is no message at the offset asked (yet)."""
    return code in (
        MQResponseCode.PULL_NOT_FOUND,
        MQResponseCode.PULL_RETRY_IMMEDIATELY,
        MQResponseCode.PULL_OFFSET_MOVED,
    ) or (code == MQResponseCode.SUCCESS and not messages)


def failed(cluster: BrokerCluster) -> bool:
    """Whether n2 said its store failed (it logs CRITICAL) or is gone."""
    return "CRITICAL" in cluster.log_tail(GROUP, FAILING, 200) or not cluster.is_running(
        GROUP, FAILING
    )


def test_a_replica_whose_disk_fills_up_exits_74_and_never_serves_empty_queues(
    failing_disk: Path, broker_clusters: Callable[..., BrokerCluster]
) -> None:
    from ledgermq.client import Message, SyncAdmin, SyncProducer
    from ledgermq.testing.child_process import wait_until

    cluster = broker_clusters(
        replicas=3,
        # n0 leads, so that the full disk is a slave's (the case found); no forced deletion
        # of committed files, which would make room instead of failing
        extra_settings={"preferredLeaderId": "n0", "cleanFileForciblyEnable": "false"},
    )
    cluster.wait_routable()
    assert wait_until(lambda: cluster.master(GROUP) == "n0", 30.0), cluster.log_tails()
    namesrv = cluster.namesrv_addr
    with SyncAdmin(namesrv) as admin:
        admin.create_topic(TOPIC, 1)
        admin.wait_for_route(TOPIC)

    answers: list[tuple[int, int, int, bool]] = []
    """(queue offset asked, response code, messages, whether n2 had served that offset
    before) of every pull n2 answered."""
    after_failure: list[tuple[int, int, int]] = []
    """(queue offset asked, response code, messages) of the pulls n2 answered once it had
    logged its store failure, all for acknowledged messages."""
    served = 0
    """Queue offsets below this are stored on n2 (it served the message at served - 1)."""

    def watch(*also: int, failed_before: bool = False) -> None:
        """Ask n2 for messages it has served before, the next one, and ``also``."""
        nonlocal served
        for offset in sorted({0, max(0, served - 1), served, *also}):
            try:
                response = _pull(cluster, FAILING, offset)
            except LedgerMQError:
                continue  # gone, or going: no answer is no lie
            found = len(decode_records(response.body)) if response.code == 0 else 0
            answers.append((offset, response.code, found, offset < served))
            if failed_before:
                after_failure.append((offset, response.code, found))
            if found:
                served = max(served, offset + 1)

    with SyncProducer("filler", namesrv) as producer:
        for i in range(8):
            assert producer.send(TOPIC, b"first %d" % i, keys=f"k{i}").ok

        def served_once() -> bool:
            watch()
            return served > 0

        assert wait_until(served_once, 15.0), cluster.log_tails()

        # Leave n2 about 3 MiB before its store refuses appends (at 90 % of the disk).
        resize_tmpfs(failing_disk, int(used_bytes(failing_disk) / 0.85))
        body = b"x" * (64 << 10)
        acknowledged = 8
        for _ in range(200):  # 100 MiB at most
            if not cluster.is_running(GROUP, FAILING) or failed(cluster):
                break
            result = producer.send_batch(TOPIC, [Message(body, keys=f"b{acknowledged}")] * 8)
            assert result.ok
            acknowledged += 8
            watch()
        assert failed(cluster), f"n2 took {acknowledged} messages on a small disk"
        # n2 has failed: watch it until it is gone (15 s at most)
        deadline = time.monotonic() + 15
        while cluster.is_running(GROUP, FAILING) and time.monotonic() < deadline:
            watch(acknowledged - 1, failed_before=True)  # one n2 never had
            time.sleep(0.1)

    # Never "nothing" for a message n2 had served, nor, once its store had failed, for any
    # acknowledged message (the bug: PULL_NOT_FOUND for every message it had not dispatched
    # yet, for as long as it ran). An error is fine: the client tries again or elsewhere.
    lies = [a[:3] for a in answers if a[3] and _says_nothing(a[1], a[2])]
    lies += [a for a in after_failure if _says_nothing(a[1], a[2])]
    assert not lies, f"n2 answered 'nothing' for messages the group holds: {lies}"
    # What it answers instead, until it exits: SERVICE_NOT_AVAILABLE.
    assert all(a[1] == MQResponseCode.SERVICE_NOT_AVAILABLE for a in after_failure), (
        f"n2 answered after its store failed: {after_failure}"
    )
    assert any(a[1] == MQResponseCode.SUCCESS for a in answers)
    assert not cluster.is_running(GROUP, FAILING), (
        f"n2 still runs 15 s after its store failed:\n{cluster.log_tail(GROUP, FAILING)}"
    )
    assert cluster.returncode(GROUP, FAILING) == EXIT_STORE_FAILED
    log = cluster.log_tail(GROUP, FAILING, 60)
    assert "CRITICAL" in log
    assert f"exit status {EXIT_STORE_FAILED}" in log
    # The other replicas go on: every acknowledged message is there.
    end = cluster.request(
        cluster.address(GROUP, "n0"),
        MQRequestCode.GET_MAX_OFFSET,
        {"topic": TOPIC, "queueId": "0"},
    )
    assert int(end.ext_fields["offset"]) == acknowledged
