"""What each request needs under the broker's ACL, frame by frame (issue 25 items 2-5 and 11),
over the in-process cluster (``tests/broker/harness.py``) with ``aclEnable``.

Two tenants: ``a-*`` accounts own TopicA (and group a-group), ``b-owner`` owns TopicB (and
b-group, producer group b-tx). Every test is an attack an outside tester made with a-accounts
on b's resources, and the owner's own request that must still work.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.net import ConnectionPool
from ledgermq.security.acl.signature import sign_request
from ledgermq.security.acl.strong import sign_strong
from ledgermq.testing import virtual_time
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.message import decode_offset_message_id, encode_properties
from ledgermq.wire.route import TopicConfig
from tests.broker.harness import Cluster

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer
    from ledgermq.net import Connection

pytestmark = pytest.mark.timeout(120)

ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
  - accessKey: a-producer
    secretKey: a-producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicA=PUB]
  - accessKey: a-consumer
    secretKey: a-consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicA=SUB]
    groupPerms: [a-group=SUB]
  - accessKey: b-owner
    secretKey: b-owner-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [TopicB=PUB|SUB]
    groupPerms: [b-group=SUB]
"""
SECRETS = {
    "ops-admin": "ops-admin-secret",
    "a-producer": "a-producer-secret",
    "a-consumer": "a-consumer-secret",
    "b-owner": "b-owner-secret",
}
C = MQRequestCode


def _run(
    tmp: Path, test: Callable[[Cluster, BrokerServer], Awaitable[None]], *, strong: bool = False
) -> None:
    acl = tmp / "plain_acl.yml"
    acl.write_text(ACL)

    async def main() -> None:
        cluster = Cluster(
            tmp,
            acl_enable=True,
            acl_file_path=str(acl),
            acl_access_key="ops-admin",
            acl_secret_key="ops-admin-secret",
            transaction_time_out=200,
            acl_require_strong_signature=strong,
        )
        cluster.clock = virtual_time.current_clock()
        try:
            await cluster.start()
            master = await cluster.master()
            assert master.services is not None
            for topic in ("TopicA", "TopicB"):
                await master.services.admin.create_topic(TopicConfig(topic, 2, 2))
            await test(cluster, master)
        finally:
            await cluster.close()

    virtual_time.run(asyncio.wait_for(main(), 110))


def _signed(who: str, code: int, fields: Mapping[str, str], body: bytes = b"") -> RemotingCommand:
    signed = sign_request(fields, body or None, who, SECRETS[who])
    return RemotingCommand(code=code, opaque=0, ext_fields=signed, body=body)


async def _ask(
    cluster: Cluster, who: str, code: int, fields: Mapping[str, str], body: bytes = b""
) -> RemotingCommand:
    master = await cluster.master()
    return await cluster.pool.request(master.address, _signed(who, code, fields, body), 5.0)


def _send_fields(topic: str, properties: Mapping[str, str] | None = None) -> dict[str, str]:
    """SEND_MESSAGE_V2's one-letter header (``SendMessageRequestHeaderV2``)."""
    return {
        "a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
        "i": encode_properties(properties or {}), "j": "0", "k": "false", "m": "false",
    }  # fmt: skip


def _max_offset(master: BrokerServer, topic: str) -> int:
    assert master.state is not None
    return sum(
        q.max_offset
        for q in (master.state.queues.find(topic, i) for i in range(4))
        if q is not None
    )


async def _stored(cluster: Cluster, who: str, topic: str, body: bytes) -> RemotingCommand:
    sent = await _ask(cluster, who, C.SEND_MESSAGE_V2, _send_fields(topic), body)
    assert sent.code == MQResponseCode.SUCCESS, sent.remark
    return sent


def _offset(sent: RemotingCommand) -> int:
    return decode_offset_message_id(sent.ext_fields["msgId"])[2]


# ---------------------------------------------------------------------------- item 2
def test_a_v2_send_is_checked_on_the_topic_it_stores_into(tmp_path: Path) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        await _stored(cluster, "a-producer", "TopicA", b"mine")
        override = {**_send_fields("TopicA"), "topic": "TopicB"}
        no_b = {k: v for k, v in _send_fields("TopicB").items() if k != "b"}
        no_b["topic"] = "TopicB"
        create = {**_send_fields("TopicA"), "topic": "BrandNewTopic"}
        for fields in (override, no_b, create):
            for code in (C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE):
                refused = await _ask(cluster, "a-producer", code, fields, b"theirs")
                assert refused.code != MQResponseCode.SUCCESS, fields
                assert "topic" in (refused.remark or ""), refused.remark
        assert _max_offset(master, "TopicB") == 0
        assert master.state is not None
        assert master.state.topics.find("BrandNewTopic") is None
        # a V1 send names its topic in ``topic``: the ACL checks that one
        v1 = await _ask(cluster, "a-producer", C.SEND_MESSAGE, {
            "producerGroup": "pg", "topic": "BrandNewTopic", "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1",
            "flag": "0", "properties": "", "reconsumeTimes": "0",
        }, b"new")  # fmt: skip
        assert v1.code == MQResponseCode.NO_PERMISSION, v1.remark
        assert master.state.topics.find("BrandNewTopic") is None
        assert _max_offset(master, "TopicA") == 1

    _run(tmp_path, test)


