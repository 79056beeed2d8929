"""A small in-memory broker that speaks RocketMQ remoting as protocol-remoting-and-grpc.md
section 2 describes it, for the client tests (until the real broker can run in-process).

It keeps topics, queues of encoded CommitLog records, consumer offsets, group members and queue
locks in a ``FakeStore`` that a master and a slave of one group may share (a slave answers what
the master stored, as a DLedger follower holds the committed log). It registers with the
NameServer like a broker and re-registers when its topics change. Faults are switches on the
broker: answer sends with an error code, store a send but never answer it, refuse send-backs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from ledgermq.net import Connection, ConnectionPool, MemoryNetwork
from ledgermq.wire import (
    MessageProperty,
    MQRequestCode,
    MQResponseCode,
    RemotingCommand,
    create_offset_message_id,
    decode_batch,
    decode_properties,
    decode_records,
    encode_properties,
    encode_record,
    parse_subscription,
    read_dispatch_info,
)
from ledgermq.wire.ext_fields import expand_send_v2_fields
from ledgermq.wire.route import RegisterBrokerBody, TopicConfig

HOST = "127.0.0.1"


@dataclass
class FakeStore:
    """What one broker group holds, shared by its members."""

    topics: dict[str, TopicConfig] = field(default_factory=dict)
    queues: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    min_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    by_physical: dict[int, bytes] = field(default_factory=dict)
    next_physical: int = 0
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)
    members: dict[str, dict[str, Connection]] = field(default_factory=dict)
    locks: dict[tuple[str, str, str, int], str] = field(default_factory=dict)
    clock_ms: int = 1_700_000_000_000

    def queue(self, topic: str, queue_id: int) -> list[bytes]:
        return self.queues.setdefault((topic, queue_id), [])


class FakeBroker:
    def __init__(
        self,
        network: MemoryNetwork,
        namesrv: str,
        *,
        name: str = "broker-a",
        cluster: str = "DefaultCluster",
        broker_id: int = 0,
        store: FakeStore | None = None,
        topics: dict[str, int] | None = None,
        auto_create: bool = True,
    ) -> None:
        self.network = network
        self.namesrv = namesrv
        self.name = name
        self.cluster = cluster
        self.broker_id = broker_id
        self.store = store if store is not None else FakeStore()
        for topic, n in (topics or {}).items():
            self.store.topics[topic] = TopicConfig(topic, n, n)
        if auto_create:
            self.store.topics.setdefault("TBW102", TopicConfig("TBW102", 8, 8))
        self.address = ""
        self.port = 0
        self._listener: Any = None
        self._pool = ConnectionPool(network)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._waiters: dict[tuple[str, int], list[list[Any]]] = {}
        # fault switches
        self.send_error_code: int | None = None
        self.swallow_sends = 0
        self.send_back_error_code: int | None = None
        self.strict_queues = False  # refuse a queue id the topic does not write (as the broker)
        self.send_error_delay_s = 0.0  # answer send_error_code this late
        self.refuse_as_slave = False  # refuse offset commits while not master (as the broker)
        self.strict_consumer_list = False  # refuse the list of a group it has no member of
        self.requests: list[RemotingCommand] = []
        self.transfers: list[str] = []

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> FakeBroker:
        self._listener = await self.network.serve(HOST, 0, self._on_frame)
        self.port = self._listener.port
        self.address = f"{HOST}:{self.port}"
        await self.register()
        return self

    async def register(self, broker_id: int | None = None) -> None:
        if broker_id is not None:
            self.broker_id = broker_id
        body, crc = RegisterBrokerBody(dict(self.store.topics)).encode(compressed=False)
        ext = {
            "brokerName": self.name,
            "brokerAddr": self.address,
            "clusterName": self.cluster,
            "haServerAddr": self.address,
            "brokerId": str(self.broker_id),
            "bodyCrc32": str(crc),
        }
        cmd = RemotingCommand(MQRequestCode.REGISTER_BROKER, 0, ext_fields=ext, body=body)
        response = await self._pool.request(self.namesrv, cmd, 2.0)
        assert response.code == 0, response

    async def unregister(self) -> None:
        ext = {
            "brokerName": self.name,
            "brokerAddr": self.address,
            "clusterName": self.cluster,
            "brokerId": str(self.broker_id),
        }
        cmd = RemotingCommand(MQRequestCode.UNREGISTER_BROKER, 0, ext_fields=ext)
        await self._pool.request(self.namesrv, cmd, 2.0)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for waiters in self._waiters.values():
            for _, _, handle in waiters:
                handle.cancel()
        self._waiters.clear()
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
        await self._pool.close()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def create_topic(self, topic: str, queues: int, *, perm: int = 6) -> None:
        self.store.topics[topic] = TopicConfig(topic, queues, queues, perm)
        self._spawn(self.register())

    def count(self, code: int) -> int:
        return sum(1 for r in self.requests if r.code == code)

    # ------------------------------------------------------------------ dispatch
    def _on_frame(self, conn: Connection, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            return
        self.requests.append(cmd)
        handler = getattr(self, f"_code_{cmd.code}", None)
        response: RemotingCommand | None
        if handler is None:
            response = cmd.response(MQResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark="nope")
        else:
            response = handler(conn, cmd)
        if response is not None and not cmd.is_oneway and not conn.closed:
            conn.send(response)

    # ------------------------------------------------------------------ send
    def _code_10(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        return self._send(conn, cmd, dict(cmd.ext_fields))

    def _code_310(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        fields = expand_send_v2_fields(cmd.ext_fields)
        return self._send(conn, cmd, fields)

    _code_320 = _code_310

    def _send(
        self, conn: Connection, cmd: RemotingCommand, fields: dict[str, str]
    ) -> RemotingCommand | None:
        if self.broker_id != 0:
            return cmd.response(MQResponseCode.SERVICE_NOT_AVAILABLE, remark="slave")
        if self.send_error_code is not None:
            response = cmd.response(self.send_error_code, remark="injected failure")
            if self.send_error_delay_s <= 0:
                return response
            asyncio.get_running_loop().call_later(self.send_error_delay_s, conn.send, response)
            return None
        topic = fields["topic"]
        config = self.store.topics.get(topic)
        if config is None:
            default = fields.get("defaultTopic")
            if default and default in self.store.topics:
                n = min(int(fields.get("defaultTopicQueueNums", "4")), 8)
                self.create_topic(topic, n)
                config = self.store.topics[topic]
            else:
                return cmd.response(MQResponseCode.TOPIC_NOT_EXIST, remark=f"topic {topic}")
        if self.strict_queues and int(fields["queueId"]) >= config.write_queue_nums:
            return cmd.response(MQResponseCode.INVALID_PARAMETER, remark="no such write queue")
        queue_id = int(fields["queueId"]) % config.write_queue_nums
        batch = cmd.code == MQRequestCode.SEND_BATCH_MESSAGE or fields.get("batch") in (
            "true",
            "1",
        )
        if batch:
            items = [(b.body, b.flag, b.properties, 0) for b in decode_batch(cmd.body)]
        else:
            items = [
                (
                    cmd.body,
                    int(fields.get("flag", "0")),
                    fields.get("properties", ""),
                    int(fields.get("sysFlag", "0")),
                )
            ]
        ids = []
        first = -1
        for body, flag, props, sys_flag in items:
            offset, msg_id = self.append(
                topic,
                queue_id,
                body,
                props,
                flag=flag,
                sys_flag=sys_flag,
                reconsume=int(fields.get("reconsumeTimes", "0")),
            )
            ids.append(msg_id)
            first = offset if first < 0 else first
        if self.swallow_sends > 0:
            self.swallow_sends -= 1
            return None
        return cmd.response(
            0,
            ext_fields={
                "msgId": ",".join(ids),
                "queueId": str(queue_id),
                "queueOffset": str(first),
            },
        )

    def append(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: str,
        *,
        flag: int = 0,
        sys_flag: int = 0,
        reconsume: int = 0,
    ) -> tuple[int, str]:
        store = self.store
        queue = store.queue(topic, queue_id)
        offset = len(queue)
        physical = store.next_physical
        store.clock_ms += 1
        record = encode_record(
            topic=topic,
            queue_id=queue_id,
            body=body,
            flag=flag,
            properties=properties,
            sys_flag=sys_flag,
            born_timestamp=store.clock_ms,
            born_host=(HOST, 5555),
            store_timestamp=store.clock_ms,
            store_host=(HOST, self.port),
            reconsume_times=reconsume,
            queue_offset=offset,
            physical_offset=physical,
        )
        queue.append(record)
        store.by_physical[physical] = record
        store.next_physical += len(record)
        self._wake(topic, queue_id)
        return offset, create_offset_message_id(HOST, self.port, physical)

    # ------------------------------------------------------------------ pull
    def _code_11(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        f = cmd.ext_fields
        topic, queue_id = f["topic"], int(f["queueId"])
        sys_flag = int(f.get("sysFlag", "0"))
        if sys_flag & 1 and int(f.get("commitOffset", "-1")) >= 0 and self.broker_id == 0:
            self.store.offsets[(f["consumerGroup"], topic, queue_id)] = int(f["commitOffset"])
        if topic not in self.store.topics:
            return cmd.response(MQResponseCode.TOPIC_NOT_EXIST, remark=f"topic {topic}")
        response = self._pull_answer(cmd)
        if response.code == MQResponseCode.PULL_NOT_FOUND and sys_flag & 2:
            suspend_s = int(f.get("suspendTimeoutMillis", "15000")) / 1000
            loop = asyncio.get_running_loop()
            key = (topic, queue_id)
            entry: list[Any] = [conn, cmd, None]
            entry[2] = loop.call_later(suspend_s, self._expire, key, entry)
            self._waiters.setdefault(key, []).append(entry)
            return None
        return response

    def _expire(self, key: tuple[str, int], entry: list[Any]) -> None:
        waiters = self._waiters.get(key, [])
        if entry in waiters:
            waiters.remove(entry)
            conn, cmd, _ = entry
            if not conn.closed:
                conn.send(self._pull_answer(cmd))

    def _wake(self, topic: str, queue_id: int) -> None:
        waiters = self._waiters.pop((topic, queue_id), [])
        for conn, cmd, handle in waiters:
            handle.cancel()
            if not conn.closed:
                conn.send(self._pull_answer(cmd))

    def _pull_answer(self, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        topic, queue_id, offset = f["topic"], int(f["queueId"]), int(f["queueOffset"])
        max_nums = int(f.get("maxMsgNums", "32"))
        queue = self.store.queue(topic, queue_id)
        low = self.store.min_offsets.get((topic, queue_id), 0)
        high = len(queue)

        def answer(code: int, next_begin: int, body: bytes = b"") -> RemotingCommand:
            ext = {
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": str(next_begin),
                "minOffset": str(low),
                "maxOffset": str(high),
            }
            return cmd.response(code, ext_fields=ext, body=body)

        if offset < low:
            return answer(MQResponseCode.PULL_OFFSET_MOVED, low)
        if offset > high:
            return answer(MQResponseCode.PULL_OFFSET_MOVED, high)
        if offset == high:
            return answer(MQResponseCode.PULL_NOT_FOUND, offset)
        _, codes = parse_subscription(f.get("subscription", "*"))
        found = []
        scanned = offset
        for record in queue[offset : offset + max_nums]:
            scanned += 1
            if codes and read_dispatch_info(record).tags_code not in codes:
                continue
            found.append(record)
        if not found:
            return answer(MQResponseCode.PULL_RETRY_IMMEDIATELY, scanned)
        return answer(0, scanned, b"".join(found))

    # ------------------------------------------------------------------ offsets
    def _code_14(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        key = (f["consumerGroup"], f["topic"], int(f["queueId"]))
        if key not in self.store.offsets:
            return cmd.response(MQResponseCode.QUERY_NOT_FOUND, remark="not found")
        return cmd.response(0, ext_fields={"offset": str(self.store.offsets[key])})

    def _code_15(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if self.refuse_as_slave and self.broker_id != 0:
            return cmd.response(MQResponseCode.SERVICE_NOT_AVAILABLE, remark="slave")
        f = cmd.ext_fields
        self.store.offsets[(f["consumerGroup"], f["topic"], int(f["queueId"]))] = int(
            f["commitOffset"]
        )
        return cmd.response(0)

    def _code_30(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        return cmd.response(
            0, ext_fields={"offset": str(len(self.store.queue(f["topic"], int(f["queueId"]))))}
        )

    def _code_31(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        low = self.store.min_offsets.get((f["topic"], int(f["queueId"])), 0)
        return cmd.response(0, ext_fields={"offset": str(low)})

    def _code_29(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        queue = self.store.queue(f["topic"], int(f["queueId"]))
        target = int(f["timestamp"])
        for i, record in enumerate(queue):
            if read_dispatch_info(record).store_timestamp >= target:
                return cmd.response(0, ext_fields={"offset": str(i)})
        return cmd.response(0, ext_fields={"offset": str(len(queue))})

    # ------------------------------------------------------------------ consumers
    def _code_34(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        client_id = data["clientID"]
        for consumer in data.get("consumerDataSet", []):
            group = consumer["groupName"]
            members = self.store.members.setdefault(group, {})
            if consumer.get("messageModel") == "CLUSTERING":
                retry = f"%RETRY%{group}"
                if retry not in self.store.topics and self.broker_id == 0:
                    self.create_topic(retry, 1)
            if client_id not in members:
                members[client_id] = conn
                self._notify(group, skip=client_id)
            else:
                members[client_id] = conn
        return cmd.response(0)

    def _notify(self, group: str, skip: str | None = None) -> None:
        for client_id, member in self.store.members.get(group, {}).items():
            if client_id != skip and not member.closed:
                note = RemotingCommand(
                    MQRequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                    0,
                    ext_fields={"consumerGroup": group},
                )
                with contextlib.suppress(Exception):
                    member.send_oneway(note)

    def _code_35(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        group = f.get("consumerGroup", "")
        if group and self.store.members.get(group, {}).pop(f["clientID"], None) is not None:
            self._notify(group)
        return cmd.response(0)

    def _code_38(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields["consumerGroup"]
        members = self.store.members.get(group, {})
        ids = sorted(c for c, m in members.items() if not m.closed)
        if not ids and self.strict_consumer_list:  # as the broker answers
            return cmd.response(1, remark=f"no consumer of group {group} is online")
        return cmd.response(0, body=json.dumps({"consumerIdList": ids}).encode())

    def _code_36(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if self.send_back_error_code is not None:
            return cmd.response(self.send_back_error_code, remark="injected send-back failure")
        f = cmd.ext_fields
        record = self.store.by_physical[int(f["offset"])]
        (message,) = decode_records(record)
        group = f["group"]
        props = dict(message.properties)
        props.setdefault(MessageProperty.RETRY_TOPIC, message.topic)
        props.setdefault(MessageProperty.ORIGIN_MESSAGE_ID, message.msg_id)
        times = message.reconsume_times + 1
        max_times = int(f.get("maxReconsumeTimes", "16"))
        topic = f"%DLQ%{group}" if times > max_times else f"%RETRY%{group}"
        if topic not in self.store.topics:
            self.create_topic(topic, 1)
        self.append(topic, 0, message.body, encode_properties(props), reconsume=times)
        return cmd.response(0)

    def _code_41(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        group, client = data["consumerGroup"], data["clientId"]
        ok = []
        for mq in data["mqSet"]:
            key = (group, mq["topic"], mq["brokerName"], int(mq["queueId"]))
            owner = self.store.locks.get(key)
            if owner is None or owner == client:
                self.store.locks[key] = client
                ok.append(mq)
        return cmd.response(0, body=json.dumps({"lockOKMQSet": ok}).encode())

    def _code_42(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        data = json.loads(cmd.body)
        group, client = data["consumerGroup"], data["clientId"]
        for mq in data["mqSet"]:
            key = (group, mq["topic"], mq["brokerName"], int(mq["queueId"]))
            if self.store.locks.get(key) == client:
                del self.store.locks[key]
        return cmd.response(0)

    # ------------------------------------------------------------------ admin
    def _code_17(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        self.store.topics[f["topic"]] = TopicConfig(
            f["topic"],
            int(f.get("readQueueNums", "8")),
            int(f.get("writeQueueNums", "8")),
            int(f.get("perm", "6")),
        )
        self._spawn(self.register())
        return cmd.response(0)

    def _code_215(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.store.topics.pop(cmd.ext_fields["topic"], None)
        return cmd.response(0)

    def _code_208(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        group, only = f["consumerGroup"], f.get("topic") or None
        rows = [
            {
                "topic": t,
                "brokerName": self.name,
                "queueId": q,
                "brokerOffset": len(self.store.queue(t, q)),
                "consumerOffset": off,
            }
            for (g, t, q), off in sorted(self.store.offsets.items())
            if g == group and (only is None or t == only)
        ]
        return cmd.response(0, body=json.dumps({"offsetTable": rows}).encode())

    def _code_43(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        table: dict[str, dict[str, int]] = {}
        for (g, t, q), off in sorted(self.store.offsets.items()):
            table.setdefault(f"{t}@{g}", {})[str(q)] = off
        return cmd.response(0, body=json.dumps({"offsetTable": table}).encode())

    def _code_201(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        groups = {g: {"groupName": g} for g in sorted({g for g, _, _ in self.store.offsets})}
        return cmd.response(0, body=json.dumps({"subscriptionGroupTable": groups}).encode())

    def _code_202(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields["topic"]
        config = self.store.topics.get(topic)
        if config is None:
            return cmd.response(17, remark="no topic")
        rows = [
            {
                "topic": topic,
                "brokerName": self.name,
                "queueId": q,
                "minOffset": 0,
                "maxOffset": len(self.store.queue(topic, q)),
            }
            for q in range(config.read_queue_nums)
        ]
        return cmd.response(0, body=json.dumps({"offsetTable": rows}).encode())

    def _code_28(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        table = {"brokerName": self.name, "brokerId": str(self.broker_id), "role": "LEADER"}
        return cmd.response(0, body=json.dumps({"table": table}).encode())

    def _code_33(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        record = self.store.by_physical.get(int(cmd.ext_fields["offset"]))
        if record is None:
            return cmd.response(1, remark="no message at that offset")
        return cmd.response(0, body=record)

    def _code_12(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        f = cmd.ext_fields
        hits = []
        for (topic, _), queue in sorted(self.store.queues.items()):
            if topic != f["topic"]:
                continue
            for record in queue:
                (m,) = decode_records(record)
                if f["key"] in m.keys or m.properties.get("UNIQ_KEY") == f["key"]:
                    hits.append(record)
        if not hits:
            return cmd.response(MQResponseCode.QUERY_NOT_FOUND, remark="no message")
        return cmd.response(0, body=b"".join(hits))

    def _code_1000(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.transfers.append(cmd.ext_fields["to"])
        return cmd.response(0)


def decode_props(text: str) -> dict[str, str]:
    return decode_properties(text)
