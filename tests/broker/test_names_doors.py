"""Names at the remoting door (issue 25, items 1, 7, 12, 17 and 19): every topic and group a
request names is checked with RocketMQ's rules before anything is committed, heartbeats are
bounded, offsets name real queues, and producers cannot write the broker's own topics.

Before the fix a consumer group named ``orders.v1`` (or a 125-character one) was registered by its
heartbeat and its first send-back committed a record for ``%DLQ%orders.v1`` that every replica's
dispatcher then refused for ever; these tests would have committed it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_offset_message_id

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer

pytestmark = pytest.mark.timeout(90)

LONG_GROUP = "g" * 125
"""Legal characters, but ``%RETRY%`` + it is 132 characters: no valid topic (item 7)."""


def _heartbeat(
    consumers: dict[str, list[str]], producers: tuple[str, ...] = (), client: str = "c1"
) -> bytes:
    data: dict[str, Any] = {
        "clientID": client,
        "producerDataSet": [{"groupName": g} for g in producers],
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": t, "subString": "*"} for t in topics],
            }
            for group, topics in consumers.items()
        ],
    }
    return json.dumps(data).encode()


def _end_index(broker: BrokerServer) -> int:
    return broker.ledger.store.end_index


async def _settled(cluster: Cluster, master: BrokerServer) -> int:
    """The master's last ledger index once it stops moving (system topics made at election)."""
    last = -2
    while (now := _end_index(master)) != last:
        last = now
        await asyncio.sleep(0.3)
    return last


async def _everything_before_is_applied(
    cluster: Cluster, master: BrokerServer, marker: str
) -> None:
    """A positive control for "nothing was committed": a topic made after the refused requests.
    Once the master has applied it, it has applied every metadata op proposed before it (one
    log, applied in order), so what is absent then was never proposed; a fixed sleep instead
    would pass vacuously if the unwanted op only came later."""
    created = await cluster.request(
        master.address, MQRequestCode.UPDATE_AND_CREATE_TOPIC,
        {"topic": marker, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"},
    )  # fmt: skip
    assert created.code == MQResponseCode.SUCCESS, created.remark
    state = master.state
    assert state is not None
    for _ in range(200):
        if state.topics.find(marker) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the marker topic {marker} was not applied within 10 s")


def test_group_orders_v1_is_refused_at_heartbeat_and_send_back(tmp_path: Path) -> None:
    """Item 1: the heartbeat and the send-back (delayLevel -1, straight to ``%DLQ%``) of group
    ``orders.v1`` are refused with INVALID_PARAMETER naming the rule, and nothing is committed:
    no group, no retry or dead-letter topic, no record."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        sent = await cluster.send(master.address, "Orders", b"order-1")
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        offset = decode_offset_message_id(sent.ext_fields["msgId"])[1]
        before = await _settled(cluster, master)

        beat = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=_heartbeat({"orders.v1": ["Orders"]})
        )
        assert beat.code == MQResponseCode.INVALID_PARAMETER, beat.remark
        assert "'orders.v1' may contain only the characters" in (beat.remark or "")

        back = await cluster.request(
            master.address,
            MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(offset), "group": "orders.v1", "delayLevel": "-1",
             "originMsgId": "", "originTopic": "Orders"},
        )  # fmt: skip
        assert back.code == MQResponseCode.INVALID_PARAMETER, back.remark
        assert "orders.v1" in (back.remark or "")

        await _everything_before_is_applied(cluster, master, "AfterOrdersV1")
        state = master.state
        assert state is not None
        assert "orders.v1" not in state.metadata.groups
        assert state.topics.find("%DLQ%orders.v1") is None
        assert state.topics.find("%RETRY%orders.v1") is None
        assert _end_index(master) == before + 1  # nothing was committed but the marker topic
        # every replica goes on applying: a later message is stored and readable
        later = await cluster.send(master.address, "Orders", b"order-2")
        assert later.code == MQResponseCode.SUCCESS, later.remark

    run_with_cluster(tmp_path, test)


def test_a_group_whose_retry_topic_is_too_long_is_refused(tmp_path: Path) -> None:
    """Item 7 (door): a 125-character group (its retry topic would be 132 characters) is
    refused at the heartbeat, at a send-back and at a pull, and no retry topic is created."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        sent = await cluster.send(master.address, "Long", b"x")
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        offset = decode_offset_message_id(sent.ext_fields["msgId"])[1]

        beat = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=_heartbeat({LONG_GROUP: ["Long"]})
        )
        assert beat.code == MQResponseCode.INVALID_PARAMETER, beat.remark
        assert "at most 120" in (beat.remark or "")
        back = await cluster.request(
            master.address,
            MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(offset), "group": LONG_GROUP, "delayLevel": "0"},
        )
        assert back.code == MQResponseCode.INVALID_PARAMETER, back.remark
        pulled = await cluster.pull(master.address, "Long", 0, 0, group=LONG_GROUP)
        assert pulled.code == MQResponseCode.INVALID_PARAMETER, pulled.remark
        await _everything_before_is_applied(cluster, master, "AfterLongGroup")
        state = master.state
        assert state is not None
        assert LONG_GROUP not in state.metadata.groups
        assert state.topics.find("%RETRY%" + LONG_GROUP) is None
        # a group of 120 characters is the longest that is taken
        ok = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=_heartbeat({"g" * 120: ["Long"]})
        )
        assert ok.code == MQResponseCode.SUCCESS, ok.remark

    run_with_cluster(tmp_path, test)


