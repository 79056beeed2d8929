"""SQL92 subscriptions on the pull path and CHECK_CLIENT_CONFIG (46), against the in-process
broker group: matching messages delivered, the others skipped, refusals that move nothing."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import decode_records

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ledgermq.wire import RemotingCommand

pytestmark = pytest.mark.timeout(90)

FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION = 1, 4

# (body, properties): what the tests send to queue 0 of topic "Shop", in this order
MESSAGES: list[tuple[bytes, dict[str, str]]] = [
    (b"m0", {"color": "red", "price": "10"}),
    (b"m1", {"color": "blue", "price": "20"}),
    (b"m2", {"color": "red", "price": "3"}),
    (b"m3", {"price": "50"}),
    (b"m4", {"color": "red", "price": "7.5", "TAGS": "sale"}),
    (b"m5", {"color": "Red", "price": "99"}),
    (b"m6", {"color": "red", "price": "cheap"}),
    (b"m7", {"color": "blue", "TAGS": "sale"}),
]


async def _fill(cluster: Cluster) -> str:
    master = await cluster.master()
    for body, props in MESSAGES:
        sent = await cluster.send(master.address, "Shop", body, queue_id=0, properties=props)
        assert sent.code == MQResponseCode.SUCCESS, sent.remark
    return master.address


async def _pull(
    cluster: Cluster,
    address: str,
    offset: int,
    subscription: str | None,
    expression_type: str | None = "SQL92",
    *,
    sys_flag: int = FLAG_SUBSCRIPTION,
    group: str = "cg",
    max_nums: int = 32,
    commit_offset: int = -1,
) -> RemotingCommand:
    fields = {
        "consumerGroup": group,
        "topic": "Shop",
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": "0",
        "subVersion": "0",
    }
    if subscription is not None:
        fields["subscription"] = subscription
    if expression_type is not None:
        fields["expressionType"] = expression_type
    return await cluster.request(address, MQRequestCode.PULL_MESSAGE, fields)


def _bodies(response: RemotingCommand) -> list[bytes]:
    assert response.code == MQResponseCode.SUCCESS, (response.code, response.remark)
    return [m.body for m in decode_records(response.body, check_crc=True)]


def _check_body(expression: str, expression_type: str | None) -> bytes:
    sub: dict[str, object] = {"topic": "Shop", "subString": expression, "classFilterMode": False}
    if expression_type is not None:
        sub["expressionType"] = expression_type
    return json.dumps({"clientId": "c1", "group": "cg", "subscriptionData": sub}).encode()


def test_a_sql92_pull_delivers_exactly_the_matching_messages(tmp_path: Path) -> None:
    """Regression (issue 13 item 3): the selector was read as a tag whose hash matched nothing,
    so the pull skipped every message and moved the offset past them."""

    async def test(cluster: Cluster) -> None:
        address = await _fill(cluster)
        whole = await _pull(cluster, address, 0, "color = 'red' AND price > 5.0")
        assert _bodies(whole) == [b"m0", b"m4"]
        assert whole.ext_fields["nextBeginOffset"] == str(len(MESSAGES))
        # every message is looked at once: one at a time, a match is never passed over
        seen, offset = [], 0
        while offset < len(MESSAGES):
            one = await _pull(cluster, address, offset, "color = 'red' AND price > 5.0", max_nums=1)
            if one.code == MQResponseCode.SUCCESS:
                seen += _bodies(one)
            else:
                assert one.code == MQResponseCode.PULL_RETRY_IMMEDIATELY, one.remark
            assert int(one.ext_fields["nextBeginOffset"]) == offset + 1
            offset += 1
        assert seen == [b"m0", b"m4"]
        # TAGS is a property; keywords in any case; NULL is never equal nor unequal
        tagged = await _pull(cluster, address, 0, "tags = 'sale' or price between 45 and 60")
        # property names are case-sensitive: "tags" is missing (NULL), only the price matches
        assert _bodies(tagged) == [b"m3"]
        tagged = await _pull(cluster, address, 0, "TAGS = 'sale' or price between 45 and 60")
        assert _bodies(tagged) == [b"m3", b"m4", b"m7"]
        not_red = await _pull(cluster, address, 0, "color <> 'red'")
        assert _bodies(not_red) == [b"m1", b"m5", b"m7"]
        # nothing matches: the pull goes on past them, as a tag filter does
        none = await _pull(cluster, address, 0, "color = 'green'")
        assert none.code == MQResponseCode.PULL_RETRY_IMMEDIATELY
        assert none.ext_fields["nextBeginOffset"] == str(len(MESSAGES))
        # the tag path is unchanged
        by_tag = await _pull(cluster, address, 0, "sale", "TAG")
        assert _bodies(by_tag) == [b"m4", b"m7"]
        everything = await _pull(cluster, address, 0, "*", None)
        assert len(_bodies(everything)) == len(MESSAGES)

    run_with_cluster(tmp_path, test)


def test_a_pull_without_subscription_uses_the_sql92_one_the_heartbeat_registered(
    tmp_path: Path,
) -> None:
    """Java push consumers do not send their subscription with each pull (no SUBSCRIPTION
    flag): the broker must use the SQL92 selector their heartbeat registered."""

    async def test(cluster: Cluster) -> None:
        address = await _fill(cluster)
        heartbeat = {
            "clientID": "c1",
            "consumerDataSet": [
                {
                    "groupName": "hb",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": "Shop", "subString": "price >= 20", "expressionType": "SQL92"}
                    ],
                }
            ],
        }
        response = await cluster.request(
            address, MQRequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode()
        )
        assert response.code == MQResponseCode.SUCCESS, response.remark
        pulled = await _pull(cluster, address, 0, None, "SQL92", sys_flag=0, group="hb")
        assert _bodies(pulled) == [b"m1", b"m3", b"m5"]

    run_with_cluster(tmp_path, test)


def test_a_malformed_selector_is_refused_with_its_position(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        address = await _fill(cluster)
        bad = await _pull(cluster, address, 0, "color = 'red' AND price >", commit_offset=3)
        assert bad.code == MQResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "column 26" in (bad.remark or ""), bad.remark
        assert "nextBeginOffset" not in bad.ext_fields
        unknown_type = await _pull(cluster, address, 0, "a = 1", "XPATH")
        assert unknown_type.code == MQResponseCode.SUBSCRIPTION_PARSE_FAILED
        # CHECK_CLIENT_CONFIG answers as the pull would
        for expression, kind, code in [
            ("color = 'red'", "SQL92", MQResponseCode.SUCCESS),
            ("a || b", "TAG", MQResponseCode.SUCCESS),
            ("a || b", None, MQResponseCode.SUCCESS),
            ("color = = 'red'", "SQL92", MQResponseCode.SUBSCRIPTION_PARSE_FAILED),
            ("", "SQL92", MQResponseCode.SUBSCRIPTION_PARSE_FAILED),
        ]:
            checked = await cluster.request(
                address, MQRequestCode.CHECK_CLIENT_CONFIG, body=_check_body(expression, kind)
            )
            assert checked.code == code, (expression, checked.remark)
        checked = await cluster.request(
            address, MQRequestCode.CHECK_CLIENT_CONFIG, body=_check_body("color = = 'red'", "SQL92")
        )
        assert "column 9" in (checked.remark or "")
        no_sub = await cluster.request(address, MQRequestCode.CHECK_CLIENT_CONFIG, body=b"{}")
        assert no_sub.code == MQResponseCode.SUCCESS
        garbled = await cluster.request(address, MQRequestCode.CHECK_CLIENT_CONFIG, body=b"[")
        assert garbled.code == MQResponseCode.SYSTEM_ERROR
        assert "CheckClientRequestBody" in (garbled.remark or "")

    run_with_cluster(tmp_path, test)


async def _committed(cluster: Cluster, address: str, group: str) -> int | None:
    response = await cluster.request(
        address,
        MQRequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": "Shop", "queueId": "0"},
    )
    if response.code == MQResponseCode.QUERY_NOT_FOUND:
        return None
    return int(response.ext_fields["offset"])


def test_with_enable_property_filter_false_a_sql92_pull_is_refused_and_moves_nothing(
    tmp_path: Path,
) -> None:
    async def test(cluster: Cluster) -> None:
        address = await _fill(cluster)
        refused = await _pull(
            cluster,
            address,
            0,
            "color = 'red'",
            sys_flag=FLAG_SUBSCRIPTION | FLAG_COMMIT_OFFSET,
            group="off",
            commit_offset=5,
        )
        assert refused.code == MQResponseCode.SYSTEM_ERROR
        assert refused.remark == "The broker does not support consumer to filter message by SQL92"
        assert "nextBeginOffset" not in refused.ext_fields
        checked = await cluster.request(
            address, MQRequestCode.CHECK_CLIENT_CONFIG, body=_check_body("a = 1", "SQL92")
        )
        assert checked.code == MQResponseCode.SYSTEM_ERROR
        assert checked.remark == refused.remark
        # the same pull by tag does commit its offset: the refusal above is what kept it
        tagged = await _pull(
            cluster, address, 0, "*", "TAG", sys_flag=5, group="on", commit_offset=5
        )
        assert tagged.code == MQResponseCode.SUCCESS
        for _ in range(200):
            if await _committed(cluster, address, "on") == 5:
                break
            await asyncio.sleep(0.02)
        assert await _committed(cluster, address, "on") == 5
        assert await _committed(cluster, address, "off") == 0  # none stored (the queue starts at 0)

    run_with_cluster(tmp_path, test, enable_property_filter=False)


def test_enable_property_filter_is_a_broker_conf_key() -> None:
    from ledgermq.broker.config import BrokerConfig

    base: Mapping[str, str] = {"dLegerPeers": "n0-127.0.0.1:40911"}
    assert BrokerConfig.from_properties(base).enable_property_filter is True
    off = BrokerConfig.from_properties({**base, "enablePropertyFilter": "false"})
    assert off.enable_property_filter is False
