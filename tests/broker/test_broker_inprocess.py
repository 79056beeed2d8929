"""A broker group of three replicas and a NameServer in one process, over the in-memory network:
RocketMQ's requests end to end, roles, auto-creation, offsets through the ledger, failover."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.broker.server import BrokerServer
from ledgermq.broker.storage.commitlog import CHANNEL_MESSAGES
from ledgermq.errors import DiskFullError
from ledgermq.ledger.server import LedgerServer
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.raft import Role
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import (
    decode_offset_message_id,
    decode_records,
    encode_batch,
    encode_properties,
)
from ledgermq.wire.route import TopicRouteData

from .harness import LEDGER_PEERS, NAMESRV, Cluster, run_with_cluster

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)


async def _route(cluster: Cluster, topic: str) -> TopicRouteData:
    response = await cluster.request(
        NAMESRV, MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
    )
    assert response.code == MQResponseCode.SUCCESS, response.remark
    return TopicRouteData.from_json(response.body)


async def _eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_send_pull_roles_and_routes(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()

        async def routed() -> bool:
            response = await cluster.request(
                NAMESRV, MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
            )
            if response.code != 0:
                return False
            route = TopicRouteData.from_json(response.body)
            return route.broker_datas[0].master_addr == master.address

        await _eventually(routed)
        # A new topic is created on first send (defaultTopic TBW102, 4 queues asked).
        sent = await cluster.send(
            master.address,
            "Orders",
            b"hello",
            queue_id=1,
            properties={"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U1"},
        )
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        assert sent.ext_fields["queueOffset"] == "0"
        assert sent.ext_fields["queueId"] == "1"
        assert sent.ext_fields["transactionId"] == "U1"
        _, port, physical = decode_offset_message_id(sent.ext_fields["msgId"])
        assert port == master.port
        second = await cluster.send(master.address, "Orders", b"world", queue_id=1)
        assert second.ext_fields["queueOffset"] == "1"
        route = await _route(cluster, "Orders")
        assert route.queue_datas[0].write_queue_nums == 4

        pulled = await cluster.pull(master.address, "Orders", 1, 0)
        assert pulled.code == MQResponseCode.SUCCESS, pulled.remark
        messages = decode_records(pulled.body, check_crc=True)
        assert [m.body for m in messages] == [b"hello", b"world"]
        assert [m.queue_offset for m in messages] == [0, 1]
        assert messages[0].commit_log_offset == physical
        assert messages[0].keys == ["k1", "k2"]
        assert messages[0].tags == "a"
        assert pulled.ext_fields["nextBeginOffset"] == "2"
        assert pulled.ext_fields["maxOffset"] == "2"
        # Tag filtering by the broker, offsets at and past the end.
        filtered = await cluster.pull(master.address, "Orders", 1, 0, subscription="b")
        assert filtered.code == MQResponseCode.PULL_RETRY_IMMEDIATELY
        at_end = await cluster.pull(master.address, "Orders", 1, 2)
        assert at_end.code == MQResponseCode.PULL_NOT_FOUND
        past = await cluster.pull(master.address, "Orders", 1, 9)
        assert past.code == MQResponseCode.PULL_OFFSET_MOVED
        assert past.ext_fields["nextBeginOffset"] == "2"

        # Every replica dispatches the same committed messages; slaves refuse sends.
        for broker in cluster.brokers.values():
            if broker is master:
                continue

            async def has_both(b: object = broker) -> bool:
                r = await cluster.pull(b.address, "Orders", 1, 0)  # type: ignore[attr-defined]
                return r.code == 0 and len(decode_records(r.body)) == 2

            await _eventually(has_both)
            refused = await cluster.send(broker.address, "Orders", b"no")
            assert refused.code == MQResponseCode.SERVICE_NOT_AVAILABLE
            assert "slave" in (refused.remark or "")

        # View by offset message id, query by key.
        viewed = await cluster.request(
            master.address, MQRequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(physical)}
        )
        assert decode_records(viewed.body)[0].body == b"hello"
        queried = await cluster.request(
            master.address, MQRequestCode.QUERY_MESSAGE,
            {"topic": "Orders", "key": "k2", "maxNum": "8"},
        )  # fmt: skip
        assert queried.code == 0, queried.remark
        assert [m.body for m in decode_records(queried.body)] == [b"hello"]

    run_with_cluster(tmp_path, test)


def test_bad_requests_get_clear_answers(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        unknown = await cluster.request(master.address, 4242)
        assert unknown.code == MQResponseCode.REQUEST_CODE_NOT_SUPPORTED
        missing = await cluster.request(master.address, MQRequestCode.SEND_MESSAGE, {})
        assert missing.code == MQResponseCode.SYSTEM_ERROR
        assert "topic" in (missing.remark or "")
        bad_topic = await cluster.send(master.address, "bad topic!", b"x")
        # a name that breaks the naming rules: INVALID_PARAMETER (no client retries it), the
        # rule in the remark
        assert bad_topic.code == MQResponseCode.INVALID_PARAMETER
        assert "may contain only the characters" in (bad_topic.remark or "")
        too_big = await cluster.send(master.address, "T", b"x" * (5 << 20))
        assert too_big.code == MQResponseCode.MESSAGE_ILLEGAL
        no_topic = await cluster.pull(master.address, "Nope", 0, 0)
        assert no_topic.code == MQResponseCode.TOPIC_NOT_EXIST
        bad_heartbeat = await cluster.request(master.address, MQRequestCode.HEART_BEAT, body=b"{")
        assert bad_heartbeat.code == MQResponseCode.SYSTEM_ERROR
        # the connection is still usable after every refusal
        ok = await cluster.send(master.address, "T", b"fine")
        assert ok.code == MQResponseCode.SUCCESS, ok.remark

    run_with_cluster(tmp_path, test)


def test_long_polling_answers_when_a_message_arrives(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        assert (await cluster.send(master.address, "Poll", b"first")).code == 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        held = asyncio.ensure_future(
            cluster.pull(master.address, "Poll", 0, 1, sys_flag=4 | 2, suspend_ms=5000)
        )
        await asyncio.sleep(0.3)
        assert not held.done()
        assert (await cluster.send(master.address, "Poll", b"second")).code == 0
        response = await held
        assert response.code == MQResponseCode.SUCCESS
        assert [m.body for m in decode_records(response.body)] == [b"second"]
        assert loop.time() - started < 3
        # and without a message it answers PULL_NOT_FOUND when the suspend time is up
        empty = await cluster.pull(master.address, "Poll", 0, 2, sys_flag=6, suspend_ms=200)
        assert empty.code == MQResponseCode.PULL_NOT_FOUND

    run_with_cluster(tmp_path, test)


def test_offsets_survive_failover_and_queue_offsets_continue(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        for i in range(5):
            assert (await cluster.send(master.address, "F", b"m%d" % i)).code == 0
        update = await cluster.request(
            master.address, MQRequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "cg", "topic": "F", "queueId": "0", "commitOffset": "3"},
        )  # fmt: skip
        assert update.code == 0, update.remark
        old = next(n for n, b in cluster.brokers.items() if b is master)
        await cluster.stop_broker(old)
        new = await cluster.master(timeout_s=15)
        query = await cluster.request(
            new.address, MQRequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "cg", "topic": "F", "queueId": "0"},
        )  # fmt: skip
        assert query.code == 0
        assert query.ext_fields["offset"] == "3"

        async def registered() -> bool:
            route = await _route(cluster, "F")
            return route.broker_datas[0].master_addr == new.address

        await _eventually(registered)
        sent = await cluster.send(new.address, "F", b"after")
        assert sent.code == 0, sent.remark
        assert sent.ext_fields["queueOffset"] == "5"
        pulled = await cluster.pull(new.address, "F", 0, 0)
        assert [m.body for m in decode_records(pulled.body)] == [
            b"m0",
            b"m1",
            b"m2",
            b"m3",
            b"m4",
            b"after",
        ]
        # the old master comes back as a slave and catches up
        await cluster.start_broker(old)

        async def caught_up() -> bool:
            r = await cluster.pull(cluster.brokers[old].address, "F", 0, 0)
            return r.code == 0 and len(decode_records(r.body)) == 6

        await _eventually(caught_up, 15)
        assert not cluster.brokers[old].state.is_master  # type: ignore[union-attr]
        # A slave never answers a committed offset from its own, possibly stale, copy: it
        # sends the client to the master (the 2026-11-26 soak's offset that went backwards).
        for replica in cluster.brokers.values():
            if replica is new:
                continue
            refused = await cluster.request(
                replica.address, MQRequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "F", "queueId": "0"},
            )  # fmt: skip
            assert refused.code == MQResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
            assert "master" in (refused.remark or "")

    run_with_cluster(tmp_path, test)


def test_commit_offset_minus_one_is_accepted_and_never_moves_a_stored_offset(
    tmp_path: Path,
) -> None:
    """ali-ons commits -1 for queues it holds unconsumed; RocketMQ 4.x answers SUCCESS."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        for i in range(3):
            assert (await cluster.send(master.address, "M", b"m%d" % i)).code == 0

        async def update(queue_id: int, offset: int) -> tuple[int, str | None]:
            response = await cluster.request(
                master.address, MQRequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "M", "queueId": str(queue_id),
                 "commitOffset": str(offset)},
            )  # fmt: skip
            return response.code, response.remark

        async def query(queue_id: int) -> tuple[int, str | None]:
            response = await cluster.request(
                master.address, MQRequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "M", "queueId": str(queue_id)},
            )  # fmt: skip
            return response.code, response.ext_fields.get("offset")

        # no offset stored: -1 is accepted, and the query answers as for a new group
        assert await update(1, -1) == (MQResponseCode.SUCCESS, None)
        assert await query(1) == (MQResponseCode.SUCCESS, "0")
        # a stored offset is never moved back by -1
        assert (await update(0, 2))[0] == MQResponseCode.SUCCESS
        assert await update(0, -1) == (MQResponseCode.SUCCESS, None)
        assert await query(0) == (MQResponseCode.SUCCESS, "2")

        # nor on any replica: -1 wrote nothing to the ledger
        async def replicated() -> bool:
            states = [b.state for b in cluster.brokers.values()]
            return all(s is not None and s.metadata.offset("cg", "M", 0) == 2 for s in states)

        await _eventually(replicated)
        for broker in cluster.brokers.values():
            assert broker.state is not None
            assert broker.state.metadata.offset("cg", "M", 1) is None
        # other negative offsets mean nothing: a clear refusal
        code, remark = await update(0, -2)
        assert code == MQResponseCode.SYSTEM_ERROR
        assert "-2" in (remark or "")
        assert await query(0) == (MQResponseCode.SUCCESS, "2")

    run_with_cluster(tmp_path, test)