def test_heartbeats_are_bounded_and_checked(tmp_path: Path) -> None:
    """Item 12: a heartbeat naming more groups than ``heartbeatMaxGroups`` or carrying more
    subscriptions than ``heartbeatMaxSubscriptions``, or naming a bad topic, is refused whole
    (nothing registered, nothing created); ``autoCreateGroupMax`` stops automatic creation."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        state = master.state
        assert state is not None

        async def beat(body: bytes) -> Any:
            return await cluster.request(master.address, MQRequestCode.HEART_BEAT, body=body)

        many_groups = await beat(_heartbeat({f"G{i}": ["T"] for i in range(5)}))
        assert many_groups.code == MQResponseCode.INVALID_PARAMETER, many_groups.remark
        assert "heartbeatMaxGroups" in (many_groups.remark or "")
        many_subs = await beat(_heartbeat({"G": [f"T{i}" for i in range(11)]}))
        assert many_subs.code == MQResponseCode.INVALID_PARAMETER, many_subs.remark
        assert "heartbeatMaxSubscriptions" in (many_subs.remark or "")
        bad_topic = await beat(_heartbeat({"G": ["bad/topic"]}))
        assert bad_topic.code == MQResponseCode.INVALID_PARAMETER, bad_topic.remark
        bad_producer = await beat(_heartbeat({}, producers=("pg.v1",)))
        assert bad_producer.code == MQResponseCode.INVALID_PARAMETER, bad_producer.remark
        # one client's groups count across its heartbeats (until they expire)
        for i in range(3):
            answer = await beat(_heartbeat({f"H{i}": ["T"]}, client="spread"))
            assert answer.code == MQResponseCode.SUCCESS, answer.remark
        one_more = await beat(_heartbeat({"H3": ["T"], "H4": ["T"]}, client="spread"))
        assert one_more.code == MQResponseCode.INVALID_PARAMETER, one_more.remark
        assert "member of 5 consumer groups" in (one_more.remark or "")

        # within the bounds: taken, and the group and its retry topic are made
        within = await beat(_heartbeat({"G": [f"T{i}" for i in range(10)]}, producers=("P",)))
        assert within.code == MQResponseCode.SUCCESS, within.remark
        await _everything_before_is_applied(cluster, master, "AfterBounds")
        assert not {"G0", "G1", "G2"} & set(state.metadata.groups)
        assert "G" in state.metadata.groups
        assert state.topics.find("%RETRY%G") is not None

    run_with_cluster(tmp_path, test, heartbeat_max_groups=4, heartbeat_max_subscriptions=10)


def test_auto_created_groups_stop_at_the_bound(tmp_path: Path) -> None:
    """Item 12: once the broker holds ``autoCreateGroupMax`` groups, a heartbeat's new group is
    not created (the heartbeat is still answered: creation is the broker's side effect)."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        state = master.state
        assert state is not None
        await asyncio.sleep(0.3)
        start = len(state.metadata.groups)
        bound = start + 2
        state.topics.reconfigure(dataclasses.replace(state.config, auto_create_group_max=bound))
        for i in range(5):
            answer = await cluster.request(
                master.address, MQRequestCode.HEART_BEAT, body=_heartbeat({f"New{i}": ["T"]})
            )
            assert answer.code == MQResponseCode.SUCCESS, answer.remark
        await _everything_before_is_applied(cluster, master, "AfterAutoCreated")
        assert len(state.metadata.groups) == bound

    run_with_cluster(tmp_path, test)


def test_offsets_of_queues_the_topic_does_not_have_are_refused(tmp_path: Path) -> None:
    """Item 17: UPDATE_CONSUMER_OFFSET for queue ids -1, -2147483648, 2147483647 (and one past
    the topic's queues) is refused as a pull is, and nothing is stored."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        sent = await cluster.send(master.address, "Q", b"x")
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        state = master.state
        assert state is not None
        config = state.topics.find("Q")
        assert config is not None
        for queue_id in (-1, -2147483648, 2147483647, config.read_queue_nums):
            update = await cluster.request(
                master.address, MQRequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "Q", "queueId": str(queue_id),
                 "commitOffset": "1"},
            )  # fmt: skip
            assert update.code == MQResponseCode.INVALID_PARAMETER, (queue_id, update.remark)
            assert "queueId" in (update.remark or ""), update.remark
        bad_group = await cluster.request(
            master.address, MQRequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "cg.v1", "topic": "Q", "queueId": "0", "commitOffset": "1"},
        )  # fmt: skip
        assert bad_group.code == MQResponseCode.INVALID_PARAMETER, bad_group.remark
        good = await cluster.request(
            master.address, MQRequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "cg", "topic": "Q", "queueId": "0", "commitOffset": "1"},
        )  # fmt: skip
        assert good.code == MQResponseCode.SUCCESS, good.remark
        assert state.metadata.offsets.get(("Q", "cg")) == {0: 1}
        assert state.metadata.offset("cg.v1", "Q", 0) is None

    run_with_cluster(tmp_path, test)


@pytest.mark.parametrize(
    "topic",
    ["SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC",
     "RMQ_SYS_TRANS_OP_HALF_TOPIC"],
)  # fmt: skip
def test_producers_cannot_send_into_system_topics(tmp_path: Path, topic: str) -> None:
    """Item 19: a producer's send into a topic only the broker writes is NO_PERMISSION (as
    RocketMQ's ``isNotAllowedSendTopic``), nothing stored; the broker's own writes there (a
    delayed message) go on."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        before = await _settled(cluster, master)
        refused = await cluster.send(master.address, topic, b"x")
        assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
        assert "forbidden" in (refused.remark or "")
        assert _end_index(master) == before
        delayed = await cluster.send(master.address, "D", b"later", properties={"DELAY": "1"})
        assert delayed.code == MQResponseCode.SUCCESS, delayed.remark

    run_with_cluster(tmp_path, test)
