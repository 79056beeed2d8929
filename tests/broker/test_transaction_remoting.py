"""Transactions at the remoting door, frame by frame (issue 16 section 3): a SEND_MESSAGE with
``TRAN_MSG=true`` answers like a send and stays invisible; END_TRANSACTION (37) with
RocketMQ's ``EndTransactionRequestHeader`` fields commits or rolls back, and refuses bad fields
with a remark; the master's CHECK_TRANSACTION_STATE (39) reaches a producer of the group that
heartbeated over its connection, with ``CheckTransactionStateRequestHeader``'s fields and the
half message (real topic) as its body, and the producer's one-way answer settles it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.net import ConnectionPool
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.message import decode_offset_message_id, decode_records
from ledgermq.wire.route import TopicConfig

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.net import Connection

pytestmark = pytest.mark.timeout(120)

TOPIC = "TxnT"


async def _half(cluster: Cluster, address: str, uniq: str) -> RemotingCommand:
    response = await cluster.send(
        address, TOPIC, b"half-" + uniq.encode(), queue_id=1,
        properties={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": uniq},
    )  # fmt: skip
    assert response.code == MQResponseCode.SUCCESS, response.remark
    assert response.ext_fields["transactionId"] == uniq
    assert response.ext_fields["queueId"] == "1"
    return response


def _end_fields(sent: RemotingCommand, flag: int, **extra: str) -> dict[str, str]:
    fields = {
        "producerGroup": "PG",
        "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": str(decode_offset_message_id(sent.ext_fields["msgId"])[2]),
        "commitOrRollback": str(flag),
        "fromTransactionCheck": "false",
        "msgId": sent.ext_fields["transactionId"],
        "transactionId": sent.ext_fields["transactionId"],
    }
    fields.update(extra)
    return fields


async def _bodies(cluster: Cluster, address: str) -> list[bytes]:
    response = await cluster.pull(address, TOPIC, 1, 0)
    if response.code != MQResponseCode.SUCCESS:
        return []
    return [m.body for m in decode_records(response.body)]


def test_end_transaction_fields_and_refusals(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        assert master.services is not None
        await master.services.admin.create_topic(TopicConfig(TOPIC, 2, 2))
        address = master.address
        committed = await _half(cluster, address, "u1")
        rolled = await _half(cluster, address, "u2")
        assert await _bodies(cluster, address) == []
        end = MQRequestCode.END_TRANSACTION
        bad_flag = await cluster.request(address, end, _end_fields(committed, 5))
        assert bad_flag.code == MQResponseCode.MESSAGE_ILLEGAL  # the caller's mistake
        assert "commitOrRollback" in (bad_flag.remark or "")
        nowhere = await cluster.request(
            address, end, _end_fields(committed, 8, commitLogOffset="7")
        )
        assert nowhere.code == MQResponseCode.SYSTEM_ERROR
        assert "half message" in (nowhere.remark or "")
        missing = _end_fields(committed, 8)
        del missing["commitLogOffset"]
        refused = await cluster.request(address, end, missing)
        assert refused.code != MQResponseCode.SUCCESS
        assert "commitLogOffset" in (refused.remark or "")
        other_topic = await cluster.request(address, end, _end_fields(committed, 8, topic="X"))
        assert other_topic.code == MQResponseCode.MESSAGE_ILLEGAL
        assert other_topic.remark == "topic 'X' is not the half message's"  # not naming its own
        assert await _bodies(cluster, address) == []  # nothing happened
        ok = await cluster.request(address, end, _end_fields(committed, 8, topic=TOPIC))
        assert ok.code == MQResponseCode.SUCCESS, ok.remark
        back = await cluster.request(address, end, _end_fields(rolled, 12))
        assert back.code == MQResponseCode.SUCCESS, back.remark
        unknown = await cluster.request(address, end, _end_fields(committed, 0))
        assert unknown.code == MQResponseCode.SUCCESS
        assert await _bodies(cluster, address) == [b"half-u1"]
        # a slave refuses: the producer goes to the master
        slave = next(b for b in cluster.brokers.values() if b is not master)
        on_slave = await cluster.request(slave.address, end, _end_fields(rolled, 12))
        assert on_slave.code == MQResponseCode.SERVICE_NOT_AVAILABLE

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=200)


def test_check_back_to_a_producer_of_the_group(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        assert master.services is not None
        await master.services.admin.create_topic(TopicConfig(TOPIC, 2, 2))
        address = master.address
        checks: asyncio.Queue[tuple[Connection, RemotingCommand]] = asyncio.Queue()

        def on_request(conn: Connection, command: RemotingCommand) -> None:
            if command.code == MQRequestCode.CHECK_TRANSACTION_STATE:
                checks.put_nowait((conn, command))

        producer = ConnectionPool(cluster.network, on_request)
        try:
            beat = {"clientID": "producer-1", "producerDataSet": [{"groupName": "PG"}],
                    "consumerDataSet": []}  # fmt: skip
            answer = await producer.request(
                address,
                _command(MQRequestCode.HEART_BEAT, {}, json.dumps(beat).encode()),
                5.0,
            )
            assert answer.code == MQResponseCode.SUCCESS
            sent = await _half(cluster, address, "u1")
            await asyncio.sleep(0.3)
            assert len(await master.services.transactions.check_pass()) == 1
            conn, check = await asyncio.wait_for(checks.get(), 5)
            assert check.is_oneway
            fields = check.ext_fields
            assert fields["tranStateTableOffset"] == sent.ext_fields["queueOffset"]
            assert fields["offsetMsgId"] == sent.ext_fields["msgId"]
            assert fields["commitLogOffset"] == str(
                decode_offset_message_id(sent.ext_fields["msgId"])[2]
            )
            assert (fields["msgId"], fields["transactionId"]) == ("u1", "u1")
            assert (fields["topic"], fields["brokerName"]) == (TOPIC, "broker-a")
            (message,) = decode_records(check.body)
            assert (message.topic, message.queue_id, message.body) == (TOPIC, 1, b"half-u1")
            assert message.properties["PGROUP"] == "PG"
            # the producer's answer: one-way, fromTransactionCheck, rollback
            answer_fields = _end_fields(sent, 12, fromTransactionCheck="true")
            conn.send_oneway(_command(MQRequestCode.END_TRANSACTION, answer_fields))
            for _ in range(100):
                if master.services.transactions.open_count() == 0:
                    break
                await asyncio.sleep(0.02)
            assert master.services.transactions.open_count() == 0
            assert await master.services.transactions.check_pass() == []
            assert await _bodies(cluster, address) == []
        finally:
            await producer.close()

    run_with_cluster(tmp_path, test, in_virtual_time=True, transaction_time_out=200)


def _command(code: int, fields: dict[str, str], body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, opaque=0, ext_fields=fields, body=body)