# ---------------------------------------------------------------------------- item 3
def test_view_by_id_needs_sub_on_the_messages_topic(tmp_path: Path) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        sent = await _stored(cluster, "b-owner", "TopicB", b"secret of b")
        fields = {"offset": str(_offset(sent))}
        for who in ("a-producer", "a-consumer"):
            refused = await _ask(cluster, who, C.VIEW_MESSAGE_BY_ID, fields)
            assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
            assert b"secret of b" not in (refused.body or b"")
            assert "needs SUB on its topic" in (refused.remark or "")
            assert "TopicB" not in (refused.remark or "")  # not even whose it is
        seen = await _ask(cluster, "b-owner", C.VIEW_MESSAGE_BY_ID, fields)
        assert seen.code == MQResponseCode.SUCCESS, seen.remark
        assert b"secret of b" in seen.body

    _run(tmp_path, test)


def test_a_strong_signed_request_is_checked_again_without_spending_its_nonce_twice(
    tmp_path: Path,
) -> None:
    """The check made once a record is read (view by id, send-back, end of a transaction) asks
    the ACL about the record's topic; it used to run the whole gate again on the same request,
    which found the strong signature's nonce already spent and refused the owner's own view as
    a replay (and counted a failed sign-in)."""

    async def test(cluster: Cluster, master: BrokerServer) -> None:
        assert cluster.clock is not None
        now_s = cluster.clock.wall_time_s()

        async def ask(who: str, code: int, fields: Mapping[str, str], body: bytes = b"") -> Any:
            signed = sign_strong(
                code, fields, body or None, who, SECRETS[who], now_s=now_s,
                nonce=secrets.token_hex(16),
            )  # fmt: skip
            command = RemotingCommand(code=code, opaque=0, ext_fields=signed, body=body)
            return await cluster.pool.request(master.address, command, 5.0)

        sent = await ask("b-owner", C.SEND_MESSAGE_V2, _send_fields("TopicB"), b"b's own")
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        fields = {"offset": str(_offset(sent))}
        seen = await ask("b-owner", C.VIEW_MESSAGE_BY_ID, fields)
        assert seen.code == MQResponseCode.SUCCESS, seen.remark
        assert b"b's own" in seen.body
        refused = await ask("a-consumer", C.VIEW_MESSAGE_BY_ID, fields)
        assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
        assert "needs SUB on its topic" in (refused.remark or "")

    _run(tmp_path, test, strong=True)


# ---------------------------------------------------------------------------- item 4
def test_send_back_needs_sub_on_the_records_topic(tmp_path: Path) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        theirs = await _stored(cluster, "b-owner", "TopicB", b"b's message")
        mine = await _stored(cluster, "ops-admin", "TopicA", b"a's message")
        assert master.state is not None
        for delay in ("0", "-1"):
            refused = await _ask(cluster, "a-consumer", C.CONSUMER_SEND_MSG_BACK, {
                "offset": str(_offset(theirs)), "group": "a-group", "delayLevel": delay,
                "originMsgId": "", "originTopic": "TopicA",
            })  # fmt: skip
            assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
            assert "SUB on its topic" in (refused.remark or ""), refused.remark
        assert master.state.topics.find("%DLQ%a-group") is None
        ok = await _ask(cluster, "a-consumer", C.CONSUMER_SEND_MSG_BACK, {
            "offset": str(_offset(mine)), "group": "a-group", "delayLevel": "-1",
        })  # fmt: skip
        assert ok.code == MQResponseCode.SUCCESS, ok.remark
        assert _max_offset(master, "%DLQ%a-group") == 1

    _run(tmp_path, test)


# ---------------------------------------------------------------------------- item 5
async def _half(cluster: Cluster, uniq: str) -> RemotingCommand:
    properties = {"TRAN_MSG": "true", "PGROUP": "b-tx", "UNIQ_KEY": uniq}
    fields = _send_fields("TopicB", properties)
    sent = await _ask(cluster, "b-owner", C.SEND_MESSAGE_V2, fields, b"half " + uniq.encode())
    assert sent.code == MQResponseCode.SUCCESS, sent.remark
    return sent