def test_close_never_flushes_while_a_cancelled_housekeeping_flush_still_runs(
    tmp_path: Path,
) -> None:
    """close() cancels housekeeping, but not the flush thread it was awaiting: its own final
    flush used to run at the same time, both writing the same temporary checkpoint and
    snapshot files. Deterministic: the housekeeping flush holds on until a second one starts
    (it did at once before the fix) or a second has gone by."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        assert (await cluster.send(master.address, "H", b"x")).code == 0
        node = next(n for n, b in cluster.brokers.items() if b is master)
        real = master.replica._write_durably
        active: list[int] = []
        most = [0]
        first_started = threading.Event()
        second_started = threading.Event()

        def write_durably(*args: Any) -> None:
            active.append(1)
            most[0] = max(most[0], len(active))
            try:
                if not first_started.is_set():
                    first_started.set()
                    second_started.wait(1.0)  # hold on like a slow disk
                else:
                    second_started.set()
                real(*args)
            finally:
                active.pop()

        master.replica._write_durably = write_durably  # type: ignore[method-assign,assignment]
        assert await asyncio.to_thread(first_started.wait, 5)  # housekeeping is flushing
        await cluster.stop_broker(node)
        assert second_started.is_set()  # close flushed too
        assert most[0] == 1

    run_with_cluster(tmp_path, test)


@pytest.mark.parametrize("fault", ["ledger store", "dispatch", "dispatch and the last checkpoint"])
def test_a_replica_whose_store_fails_refuses_every_pull_and_stops(
    tmp_path: Path, fault: str
) -> None:
    """Fail-stop (README "Operations"): a slave whose disk fills up answers its held and new
    pulls with SERVICE_NOT_AVAILABLE, never "nothing new", and closes itself; its group goes
    on. Was: the slave ran on, its queues frozen, answering PULL_NOT_FOUND."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        assert (await cluster.send(master.address, "S", b"one")).code == 0
        node, slave = next((n, b) for n, b in cluster.brokers.items() if b is not master)

        async def has_first() -> bool:
            response = await cluster.pull(slave.address, "S", 0, 0)
            return response.code == MQResponseCode.SUCCESS

        await _eventually(has_first)
        held = asyncio.ensure_future(
            cluster.pull(slave.address, "S", 0, 1, sys_flag=6, suspend_ms=3000)
        )
        await asyncio.sleep(0.2)
        assert not held.done()

        def disk_full(*args: object, **kwargs: object) -> Any:
            raise DiskFullError("no space left (test)")

        def no_space(*args: object, **kwargs: object) -> Any:
            raise OSError(errno.ENOSPC, "No space left on device (test)")

        if fault == "ledger store":
            slave.ledger.store.append_entries = disk_full  # type: ignore[method-assign]
        else:
            assert slave.state is not None
            slave.state.queues.get_or_create = disk_full  # type: ignore[method-assign]
        if fault == "dispatch and the last checkpoint":
            # Was (chaos suite, disk-full fault): the store's close raised ENOSPC writing its
            # checkpoint, the broker's close stopped there and never ended: the process idled
            # with its port closed, neither serving nor exiting.
            slave.ledger.store._write_checkpoint = no_space  # type: ignore[attr-defined]
        assert (await cluster.send(master.address, "S", b"two")).code == 0
        answer = await held
        assert answer.code == MQResponseCode.SERVICE_NOT_AVAILABLE, answer
        assert "store failed" in (answer.remark or "")
        await asyncio.wait_for(slave.wait_closed(), 10)
        assert isinstance(slave.failure, DiskFullError)
        await cluster.stop_broker(node)  # already closed: returns at once
        # the group goes on without it
        assert (await cluster.send(master.address, "S", b"three")).code == 0

    run_with_cluster(tmp_path, test)


