"""The NameServer over the network: every served code, error answers, liveness, closed links."""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import Connection, MemoryNetwork, Network, TcpNetwork
from ledgermq.wire import FLAG_RESPONSE, MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import NAMESRV_HEADER_TYPES
from ledgermq.wire.route import (
    ClusterInfo,
    RegisterBrokerBody,
    TopicConfig,
    TopicList,
    TopicRouteData,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

pytestmark = pytest.mark.timeout(10)

T = TypeVar("T")
HOST = "127.0.0.1"
A, B, C = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
TOPICS = {"T": TopicConfig("T", 4, 4)}


class FakeClock:
    """A ``Clock`` moved by hand."""

    def __init__(self) -> None:
        self.now_ms = 0

    def monotonic_ms(self) -> int:
        return self.now_ms

    def wall_time_s(self) -> float:
        return self.now_ms / 1000


def arun(main: Coroutine[Any, Any, T], timeout_s: float = 5.0) -> T:
    """Run ``main`` on a fresh loop, bounded so a hang fails instead of stalling."""
    return asyncio.run(asyncio.wait_for(main, timeout_s))


async def eventually(predicate: Callable[[], bool], timeout_s: float = 2.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110 - polls state that has no event to wait on
            await asyncio.sleep(0.002)


class Client:
    """A raw remoting client; frames nobody waits for land in ``unsolicited``."""

    def __init__(self, conn: Connection, unsolicited: list[RemotingCommand]) -> None:
        self.conn = conn
        self.unsolicited = unsolicited

    async def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        command = RemotingCommand(code=code, opaque=0, ext_fields=ext or {}, body=body)
        return await self.conn.request(command, timeout_s=2.0)

    async def register(
        self,
        addr: str,
        broker_id: int,
        *,
        name: str = "broker-a",
        topics: dict[str, TopicConfig] | None = None,
        term: int | None = None,
        compressed: bool = False,
        **extra: str,
    ) -> RemotingCommand:
        body, crc = RegisterBrokerBody(topics or {}).encode(compressed=compressed)
        ext = register_ext(addr, broker_id, name=name, crc=crc, compressed=compressed)
        if term is not None:
            ext["term"] = str(term)
        ext.update(extra)
        return await self.call(MQRequestCode.REGISTER_BROKER, ext, body)

    async def route(self, topic: str) -> RemotingCommand:
        return await self.call(MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def register_ext(
    addr: str, broker_id: int, *, name: str = "broker-a", crc: int = 0, compressed: bool = False
) -> dict[str, str]:
    return {
        "clusterName": "c1",
        "brokerName": name,
        "brokerAddr": addr,
        "haServerAddr": addr.replace("10911", "10912"),
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(crc),
    }


async def connect(network: Network, server: NameServer) -> Client:
    unsolicited: list[RemotingCommand] = []
    conn = await network.connect(
        HOST, server.port, lambda _c, cmd: unsolicited.append(cmd), timeout_s=2.0
    )
    return Client(conn, unsolicited)


def with_server(
    test: Callable[[NameServer, MemoryNetwork, FakeClock], Awaitable[None]],
    config: NameServerConfig | None = None,
) -> None:
    """Run ``test`` against a started NameServer on a MemoryNetwork, closed afterwards."""

    async def main() -> None:
        network, clock = MemoryNetwork(), FakeClock()
        server = NameServer(config or NameServerConfig(listen_port=0), network=network, clock=clock)
        await server.start()
        try:
            await test(server, network, clock)
        finally:
            await server.close()

    arun(main())


def test_register_then_route_and_slaves_learn_the_master() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        master = await client.register(A, 0, topics=TOPICS, term=1)
        assert master.code == MQResponseCode.SUCCESS
        assert master.ext_fields == {"haServerAddr": "", "masterAddr": ""}
        slave = await client.register(B, 2, compressed=True)
        assert slave.code == MQResponseCode.SUCCESS
        assert slave.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": A}
        answer = await client.route("T")
        assert answer.code == MQResponseCode.SUCCESS
        route = TopicRouteData.from_json(answer.body)
        assert route.broker_datas[0].broker_addrs == {0: A, 2: B}
        assert json.loads(answer.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A, "2": B}

    with_server(test)


def test_unknown_topic_is_17_with_rocketmqs_remark() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        answer = await client.route("nope")
        assert answer.code == MQResponseCode.TOPIC_NOT_EXIST
        assert answer.remark == "No topic route info in name server for the topic: nope"
        assert answer.ext_fields == {}

    with_server(test)


def test_unknown_code_is_3() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        answer = await client.call(9999)
        assert answer.code == MQResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert answer.remark == "request type 9999 not supported"

    with_server(test)


@pytest.mark.parametrize(
    ("ext_change", "body", "reason"),
    [
        ({}, b"{not json", "RegisterBrokerBody is not valid JSON"),
        ({"bodyCrc32": "12345"}, None, "CRC32"),
        ({"compressed": "true"}, None, "does not inflate"),
        ({"brokerId": "zero"}, None, "'brokerId' must be an integer"),
        ({"brokerName": ""}, None, "'brokerName' must not be empty"),
        ({"heartbeatTimeoutMillis": "-1"}, None, "heartbeatTimeoutMillis must be positive"),
    ],
)
def test_a_malformed_registration_is_answered_and_the_connection_stays_usable(
    ext_change: dict[str, str], body: bytes | None, reason: str
) -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        good, crc = RegisterBrokerBody(TOPICS).encode(compressed=False)
        raw = good if body is None else body
        ext = register_ext(A, 0, crc=crc if body is None else zlib.crc32(raw) & 0x7FFFFFFF)
        ext.update(ext_change)
        answer = await client.call(MQRequestCode.REGISTER_BROKER, ext, raw)
        assert answer.code == MQResponseCode.SYSTEM_ERROR
        assert answer.remark is not None
        assert reason in answer.remark
        assert server.routes.broker_data("broker-a") is None
        assert (await client.register(A, 0, topics=TOPICS)).code == MQResponseCode.SUCCESS
        assert (await client.route("T")).code == MQResponseCode.SUCCESS

    with_server(test)


def test_a_missing_header_field_is_named() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        answer = await client.call(MQRequestCode.GET_ROUTEINFO_BY_TOPIC)
        assert answer.code == MQResponseCode.SYSTEM_ERROR
        assert answer.remark == "the request header lacks the field 'topic'"

    with_server(test)


def test_a_bug_is_answered_system_error_and_the_server_keeps_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        def broken(topic: str) -> None:
            raise RuntimeError("boom")

        client = await connect(network, server)
        monkeypatch.setattr(server.routes, "route", broken)
        answer = await client.route("T")
        assert answer.code == MQResponseCode.SYSTEM_ERROR
        assert answer.remark == ("the name server failed on request code 105: RuntimeError: boom")
        monkeypatch.undo()
        assert (await client.route("T")).code == MQResponseCode.TOPIC_NOT_EXIST

    with_server(test)


def test_oneway_registrations_apply_without_answer_and_responses_are_ignored() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        body, crc = RegisterBrokerBody(TOPICS).encode(compressed=False)
        client.conn.send_oneway(
            RemotingCommand(
                MQRequestCode.REGISTER_BROKER, 0, ext_fields=register_ext(A, 0, crc=crc), body=body
            )
        )
        client.conn.send(RemotingCommand(MQRequestCode.GET_BROKER_CLUSTER_INFO, 77, FLAG_RESPONSE))
        assert (await client.route("T")).code == MQResponseCode.SUCCESS
        assert client.unsolicited == []

    with_server(test)


def test_cluster_info_topic_list_delete_and_unregister() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        await client.register(A, 0, topics={"T": TopicConfig("T"), "U": TopicConfig("U")})
        await client.register(B, 1, name="broker-b", topics=TOPICS)
        info = ClusterInfo.from_json(
            (await client.call(MQRequestCode.GET_BROKER_CLUSTER_INFO)).body
        )
        assert info.cluster_addr_table == {"c1": ("broker-a", "broker-b")}
        topics = await client.call(MQRequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert TopicList.from_json(topics.body).topics == ("T", "U")
        deleted = await client.call(MQRequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "U"})
        assert (deleted.code, deleted.ext_fields) == (MQResponseCode.SUCCESS, {})
        assert (await client.route("U")).code == MQResponseCode.TOPIC_NOT_EXIST
        ext = {"clusterName": "c1", "brokerName": "broker-a", "brokerAddr": A, "brokerId": "0"}
        gone = await client.call(MQRequestCode.UNREGISTER_BROKER, ext)
        assert gone.code == MQResponseCode.SUCCESS
        assert server.routes.broker_data("broker-a") is None

    with_server(test)


def test_a_stale_master_claim_is_told_the_real_master() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        await client.register(A, 0, topics=TOPICS, term=5)
        await client.register(C, 3, term=6)  # C follows B, the new leader of term 6
        await client.register(B, 0, topics=TOPICS, term=6)
        stale = await client.register(A, 0, topics=TOPICS, term=5)
        assert stale.code == MQResponseCode.SUCCESS
        assert stale.ext_fields["masterAddr"] == B
        route = TopicRouteData.from_json((await client.route("T")).body)
        assert route.broker_datas[0].broker_addrs == {0: B, 3: C}

    with_server(test)


def test_requests_about_the_master_over_another_connection_are_refused() -> None:
    """Issue 13 item 7: the master's address is bound to its connection; a forged frame from
    elsewhere can neither demote, unregister nor re-term it, and the binding ends with that
    connection."""

    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        master = await connect(network, server)
        await master.register(A, 0, topics=TOPICS, term=5)
        await master.register(B, 2, term=5)
        forger = await connect(network, server)
        for answer in (
            await forger.register(A, 2, term=5),
            await forger.register(A, 0, term=6),
            await forger.call(MQRequestCode.UNREGISTER_BROKER, register_ext(A, 0)),
        ):
            assert answer.code == MQResponseCode.NO_PERMISSION
            assert "another open connection" in (answer.remark or "")
        route = TopicRouteData.from_json((await forger.route("T")).body)
        assert route.broker_datas[0].broker_addrs == {0: A, 2: B}
        assert server.routes.master_term("broker-a") == 5
        moved = await forger.register(B, 2, term=5)  # a slave may move to a new connection
        assert moved.code == MQResponseCode.SUCCESS
        master.conn.close()
        await eventually(lambda: not server.routes.is_live(A))
        assert (await forger.register(A, 0, topics=TOPICS, term=5)).code == MQResponseCode.SUCCESS

    with_server(test)


def test_a_closed_connection_removes_the_brokers_registered_over_it() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        first = await connect(network, server)
        other = await connect(network, server)
        await first.register(A, 0, topics=TOPICS)
        await first.register(B, 2)
        await other.register(C, 3)
        await first.register(B, 2)  # B moves to a new connection before the old one closes
        await (await connect(network, server)).register(B, 2)
        first.conn.close()
        await eventually(lambda: not server.routes.is_live(A))
        data = server.routes.broker_data("broker-a")
        assert data is not None
        assert dict(data.broker_addrs) == {2: B, 3: C}

    with_server(test)


def test_the_scan_task_expires_silent_brokers() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        await client.register(A, 0, topics=TOPICS)
        await client.register(B, 2, heartbeatTimeoutMillis="1000")
        clock.now_ms = 1_001
        await eventually(lambda: not server.routes.is_live(B))
        assert server.routes.is_live(A)
        clock.now_ms = 120_001
        await eventually(lambda: server.routes.route("T") is None)

    with_server(test, NameServerConfig(listen_port=0, scan_interval_ms=5))


def test_register_and_route_over_tcp() -> None:
    async def main() -> None:
        network = TcpNetwork()
        server = NameServer(NameServerConfig(listen_port=0), network=network)
        await server.start()
        try:
            assert server.port > 0
            client = await connect(network, server)
            assert (await client.register(A, 0, topics=TOPICS)).code == MQResponseCode.SUCCESS
            route = TopicRouteData.from_json((await client.route("T")).body)
            assert route.broker_datas[0].master_addr == A
            assert (await client.call(4242)).code == MQResponseCode.REQUEST_CODE_NOT_SUPPORTED
            client.conn.close()
            await client.conn.wait_closed()
            await eventually(lambda: server.routes.route("T") is None)
        finally:
            await server.close()
        await server.close()  # twice is harmless

    arun(main())


def test_get_route_version_answers_a_version_that_moves_with_the_routes() -> None:
    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)

        async def version() -> str:
            answer = await client.call(MQRequestCode.GET_ROUTE_VERSION)
            assert answer.code == MQResponseCode.SUCCESS
            return answer.ext_fields["routeVersion"]

        first = await version()
        await client.register(A, 0, topics=TOPICS, term=1)
        second = await version()
        assert second != first
        await client.register(A, 0, topics=TOPICS, term=1)  # nothing changed
        assert await version() == second

    with_server(test)


_HEADERLESS = {
    MQRequestCode.GET_BROKER_CLUSTER_INFO,
    MQRequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    MQRequestCode.GET_ROUTE_VERSION,
}


def test_every_served_code_with_a_header_reads_it_typed() -> None:
    """Issue 26 item 2: the codes the NameServer serves are those of its typed headers
    (``wire.namesrv_headers``) and three that carry none; a new code needs either."""
    server = NameServer(NameServerConfig(listen_port=0), network=MemoryNetwork())
    assert set(server._processors) - _HEADERLESS == set(NAMESRV_HEADER_TYPES)


_MALFORMED = [
    (MQRequestCode.REGISTER_BROKER, {"brokerName": "b", "brokerAddr": A, "brokerId": "0"},
     "the request header lacks the field 'clusterName'"),
    (MQRequestCode.REGISTER_BROKER, register_ext(A, 0) | {"heartbeatTimeoutMillis": "0"},
     "heartbeatTimeoutMillis must be positive, not 0"),
    (MQRequestCode.REGISTER_BROKER, register_ext(A, 0) | {"term": "soon"},
     "header field 'term' must be an integer, got 'soon'"),
    (MQRequestCode.UNREGISTER_BROKER,
     {"clusterName": "c1", "brokerName": "broker-a", "brokerAddr": " ", "brokerId": "0"},
     "header field 'brokerAddr' must not be empty"),
    (MQRequestCode.UNREGISTER_BROKER,
     {"clusterName": "c1", "brokerName": "broker-a", "brokerAddr": A},
     "the request header lacks the field 'brokerId'"),
    (MQRequestCode.GET_ROUTEINFO_BY_TOPIC, {}, "the request header lacks the field 'topic'"),
    (MQRequestCode.DELETE_TOPIC_IN_NAMESRV, {"clusterName": "c1"},
     "the request header lacks the field 'topic'"),
    (MQRequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": ""},
     "header field 'brokerName' must not be empty"),
    (MQRequestCode.ADD_WRITE_PERM_OF_BROKER, {},
     "the request header lacks the field 'brokerName'"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "ext", "remark"), _MALFORMED)
def test_a_malformed_header_is_refused_with_its_rule_not_as_a_failure(
    code: int, ext: dict[str, str], remark: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client's malformed header is answered with the rule its typed header's parse broke
    (code 1, as RocketMQ answers a header it cannot decode), logged as a refusal, not as a
    failure of the NameServer (no traceback), and the connection keeps serving."""

    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        answer = await client.call(code, ext)
        assert answer.code == MQResponseCode.SYSTEM_ERROR
        assert answer.remark == remark
        assert (await client.register(A, 0, topics=TOPICS)).code == MQResponseCode.SUCCESS
        assert (await client.route("T")).code == MQResponseCode.SUCCESS

    with caplog.at_level("INFO", logger="ledgermq.namesrv.server"):
        with_server(test)
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelname == "ERROR"] == []
    assert any("namesrv refused request" in r.getMessage() for r in caplog.records)


def test_a_malformed_topic_has_no_route_and_deletes_nothing() -> None:
    """The route lookup's topic is looked up, not checked with the naming rules: a malformed
    one has no route (TOPIC_NOT_EXIST), as before the header was typed and as in RocketMQ."""

    async def test(server: NameServer, network: MemoryNetwork, clock: FakeClock) -> None:
        client = await connect(network, server)
        answer = await client.route("a/b")
        assert answer.code == MQResponseCode.TOPIC_NOT_EXIST
        answer = await client.call(MQRequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "a/b"})
        assert answer.code == MQResponseCode.SUCCESS

    with_server(test)
