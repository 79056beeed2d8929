"""Transactional messages through the service, no protocol (issue 16 section 3): half messages
invisible until committed, a commit delivered once, a rollback never, the check-back of open
ones, discarding after ``transactionCheckMax`` checks, refusals of bad input, and the state
surviving the master's loss (including a commit whose settlement was lost with it).

An in-process 3-replica group (``harness.Cluster``) with a short ``transactionTimeOut``; the
check passes are run by the tests (``check_pass``), the broker's own checker waits a minute.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import IllegalMessageError, InvalidArgumentError, NotFoundError
from ledgermq.broker.service.access import OPEN_ACCESS
from ledgermq.broker.service.message_writer import MessageWriter
from ledgermq.broker.service.send import SendRequest
from ledgermq.broker.service.transactions import (
    HALF_TOPIC,
    EndTransactionRequest,
    Resolution,
    TransactionCheck,
)
from ledgermq.broker.state.ops import TxnOp
from ledgermq.broker.state.transactions import TransactionTable
from ledgermq.messaging.consuming import PullQuery, QueueRef
from ledgermq.wire.message import (
    decode_offset_message_id,
    decode_records,
    encode_batch,
    encode_properties,
)
from ledgermq.wire.route import TopicConfig

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.broker.service.send import SendResult
    from ledgermq.broker.service.services import BrokerServices

pytestmark = pytest.mark.timeout(120)

CLIENT = "10.0.9.9:4321"
TIMEOUT_MS = 300


async def _services(cluster: Cluster, exclude: str | None = None) -> BrokerServices:
    master = await cluster.master(exclude=exclude)
    assert master.services is not None
    return master.services


def _request(props: dict[str, str], *, batch: bool = False) -> SendRequest:
    return SendRequest(
        producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=1,
        queue_id=1, sys_flag=0, born_timestamp=0, flag=0, encoded=encode_properties(props),
        reconsume_times=0, max_reconsume_times=None, batch=batch,
    )  # fmt: skip


async def _half(services: BrokerServices, uniq: str, **extra: str) -> SendResult:
    props = {"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": uniq, "TAGS": "t", **extra}
    return await services.send.send(_request(props), b"body-" + uniq.encode(), CLIENT)


def _end(result: SendResult, resolution: Resolution, **fields: object) -> EndTransactionRequest:
    offset = decode_offset_message_id(result.msg_ids[0])[2]
    values: dict[str, object] = {
        "commit_log_offset": offset,
        "resolution": resolution,
        "producer_group": "PG",
        "queue_offset": result.queue_offset,
        "msg_id": result.unique_key,
    }
    values.update(fields)
    return EndTransactionRequest(**values)  # type: ignore[arg-type]


async def _bodies(services: BrokerServices, topic: str = "T", queue_id: int = 1) -> list[bytes]:
    result = await services.pull.pull(PullQuery("C", QueueRef(topic, "", queue_id), 0))
    return [m.body for m in decode_records(result.stored)] if result.stored else []


async def _setup(services: BrokerServices) -> None:
    await services.admin.create_topic(TopicConfig("T", 2, 2))


def test_half_invisible_commit_once_rollback_never(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services = await _services(cluster)
        await _setup(services)
        committed = await _half(services, "u1")
        rolled = await _half(services, "u2")
        assert committed.queue_id == 1  # the real queue, as RocketMQ answers
        assert (committed.queue_offset, rolled.queue_offset) == (0, 1)  # in the half queue
        assert await _bodies(services) == []  # consumers never see half messages
        tx = services.transactions
        assert tx.open_count() == 2

        assert await tx.end(_end(committed, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        assert await _bodies(services) == [b"body-u1"]
        assert (
            await tx.end(_end(committed, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        )  # again: accepted
        assert (
            await tx.end(_end(rolled, Resolution.UNKNOWN), OPEN_ACCESS) == "unknown"
        )  # nothing happens
        assert await tx.end(_end(rolled, Resolution.ROLLBACK), OPEN_ACCESS) == "rollback"
        assert await _bodies(services) == [b"body-u1"]  # once; the rolled-back one never
        with pytest.raises(InvalidArgumentError, match="settled already"):
            await tx.end(_end(committed, Resolution.ROLLBACK), OPEN_ACCESS)
        with pytest.raises(InvalidArgumentError, match="settled already"):
            await tx.end(_end(rolled, Resolution.COMMIT), OPEN_ACCESS)
        assert tx.open_count() == 0
        (message,) = decode_records(
            (await services.pull.pull(PullQuery("C", QueueRef("T", "", 1), 0))).stored
        )
        assert message.properties["UNIQ_KEY"] == "u1"
        assert "TRAN_MSG" not in message.properties
        assert "REAL_TOPIC" not in message.properties
        # every replica applied the same settlements
        await asyncio.sleep(0.3)
        for broker in cluster.brokers.values():
            assert broker.state is not None
            assert broker.state.metadata.transactions.progress == 2
        # nothing left to check
        await asyncio.sleep(TIMEOUT_MS / 1000)
        assert await tx.check_pass() == []

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=TIMEOUT_MS)


def test_bad_requests_are_refused_and_lose_nothing(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services = await _services(cluster)
        await _setup(services)
        half = await _half(services, "u1")
        tx = services.transactions
        with pytest.raises(InvalidArgumentError, match="producer group"):
            await tx.end(_end(half, Resolution.COMMIT, producer_group="other"), OPEN_ACCESS)
        with pytest.raises(InvalidArgumentError, match="tranStateTableOffset"):
            await tx.end(_end(half, Resolution.COMMIT, queue_offset=7), OPEN_ACCESS)
        with pytest.raises(InvalidArgumentError, match="msgId"):
            await tx.end(_end(half, Resolution.COMMIT, msg_id="nope"), OPEN_ACCESS)
        with pytest.raises(NotFoundError):
            await tx.end(_end(half, Resolution.COMMIT, commit_log_offset=3), OPEN_ACCESS)
        # a normal message is no half message
        normal = await services.send.send(_request({"UNIQ_KEY": "n"}), b"n", CLIENT)
        with pytest.raises(NotFoundError, match="not a half message"):
            await tx.end(_end(normal, Resolution.COMMIT), OPEN_ACCESS)
        with pytest.raises(IllegalMessageError, match="delayed"):
            await _half(services, "u2", DELAY="2")
        props = encode_properties({"TRAN_MSG": "true"})
        body = encode_batch([(b"a", 0, props), (b"b", 0, props)])
        with pytest.raises(IllegalMessageError, match="batch"):
            await services.send.send(_request({}, batch=True), body, CLIENT)
        assert tx.open_count() == 1  # the half message is still there, open
        assert await tx.end(_end(half, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        assert await _bodies(services) == [b"n", b"body-u1"]

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=TIMEOUT_MS)


def test_check_back_then_commit_or_rollback(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services = await _services(cluster)
        await _setup(services)
        tx = services.transactions
        seen: list[TransactionCheck] = []

        def channel(check: TransactionCheck) -> bool:
            seen.append(check)
            return True

        tx.channels.append(channel)
        first = await _half(services, "u1")
        second = await _half(services, "u2", CHECK_IMMUNITY_TIME_IN_SECONDS="60")
        assert await tx.check_pass() == []  # too young
        await asyncio.sleep(TIMEOUT_MS / 1000 + 0.1)
        checks = await tx.check_pass()
        assert [c.transaction_id for c in checks] == ["u1"]  # u2 is immune for 60 s
        assert [c.transaction_id for c in seen] == ["u1"]
        check = seen[0]
        assert check.producer_group == "PG"
        assert (check.message.topic, check.message.queue_id) == ("T", 1)
        assert check.message.body == b"body-u1"
        assert check.queue_offset == first.queue_offset
        assert check.commit_log_offset == decode_offset_message_id(first.msg_ids[0])[2]
        assert services.transactions.open_count() == 2
        # the producer answers the check-back
        answer = EndTransactionRequest(
            check.commit_log_offset, Resolution.COMMIT, "PG", check.queue_offset,
            check.transaction_id, from_check=True,
        )  # fmt: skip
        assert await tx.end(answer, OPEN_ACCESS) == "commit"
        assert await _bodies(services) == [b"body-u1"]
        assert await tx.end(_end(second, Resolution.ROLLBACK), OPEN_ACCESS) == "rollback"
        await asyncio.sleep(TIMEOUT_MS / 1000)
        assert await tx.check_pass() == []
        assert await _bodies(services) == [b"body-u1"]

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=TIMEOUT_MS)


def test_discarded_after_max_checks(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        services = await _services(cluster)
        await _setup(services)
        tx = services.transactions
        half = await _half(services, "u1")
        await asyncio.sleep(TIMEOUT_MS / 1000 + 0.1)
        assert len(await tx.check_pass()) == 1  # nobody answers (no producer connected)
        assert len(await tx.check_pass()) == 1
        assert services.transactions.open_count() == 1
        assert await tx.check_pass() == []  # transactionCheckMax=2 reached: discarded
        assert services.transactions.open_count() == 0
        with pytest.raises(InvalidArgumentError, match="settled already"):
            await tx.end(_end(half, Resolution.COMMIT), OPEN_ACCESS)
        assert await _bodies(services) == []

    run_with_cluster(
        tmp_path,
        test,
        in_virtual_time=True,
        transaction_time_out=TIMEOUT_MS,
        transaction_check_max=2,
    )


def test_failover_keeps_settlements_counts_and_a_lost_commit(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        services = master.services
        assert services is not None
        await _setup(services)
        tx = services.transactions
        committed = await _half(services, "c")
        rolled = await _half(services, "r")
        lost = await _half(services, "lost")
        open_ = await _half(services, "open")
        await tx.end(_end(committed, Resolution.COMMIT), OPEN_ACCESS)
        await tx.end(_end(rolled, Resolution.ROLLBACK), OPEN_ACCESS)
        await asyncio.sleep(TIMEOUT_MS / 1000 + 0.1)
        assert [c.transaction_id for c in await tx.check_pass()] == ["lost", "open"]
        # a commit whose message was written but whose settlement died with the master
        half = tx._read_half(decode_offset_message_id(lost.msg_ids[0])[2])
        await tx._deliver(half)
        old = master.config.dleger_self_id
        await cluster.stop_broker(old)

        services = await _services(cluster, exclude=old)
        tx = services.transactions
        assert tx.open_count() == 2  # "lost" and "open"
        # "lost" is recognised as delivered: recorded, never delivered again, never checked
        checks = await tx.check_pass()
        assert [c.transaction_id for c in checks] == ["open"]
        assert services.transactions.open_count() == 1
        state = (await cluster.master(exclude=old)).state
        assert state is not None
        assert state.metadata.transactions.check_times(open_.queue_offset) == 2  # counted on
        with pytest.raises(InvalidArgumentError, match="settled already"):
            await tx.end(_end(rolled, Resolution.COMMIT), OPEN_ACCESS)
        assert (
            await tx.end(_end(lost, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        )  # no second copy
        assert await tx.end(_end(open_, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        assert sorted(await _bodies(services)) == [b"body-c", b"body-lost", b"body-open"]
        # the new master's half queue goes on after the old one's offsets
        fresh = await _half(services, "fresh")
        assert fresh.queue_offset == 4
        assert await tx.end(_end(fresh, Resolution.COMMIT), OPEN_ACCESS) == "commit"
        assert b"body-fresh" in await _bodies(services)

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=TIMEOUT_MS)


def test_table_apply_and_snapshot() -> None:
    table = TransactionTable()
    table.apply(TxnOp(((1, "check"), (1, "check"), (2, "rollback"), (0, "commit"))))
    assert table.progress == 1
    assert table.check_times(1) == 2
    assert table.outcome(0) == "settled"
    assert table.outcome(2) == "rollback"
    table.apply(TxnOp(((2, "commit"), (1, "discard"))))  # the first settlement counts
    assert (table.progress, table.settled, table.checks) == (3, {}, {})
    table.apply(TxnOp(((5, "commit"), (4, "check"))))
    again = TransactionTable.restore(table.snapshot())
    assert (again.progress, again.settled, again.checks) == (3, {5: "commit"}, {4: 1})
    assert TransactionTable.restore(None).progress == 0
    with pytest.raises(ValueError, match="unknown transaction action"):
        table.apply(TxnOp(((9, "maybe"),)))
    assert table.outcome(9) is None  # a malformed op changes nothing
    assert HALF_TOPIC == "RMQ_SYS_TRANS_HALF_TOPIC"


def test_a_half_message_no_commit_could_store_is_discarded_at_once(tmp_path: Path) -> None:
    """Issue 25 item 7: a half message whose real topic no record can hold (132 bytes) or no
    queue can hold (``%RETRY%orders.v1``) was checked back again and again, and every commit
    its producer answered failed; it is discarded on the first pass (ERROR, metric), and the
    good half message next to it is checked back as usual."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        services = master.services
        state = master.state
        assert services is not None
        assert state is not None
        await _setup(services)
        tx = services.transactions
        writer = MessageWriter(state)
        for n, topic in enumerate(("%RETRY%" + "g" * 125, "%RETRY%orders.v1")):
            props = {"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": f"bad{n}",
                     "REAL_TOPIC": topic, "REAL_QID": "1"}  # fmt: skip
            await writer.put(HALF_TOPIC, 0, [(b"poison", 0, encode_properties(props))])
        await _half(services, "good")
        await asyncio.sleep(TIMEOUT_MS / 1000 + 0.1)
        checks = await tx.check_pass()
        assert [c.transaction_id for c in checks] == ["good"]
        assert state.stats.scheduler_dropped == {"transaction": 2}
        assert tx.open_count() == 1

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=TIMEOUT_MS)