def test_a_topic_made_again_after_deletion_keeps_every_acknowledged_message(
    tmp_path: Path,
) -> None:
    """Regression: DELETE_TOPIC reset the master's next queue offsets while the ConsumeQueue
    kept its units, so a topic made again under the same name acknowledged new messages at
    offsets 0.. that pulls answered with the old messages: the new ones were unreachable. The
    queue offsets now carry on (what the ConsumeQueue and a new master agree on)."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        for i in range(3):
            assert (await cluster.send(master.address, "D", b"old%d" % i)).code == 0
        deleted = await cluster.request(
            master.address, MQRequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "D"}
        )
        assert deleted.code == 0, deleted.remark
        acked = {}
        for i in range(2):
            sent = await cluster.send(master.address, "D", b"new%d" % i)
            assert sent.code == 0, sent.remark
            acked[int(sent.ext_fields["queueOffset"])] = b"new%d" % i
        assert acked == {3: b"new0", 4: b"new1"}
        pulled = await cluster.pull(master.address, "D", 0, 0)
        stored = {m.queue_offset: m.body for m in decode_records(pulled.body)}
        assert {o: stored.get(o) for o in acked} == acked

    run_with_cluster(tmp_path, test)


def test_send_back_goes_to_retry_then_dead_letter(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        sent = await cluster.send(master.address, "R", b"payload", properties={"UNIQ_KEY": "X"})
        assert sent.code == 0
        _, _, offset = decode_offset_message_id(sent.ext_fields["msgId"])
        back = await cluster.request(
            master.address, MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(offset), "group": "cg", "delayLevel": "1", "originMsgId": "X",
             "originTopic": "R", "unitMode": "false", "maxReconsumeTimes": "1"},
        )  # fmt: skip
        assert back.code == 0, back.remark

        async def in_retry() -> bool:
            r = await cluster.pull(master.address, "%RETRY%cg", 0, 0)
            return r.code == 0

        await _eventually(in_retry, 10)
        retried = decode_records((await cluster.pull(master.address, "%RETRY%cg", 0, 0)).body)[0]
        assert retried.body == b"payload"
        assert retried.reconsume_times == 1
        assert retried.properties["RETRY_TOPIC"] == "R"
        # once more: reconsumeTimes (1) reached maxReconsumeTimes (1) -> dead-letter queue
        back = await cluster.request(
            master.address, MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(retried.commit_log_offset), "group": "cg", "delayLevel": "0",
             "maxReconsumeTimes": "1"},
        )  # fmt: skip
        assert back.code == 0, back.remark
        dead = await cluster.pull(master.address, "%DLQ%cg", 0, 0)
        assert dead.code == 0, dead.remark
        assert decode_records(dead.body)[0].body == b"payload"

    run_with_cluster(tmp_path, test)


def test_heartbeat_consumer_list_locks_and_admin(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        heartbeat = {
            "clientID": "c1",
            "producerDataSet": [],
            "consumerDataSet": [{"groupName": "g1", "consumeType": 1, "messageModel": 1,
                                 "consumeFromWhere": 0, "unitMode": False,
                                 "subscriptionDataSet": [{"topic": "T", "subString": "*"}]}],
        }  # fmt: skip
        hb = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode() + b"\n"
        )
        assert hb.code == 0
        listed = await cluster.request(
            master.address, MQRequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g1"}
        )
        assert json.loads(listed.body) == {"consumerIdList": ["c1"]}

        async def retry_topic_made() -> bool:
            return master.state is not None and master.state.topics.find("%RETRY%g1") is not None

        await _eventually(retry_topic_made)
        mq = {"topic": "T", "brokerName": "broker-a", "queueId": 0}
        lock = {"clientId": "c1", "consumerGroup": "g1", "mqSet": [mq]}
        locked = await cluster.request(
            master.address, MQRequestCode.LOCK_BATCH_MQ, body=json.dumps(lock).encode()
        )
        assert json.loads(locked.body)["lockOKMQSet"] == [mq]
        other = dict(lock, clientId="c2")
        refused = await cluster.request(
            master.address, MQRequestCode.LOCK_BATCH_MQ, body=json.dumps(other).encode()
        )
        assert json.loads(refused.body)["lockOKMQSet"] == []
        created = await cluster.request(
            master.address, MQRequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": "Made", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"},
        )  # fmt: skip
        assert created.code == 0, created.remark
        route = await _route(cluster, "Made")
        assert route.queue_datas[0].read_queue_nums == 2
        info = await cluster.request(master.address, MQRequestCode.GET_BROKER_RUNTIME_INFO)
        assert json.loads(info.body)["table"]["brokerRole"] == "SYNC_MASTER"

    run_with_cluster(tmp_path, test)


def test_a_role_taken_while_the_broker_starts_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger may take its role before the broker has put its role listener on it: a group of
    one replica elects itself at once, and any replica may hear of a leader while the broker is
    still opening its queues. Found by ``BrokerCluster`` with two one-replica groups on a busy
    machine: the broker stayed SLAVE with brokerId -1, so it never registered with the
    NameServers and clients never got a route. Here the ledger is made to lead before
    ``BrokerServer.start`` returns; the broker must still become master and be routable."""
    original_start = LedgerServer.start

    async def start_and_lead(self: LedgerServer) -> None:
        await original_start(self)

        async def leads() -> bool:
            return self.core.role is Role.LEADER

        await _eventually(leads)

    monkeypatch.setattr(LedgerServer, "start", start_and_lead)

    async def main() -> None:
        cluster = Cluster(tmp_path)
        host, port = NAMESRV.split(":")
        cluster.namesrv = NameServer(
            NameServerConfig(listen_host=host, listen_port=int(port)), network=cluster.network
        )
        await cluster.namesrv.start()
        config = dataclasses.replace(cluster.config("n0"), dleger_peers={"n0": LEDGER_PEERS["n0"]})
        broker = BrokerServer(config, network=cluster.network)
        cluster.brokers["n0"] = broker
        try:
            await broker.start()

            async def routed() -> bool:
                response = await cluster.request(
                    NAMESRV, MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                )
                if response.code != MQResponseCode.SUCCESS:
                    return False
                route = TopicRouteData.from_json(response.body)
                return route.broker_datas[0].broker_addrs.get(0) == broker.address

            await _eventually(routed)
            assert broker.state is not None
            assert broker.state.is_master
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_batch_is_one_entry_and_each_record_is_addressable(tmp_path: Path) -> None:
    """SEND_BATCH_MESSAGE stores one ledger entry holding every record (commitlog's docstring);
    pull, view by msgId, query by key and send-back reach the k-th record as any other."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        store = master.state.commitlog._ledger.store  # type: ignore[union-attr]
        before = store.end_index
        items = [
            (
                f"m{i}".encode() * (i + 1),
                i,
                encode_properties({"KEYS": f"key{i}", "UNIQ_KEY": f"U{i}"}),
            )
            for i in range(5)
        ]
        sent = await cluster.request(
            master.address, MQRequestCode.SEND_BATCH_MESSAGE,
            {"a": "pg", "b": "Batched", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1",
             "h": "0", "i": "", "j": "0", "k": "false", "m": "true"},
            encode_batch(items),
        )  # fmt: skip
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
        offsets = [decode_offset_message_id(i)[2] for i in sent.ext_fields["msgId"].split(",")]
        assert len(offsets) == 5
        # One entry for the whole batch (the others are the new topic's metadata).
        added = store.read_range(before + 1, 1 << 20)
        (entry,) = [e for e in added if e.channel == CHANNEL_MESSAGES]
        assert offsets[0] == entry.pos + 48
        assert offsets[-1] < entry.pos + 48 + len(entry.body)
        for replica in cluster.brokers.values():

            async def has_all(b: object = replica) -> bool:
                r = await cluster.pull(b.address, "Batched", 2, 0)  # type: ignore[attr-defined]
                return r.code == 0 and len(decode_records(r.body)) == 5

            await _eventually(has_all)
            pulled = decode_records(
                (await cluster.pull(replica.address, "Batched", 2, 0)).body, check_crc=True
            )
            assert [(m.body, m.flag) for m in pulled] == [(b, f) for b, f, _ in items]
            assert [m.queue_offset for m in pulled] == list(range(5))
            assert [m.commit_log_offset for m in pulled] == offsets
            assert [m.msg_id for m in pulled] == [f"U{i}" for i in range(5)]
            # The k-th record from the middle of the queue.
            third = await cluster.pull(replica.address, "Batched", 2, 3, max_nums=1)
            assert [m.body for m in decode_records(third.body)] == [items[3][0]]
        viewed = await cluster.request(
            master.address, MQRequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[2])}
        )
        assert decode_records(viewed.body)[0].body == items[2][0]
        for key in ("key4", "U4"):
            queried = await cluster.request(
                master.address, MQRequestCode.QUERY_MESSAGE,
                {"topic": "Batched", "key": key, "maxNum": "8"},
            )  # fmt: skip
            assert queried.code == 0, queried.remark
            assert [m.body for m in decode_records(queried.body)] == [items[4][0]]
        back = await cluster.request(
            master.address, MQRequestCode.CONSUMER_SEND_MSG_BACK,
            {"offset": str(offsets[1]), "group": "cg", "delayLevel": "0", "originMsgId": "U1",
             "originTopic": "Batched", "unitMode": "false", "maxReconsumeTimes": "0"},
        )  # fmt: skip
        assert back.code == 0, back.remark
        dead = await cluster.pull(master.address, "%DLQ%cg", 0, 0)
        assert dead.code == 0, dead.remark
        assert decode_records(dead.body)[0].body == items[1][0]

    run_with_cluster(tmp_path, test)


def test_concurrent_single_sends_share_entries_and_keep_their_own_offsets(
    tmp_path: Path,
) -> None:
    """Single sends of one loop pass are grouped into one ledger entry (append_group); each
    still has its own queue offset, message id and record on every replica, in send order."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        store = master.state.commitlog._ledger.store  # type: ignore[union-attr]
        first = await cluster.send(master.address, "Grouped", b"first", queue_id=1)
        assert first.code == MQResponseCode.SUCCESS, first.remark
        before = store.end_index
        bodies = [f"single {i}".encode() * (i + 1) for i in range(16)]
        answers = await asyncio.gather(
            *(
                cluster.send(
                    master.address, "Grouped", body, queue_id=i % 2,
                    properties={"KEYS": f"k{i}", "UNIQ_KEY": f"G{i}"},
                )
                for i, body in enumerate(bodies)
            )
        )  # fmt: skip
        assert all(a.code == MQResponseCode.SUCCESS for a in answers), answers
        added = [e for e in store.read_range(before + 1, 1 << 20) if e.channel == CHANNEL_MESSAGES]
        assert len(added) < 16, f"{len(added)} entries for 16 concurrent sends: not grouped"
        offsets = [decode_offset_message_id(a.ext_fields["msgId"])[2] for a in answers]
        assert len(set(offsets)) == 16
        expected = {0: [b for i, b in enumerate(bodies) if i % 2 == 0], 1: [b"first"]}
        expected[1] += [b for i, b in enumerate(bodies) if i % 2 == 1]
        for i, answer in enumerate(answers):
            queue = i % 2
            assert int(answer.ext_fields["queueOffset"]) == expected[queue].index(bodies[i])
        for replica in cluster.brokers.values():
            for queue, wanted in expected.items():

                async def has_all(
                    b: object = replica, q: int = queue, n: int = len(wanted)
                ) -> bool:
                    r = await cluster.pull(b.address, "Grouped", q, 0)  # type: ignore[attr-defined]
                    return r.code == 0 and len(decode_records(r.body)) == n

                await _eventually(has_all)
                pulled = decode_records(
                    (await cluster.pull(replica.address, "Grouped", queue, 0)).body, check_crc=True
                )
                assert [m.body for m in pulled] == wanted
                assert [m.queue_offset for m in pulled] == list(range(len(wanted)))
        for i in (0, 7, 15):
            viewed = await cluster.request(
                master.address, MQRequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[i])}
            )
            assert decode_records(viewed.body)[0].body == bodies[i]
            queried = await cluster.request(
                master.address, MQRequestCode.QUERY_MESSAGE,
                {"topic": "Grouped", "key": f"k{i}", "maxNum": "8"},
            )  # fmt: skip
            assert [m.body for m in decode_records(queried.body)] == [bodies[i]]

    run_with_cluster(tmp_path, test)


def test_an_unusable_key_index_is_rebuilt_from_the_commit_log(tmp_path: Path) -> None:
    """The key index is derived data: a damaged (or old-format) index file does not stop the
    broker; it is rebuilt by re-dispatching the commit log."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        sent = await cluster.send(master.address, "Keyed", b"find me", properties={"KEYS": "k9"})
        assert sent.code == 0, sent.remark
        node = next(n for n, b in cluster.brokers.items() if b is not master)

        async def indexed(address: str) -> bool:
            r = await cluster.request(
                address, MQRequestCode.QUERY_MESSAGE, {"topic": "Keyed", "key": "k9"}
            )
            return r.code == 0

        await _eventually(lambda: indexed(cluster.brokers[node].address))
        await cluster.stop_broker(node)
        index_dir = tmp_path / node / "index"
        for path in index_dir.iterdir():
            with path.open("r+b") as f:
                f.truncate(1000)  # not a valid index file any more
        restarted = await cluster.start_broker(node)
        assert await indexed(restarted.address)

    run_with_cluster(tmp_path, test)