def _end_fields(sent: RemotingCommand, flag: int) -> dict[str, str]:
    return {
        "producerGroup": "b-tx",
        "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": str(_offset(sent)),
        "commitOrRollback": str(flag),
        "fromTransactionCheck": "false",
        "msgId": sent.ext_fields["transactionId"],
        "transactionId": sent.ext_fields["transactionId"],
    }


def test_ending_a_transaction_needs_pub_on_the_half_messages_topic(tmp_path: Path) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        assert master.services is not None
        sent = await _half(cluster, "u1")
        for who in ("a-producer", "a-consumer"):
            for flag in (8, 12):
                refused = await _ask(cluster, who, C.END_TRANSACTION, _end_fields(sent, flag))
                assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
        assert master.services.transactions.open_count() == 1
        assert _max_offset(master, "TopicB") == 0
        ok = await _ask(cluster, "b-owner", C.END_TRANSACTION, _end_fields(sent, 8))
        assert ok.code == MQResponseCode.SUCCESS, ok.remark
        assert master.services.transactions.open_count() == 0
        assert _max_offset(master, "TopicB") == 1

    _run(tmp_path, test)


def test_check_backs_go_only_to_producers_signed_in_with_pub_on_the_topic(
    tmp_path: Path,
) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        assert master.services is not None
        checks: asyncio.Queue[tuple[str, RemotingCommand]] = asyncio.Queue()

        def listener(name: str) -> Callable[[Connection, RemotingCommand], None]:
            def on_request(conn: Connection, command: RemotingCommand) -> None:
                if command.code == C.CHECK_TRANSACTION_STATE:
                    checks.put_nowait((name, command))

            return on_request

        owner = ConnectionPool(cluster.network, listener("b-owner"))
        intruder = ConnectionPool(cluster.network, listener("a-producer"))
        try:
            for pool, who, client_id in (
                (owner, "b-owner", "b-1"),
                (intruder, "a-producer", "a-1"),
            ):
                beat = {"clientID": client_id, "producerDataSet": [{"groupName": "b-tx"}],
                        "consumerDataSet": []}  # fmt: skip
                body = json.dumps(beat).encode()
                answer = await pool.request(
                    master.address, _signed(who, C.HEART_BEAT, {}, body), 5.0
                )
                assert answer.code == MQResponseCode.SUCCESS, answer.remark
            await _half(cluster, "u1")
            await asyncio.sleep(0.3)
            assert len(await master.services.transactions.check_pass()) == 1
            name, _check = await asyncio.wait_for(checks.get(), 5)
            assert name == "b-owner"  # the intruder, newest, would have been chosen before
            await owner.close()
            await asyncio.sleep(0.3)
            await master.services.transactions.check_pass()
            await asyncio.sleep(0.2)  # virtual: every task went idle and nothing came
            assert checks.empty()  # nobody entitled is connected: nobody gets the message
            await intruder.close()
            await asyncio.sleep(0.1)
            assert master.remoting.signed_in is not None
            assert len(master.remoting.signed_in) == 0  # closed connections are forgotten
        finally:
            await owner.close()
            await intruder.close()

    _run(tmp_path, test)


# ---------------------------------------------------------------------------- item 11
def test_locks_and_offsets_of_another_group_are_refused(tmp_path: Path) -> None:
    async def test(cluster: Cluster, master: BrokerServer) -> None:
        lock_body = json.dumps({
            "consumerGroup": "b-group", "clientId": "fake-client",
            "mqSet": [{"topic": "TopicB", "brokerName": "broker-a", "queueId": 0}],
        }).encode()  # fmt: skip
        own_group_foreign_topic = json.dumps({
            "consumerGroup": "a-group", "clientId": "a-client",
            "mqSet": [{"topic": "TopicB", "brokerName": "broker-a", "queueId": 0}],
        }).encode()  # fmt: skip
        for code in (C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ):
            for body in (lock_body, own_group_foreign_topic):
                refused = await _ask(cluster, "a-consumer", code, {}, body)
                assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
        asks: list[tuple[int, dict[str, str]]] = [
            (C.GET_CONSUME_STATS, {"consumerGroup": "b-group"}),
            (C.GET_CONSUME_STATS, {"consumerGroup": "b-group", "topic": "TopicB"}),
            (C.GET_TOPIC_STATS_INFO, {"topic": "TopicB"}),
            (C.GET_ALL_CONSUMER_OFFSET, {}),
        ]
        for asked, fields in asks:
            refused = await _ask(cluster, "a-consumer", asked, fields)
            assert refused.code == MQResponseCode.NO_PERMISSION, (asked, refused.remark)
        owner_lock = json.dumps({
            "consumerGroup": "b-group", "clientId": "b-client",
            "mqSet": [{"topic": "TopicB", "brokerName": "broker-a", "queueId": 0}],
        }).encode()  # fmt: skip
        held = await _ask(cluster, "b-owner", C.LOCK_BATCH_MQ, {}, owner_lock)
        assert held.code == MQResponseCode.SUCCESS, held.remark
        assert len(json.loads(held.body)["lockOKMQSet"]) == 1
        stats = await _ask(cluster, "b-owner", C.GET_CONSUME_STATS, {"consumerGroup": "b-group"})
        assert stats.code == MQResponseCode.SUCCESS, stats.remark

    _run(tmp_path, test)


