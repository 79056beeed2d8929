"""The remoting door of POP (RocketMQ 5's POP_MESSAGE 200050, ACK_MESSAGE 200051,
CHANGE_MESSAGE_INVISIBLETIME 200053) against an in-process 3-replica group: what a client sends
and reads, the response codes of refusals, and that the door agrees with the service."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from pathlib import Path

    from ledgermq.wire import RemotingCommand

pytestmark = pytest.mark.timeout(120)


async def _pop(cluster: Cluster, address: str, **fields: str) -> RemotingCommand:
    header = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "-1",
        "maxMsgNums": "32",
        "invisibleTime": "400",
        "pollTime": "0",
        "bornTime": "0",
        "initMode": "0",
    }
    header.update(fields)
    return await cluster.request(address, MQRequestCode.POP_MESSAGE, header)


def test_pop_ack_change_and_redelivery_over_remoting(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        address = master.address
        for i in range(3):
            sent = await cluster.send(address, "T", b"m%d" % i, properties={"TAGS": "a"})
            assert sent.code == MQResponseCode.SUCCESS, sent.remark
        popped = await _pop(cluster, address)
        assert popped.code == MQResponseCode.SUCCESS, popped.remark
        assert popped.ext_fields["invisibleTime"] == "400"
        assert int(popped.ext_fields["popTime"]) > 0
        messages = decode_records(popped.body)
        assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
        assert [m.reconsume_times for m in messages] == [0, 0, 0]
        assert [m.queue_offset for m in messages] == [0, 1, 2]
        handles = [m.properties["POP_CK"] for m in messages]
        assert all(h.split(" ")[5] == "broker-a" for h in handles)

        nothing = await _pop(cluster, address)
        assert nothing.code == MQResponseCode.PULL_NOT_FOUND

        def ack(handle: str) -> Awaitable[RemotingCommand]:
            fields = {"consumerGroup": "G", "topic": "T", "queueId": "0", "offset": "0"}
            return cluster.request(
                address, MQRequestCode.ACK_MESSAGE, {**fields, "extraInfo": handle}
            )

        assert (await ack(handles[1])).code == MQResponseCode.SUCCESS
        changed = await cluster.request(
            address,
            MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME,
            {"consumerGroup": "G", "topic": "T", "queueId": "0", "offset": "2",
             "extraInfo": handles[2], "invisibleTime": "5000"},
        )  # fmt: skip
        assert changed.code == MQResponseCode.SUCCESS, changed.remark
        assert changed.ext_fields["invisibleTime"] == "5000"
        new_handle = changed.ext_fields["extraInfo"]
        assert new_handle != handles[2]
        stale = await ack(handles[2])
        assert stale.code == MQResponseCode.NO_MESSAGE
        assert "current delivery" in (stale.remark or "")

        await asyncio.sleep(0.5)
        again = await _pop(cluster, address)
        assert again.code == MQResponseCode.SUCCESS
        redelivered = decode_records(again.body)
        assert [(m.body, m.reconsume_times) for m in redelivered] == [(b"m0", 1)]
        assert (await ack(redelivered[0].properties["POP_CK"])).code == MQResponseCode.SUCCESS
        assert (await ack(new_handle)).code == MQResponseCode.SUCCESS
        await asyncio.sleep(0.5)
        assert (await _pop(cluster, address)).code == MQResponseCode.PULL_NOT_FOUND

        # long polling: the pop is answered when a message arrives
        waiting = asyncio.ensure_future(_pop(cluster, address, pollTime="4000"))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await cluster.send(address, "T", b"late", properties={"TAGS": "b"})
        late = await asyncio.wait_for(waiting, 4)
        assert [m.body for m in decode_records(late.body)] == [b"late"]

        # a tag filter: "late" has tag b
        await cluster.send(address, "T", b"tagged-a", properties={"TAGS": "a"})
        await cluster.send(address, "T", b"tagged-b", properties={"TAGS": "b"})
        only_b = await _pop(cluster, address, consumerGroup="F", expType="TAG", exp="b")
        assert [m.body for m in decode_records(only_b.body)] == [b"late", b"tagged-b"]

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_remoting_refusals(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        await cluster.send(master.address, "T", b"x")
        missing = await _pop(cluster, master.address, topic="Nope")
        assert missing.code == MQResponseCode.TOPIC_NOT_EXIST
        no_count = await cluster.request(
            master.address, MQRequestCode.POP_MESSAGE, {"consumerGroup": "G", "topic": "T"}
        )
        assert no_count.code == MQResponseCode.SYSTEM_ERROR
        assert "maxMsgNums" in (no_count.remark or "")
        bad = await cluster.request(
            master.address,
            MQRequestCode.ACK_MESSAGE,
            {"consumerGroup": "G", "topic": "T", "queueId": "0", "offset": "0",
             "extraInfo": "nonsense"},
        )  # fmt: skip
        assert bad.code == MQResponseCode.NO_MESSAGE
        assert "not a receipt handle" in (bad.remark or "")
        for broker in cluster.brokers.values():
            if broker is not master:
                refused = await _pop(cluster, broker.address)
                assert refused.code == MQResponseCode.SERVICE_NOT_AVAILABLE
                assert "slave" in (refused.remark or "")

    run_with_cluster(tmp_path, test, in_virtual_time=True)
