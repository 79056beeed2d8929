"""FIFO over the remoting door (issue 16 section 3), against an in-process 3-replica group: a
topic's message type set by UPDATE_AND_CREATE_TOPIC's ``attributes`` (RocketMQ's
``+message.type=FIFO``; a bad one refused); remoting producers send to it as before (an orderly
selector's queue, with or without a sharding key: RocketMQ checks message types at its proxy,
not at the broker); an orderly consumer group's POP_MESSAGE gives each message group, and the
queue's ungrouped messages, in order, nothing more while they are out, and the unacknowledged
ones again (reconsume times 1) before anything after them."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

from .harness import run_with_cluster
from .test_pop_remoting import _pop

if TYPE_CHECKING:
    from pathlib import Path

    from .harness import Cluster

pytestmark = pytest.mark.timeout(120)


def _topic_fields(attributes: str) -> dict[str, str]:
    return {
        "topic": "F",
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
        "attributes": attributes,
    }


def test_fifo_topic_and_orderly_pop_over_remoting(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        address = master.address
        create = MQRequestCode.UPDATE_AND_CREATE_TOPIC
        bad = await cluster.request(address, create, _topic_fields("+message.type=ORDERED"))
        assert bad.code != MQResponseCode.SUCCESS
        assert "message.type may be" in (bad.remark or "")
        made = await cluster.request(address, create, _topic_fields("+message.type=FIFO"))
        assert made.code == MQResponseCode.SUCCESS, made.remark
        assert master.state is not None
        topic = master.state.topics.find("F")
        assert topic is not None
        assert topic.attributes == {"message.type": "FIFO"}
        group = {"groupName": "G", "consumeMessageOrderly": True, "retryMaxTimes": 5}
        put = await cluster.request(
            address,
            MQRequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            {},
            json.dumps(group).encode(),
        )
        assert put.code == MQResponseCode.SUCCESS, put.remark

        # an orderly selector's sends to queue 1: two without a key, one keyed, one without
        for body, props in [(b"n0", {}), (b"n1", {}), (b"k0", {"__SHARDINGKEY": "k"}),
                            (b"n2", {})]:  # fmt: skip
            sent = await cluster.send(address, "F", body, queue_id=1, properties=props)
            assert sent.code == MQResponseCode.SUCCESS, sent.remark

        popped = await _pop(cluster, address, queueId="1", topic="F")
        assert popped.code == MQResponseCode.SUCCESS, popped.remark
        messages = decode_records(popped.body)
        assert [m.body for m in messages] == [b"n0", b"n1", b"k0", b"n2"]
        handles = {m.body: m.properties["POP_CK"] for m in messages}
        nothing = await _pop(cluster, address, queueId="1", topic="F")
        assert nothing.code == MQResponseCode.PULL_NOT_FOUND  # every group is out

        ack = await cluster.request(
            address, MQRequestCode.ACK_MESSAGE,
            {"consumerGroup": "G", "topic": "F", "queueId": "1", "offset": "1",
             "extraInfo": handles[b"n1"]},
        )  # fmt: skip
        assert ack.code == MQResponseCode.SUCCESS, ack.remark
        await asyncio.sleep(0.5)  # the rest expires unacknowledged
        again = await _pop(cluster, address, queueId="1", topic="F", invisibleTime="5000")
        assert again.code == MQResponseCode.SUCCESS, again.remark
        back = decode_records(again.body)
        assert [(m.body, m.reconsume_times) for m in back] == [(b"n0", 1), (b"k0", 1), (b"n2", 1)]

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_pop_with_order_true_is_fifo_for_a_group_that_is_not_orderly(tmp_path: Path) -> None:
    """RocketMQ's orderly pop consumer asks with ``order=true`` whatever its group's settings:
    that receive gets a queue's messages in order and nothing more of it while they are out.
    Without ``order`` the same group's next pop gets the next message."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        address = master.address
        for body in (b"a0", b"a1", b"a2"):
            sent = await cluster.send(address, "T", body, queue_id=0)
            assert sent.code == MQResponseCode.SUCCESS, sent.remark

        async def pop(group: str, **fields: str) -> list[bytes]:
            reply = await _pop(
                cluster, address, consumerGroup=group, queueId="0", maxMsgNums="1",
                invisibleTime="60000", **fields,
            )  # fmt: skip
            if reply.code == MQResponseCode.PULL_NOT_FOUND:
                return []
            assert reply.code == MQResponseCode.SUCCESS, reply.remark
            return [m.body for m in decode_records(reply.body)]

        assert await pop("ordered", order="true") == [b"a0"]
        assert await pop("ordered", order="true") == []  # a0 is out: the queue waits for it
        assert await pop("plain", order="false") == [b"a0"]
        assert await pop("plain") == [b"a1"]  # no order asked: the next one
        bad = await _pop(cluster, address, consumerGroup="x", queueId="0", order="maybe")
        assert bad.code != MQResponseCode.SUCCESS
        assert "order" in (bad.remark or "")

    run_with_cluster(tmp_path, test, in_virtual_time=True)