def test_a_groups_clients_need_sub_on_the_group(tmp_path: Path) -> None:
    """GET_CONSUMER_CONNECTION_LIST names a group's clients and their addresses, and
    GET_CONSUMER_RUNNING_INFO asks one of them what it holds: SUB on the group, not any
    account (issue 26 item 2)."""

    async def test(cluster: Cluster, master: BrokerServer) -> None:
        asks: list[tuple[int, dict[str, str]]] = [
            (C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "b-group"}),
            (C.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "b-group", "clientId": "b-client"}),
        ]
        for asked, fields in asks:
            refused = await _ask(cluster, "a-consumer", asked, fields)
            assert refused.code == MQResponseCode.NO_PERMISSION, (asked, refused.remark)
            # the owner is let through: the group has no client online, which it is told
            owner = await _ask(cluster, "b-owner", asked, fields)
            assert owner.code == MQResponseCode.SYSTEM_ERROR, (asked, owner.remark)
            assert "online" in (owner.remark or ""), owner.remark

    _run(tmp_path, test)


def test_unregistering_another_groups_client_is_refused(tmp_path: Path) -> None:
    """UNREGISTER_CLIENT without a consumer group needed only an account and removed the
    client from every consumer group and released its queue locks: an account with PUB on
    its own topic alone could throw another tenant's consumer out of its group and take its
    orderly queues. Now a consumer is removed only from the group named (SUB on it); a request
    without one unregisters the producer only, as RocketMQ's broker does (issue 26 item 2)."""

    async def test(cluster: Cluster, master: BrokerServer) -> None:
        beat = json.dumps({
            "clientID": "b-client", "producerDataSet": [],
            "consumerDataSet": [{
                "groupName": "b-group", "consumeType": "CONSUME_ACTIVELY",
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": "TopicB", "subString": "*"}],
            }],
        }).encode()  # fmt: skip
        joined = await _ask(cluster, "b-owner", C.HEART_BEAT, {}, beat)
        assert joined.code == MQResponseCode.SUCCESS, joined.remark
        lock = json.dumps({
            "consumerGroup": "b-group", "clientId": "b-client",
            "mqSet": [{"topic": "TopicB", "brokerName": "broker-a", "queueId": 0}],
        }).encode()  # fmt: skip
        held = await _ask(cluster, "b-owner", C.LOCK_BATCH_MQ, {}, lock)
        assert len(json.loads(held.body)["lockOKMQSet"]) == 1
        members = {"consumerGroup": "b-group"}
        for fields in (
            {"clientID": "b-client", "producerGroup": "pg", "consumerGroup": ""},
            {"clientID": "b-client", "producerGroup": "pg"},
        ):
            answer = await _ask(cluster, "a-producer", C.UNREGISTER_CLIENT, fields)
            assert answer.code == MQResponseCode.SUCCESS, answer.remark  # its producer only
            listed = await _ask(cluster, "b-owner", C.GET_CONSUMER_LIST_BY_GROUP, members)
            assert listed.code == MQResponseCode.SUCCESS, listed.remark
            assert json.loads(listed.body)["consumerIdList"] == ["b-client"]
        named = {"clientID": "b-client", "consumerGroup": "b-group"}
        refused = await _ask(cluster, "a-producer", C.UNREGISTER_CLIENT, named)
        assert refused.code == MQResponseCode.NO_PERMISSION, refused.remark
        # the lock is still b-client's: another client of the group cannot take the queue
        other = lock.replace(b'"b-client"', b'"b-other"')
        taken = await _ask(cluster, "b-owner", C.LOCK_BATCH_MQ, {}, other)
        assert json.loads(taken.body)["lockOKMQSet"] == []
        # the owner's own consumer leaves its group, and its locks go with it
        left = await _ask(cluster, "b-owner", C.UNREGISTER_CLIENT, named)
        assert left.code == MQResponseCode.SUCCESS, left.remark
        taken = await _ask(cluster, "b-owner", C.LOCK_BATCH_MQ, {}, other)
        assert len(json.loads(taken.body)["lockOKMQSet"]) == 1

    _run(tmp_path, test)
