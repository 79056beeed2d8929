"""ClientInstance: NameServer rotation, error mapping, server-to-client requests, heartbeats."""

from __future__ import annotations

import json

import pytest

from ledgermq.client._remoting import ClientInstance, check_response, parse_namesrv_addr
from ledgermq.errors import ConfigError, MQResponseError, TopicNotFoundError
from ledgermq.net import ConnectionPool
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.running_info import ConsumerRunningInfo, SubscriptionInfo

from .conftest import NAMESRV, arun, cluster, eventually


def test_namesrv_addresses_parse() -> None:
    assert parse_namesrv_addr(" a:1; b:2,c:3 ") == ["a:1", "b:2", "c:3"]
    for bad in ("", ";", "nohost", "h:x"):
        with pytest.raises(ConfigError):
            parse_namesrv_addr(bad)


def test_error_mapping_is_by_code() -> None:
    ok = RemotingCommand(0, 1, flag=1)
    assert check_response(ok, "x:1") is ok
    with pytest.raises(TopicNotFoundError) as missing:
        check_response(RemotingCommand(17, 1, flag=1, remark="no topic"), "x:1")
    assert missing.value.refresh_route
    assert "no topic" in str(missing.value)
    with pytest.raises(MQResponseError) as busy:
        check_response(RemotingCommand(14, 1, flag=1), "x:1")
    assert busy.value.retriable
    assert busy.value.address == "x:1"


def test_a_dead_namesrv_is_skipped_and_routes_are_cached() -> None:
    async def main() -> None:
        async with cluster() as env:
            client = ClientInstance(f"127.0.0.1:1;{NAMESRV}", network=env.network)
            client._namesrv_index = 0  # the dead one first
            route = await client.topic_route("T")
            assert route.queue_datas[0].write_queue_nums == 4
            assert await client.topic_route("T") is route  # cached
            with pytest.raises(TopicNotFoundError):
                await client.topic_route("Nope")
            await client.close()

    arun(main())


def test_server_requests_notify_running_info_and_unsupported() -> None:
    notified: list[str] = []

    class Handle:
        group = "g"

        def heartbeat_data(self) -> dict[str, object]:
            return {"groupName": "g", "subscriptionDataSet": []}

        def topics(self) -> list[str]:
            return ["T"]

        def on_consumer_ids_changed(self) -> None:
            notified.append("ids")

        def on_route_changed(self, topic: str) -> None:
            notified.append(topic)

        def running_info(self) -> ConsumerRunningInfo:
            notified.append("running info")
            return ConsumerRunningInfo({"consumerGroup": "g"}, (SubscriptionInfo("T", "a||b"),))

    async def main() -> None:
        async with cluster() as env:
            (broker,) = env.brokers.values()
            client = ClientInstance(NAMESRV, network=env.network, client_id="me")
            client.consumers["g"] = Handle()
            await client.topic_route("T")
            assert await client.send_heartbeat() == 1
            heartbeat = json.loads(broker.requests[-1].body)
            assert heartbeat["clientID"] == "me"
            assert heartbeat["consumerDataSet"][0]["groupName"] == "g"
            conn = broker.store.members["g"]["me"]
            # the broker asks something we do not serve, then notifies
            pool = ConnectionPool(env.network)
            answer = await conn.request(
                RemotingCommand(MQRequestCode.RESET_CONSUMER_CLIENT_OFFSET, 0), 2
            )
            assert answer.code == MQResponseCode.REQUEST_CODE_NOT_SUPPORTED
            # the broker passes on an admin's consumerStatus: the group's consumer answers
            ask = {"consumerGroup": "g", "clientId": "me", "jstackEnable": "false"}
            answer = await conn.request(
                RemotingCommand(MQRequestCode.GET_CONSUMER_RUNNING_INFO, 0, ext_fields=ask), 2
            )
            assert answer.code == MQResponseCode.SUCCESS
            info = ConsumerRunningInfo.decode(answer.body)
            assert info.properties == {"consumerGroup": "g"}
            assert info.subscriptions == (SubscriptionInfo("T", "a||b"),)
            answer = await conn.request(
                RemotingCommand(
                    MQRequestCode.GET_CONSUMER_RUNNING_INFO,
                    0,
                    ext_fields={"consumerGroup": "x", "clientId": "me"},
                ),
                2,
            )
            assert answer.code == MQResponseCode.SYSTEM_ERROR
            assert answer.remark == "The Consumer Group <x> not exist in this consumer"
            # read with the typed header the broker writes it with: no clientId, the rule
            answer = await conn.request(
                RemotingCommand(
                    MQRequestCode.GET_CONSUMER_RUNNING_INFO, 0, ext_fields={"consumerGroup": "g"}
                ),
                2,
            )
            assert answer.code == MQResponseCode.SYSTEM_ERROR
            assert answer.remark == "the request header lacks the field 'clientId'"
            conn.send_oneway(
                RemotingCommand(
                    MQRequestCode.NOTIFY_CONSUMER_IDS_CHANGED, 0, ext_fields={"consumerGroup": "g"}
                )
            )
            await eventually(lambda: "ids" in notified)
            # a route change is reported to consumers of the topic
            broker.create_topic("T", 8)
            await eventually(lambda: broker.store.topics["T"].write_queue_nums == 8)
            await eventually(lambda: bool(broker._tasks) is False)
            await client.topic_route("T", refresh=True)
            assert "T" in notified
            await pool.close()
            await client.close()

    arun(main())
