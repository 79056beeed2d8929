"""Route and registration bodies: round trips, what Java sends, and garbage -> BadRequestError."""

from __future__ import annotations

import contextlib
import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import BadRequestError
from ledgermq.wire import json_fields
from ledgermq.wire import route as route_module
from ledgermq.wire.json_fields import load_json, quote_numeric_keys
from ledgermq.wire.route import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicList,
    TopicRouteData,
    body_crc32,
    is_readable,
    is_writable,
)

# The sample of protocol-remoting-and-grpc.md section 2.5, with fastjson's numeric key as old
# Java NameServers write it.
JAVA_ROUTE = (
    b'{"orderTopicConf": null,\n'
    b' "queueDatas":  [{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,'
    b'"perm":6,"topicSysFlag":0}],\n'
    b' "brokerDatas": [{"cluster":"DefaultCluster","brokerName":"broker-a",'
    b'"brokerAddrs":{0:"127.0.0.1:10911"},\n'
    b'                  "enableActingMaster":false,"zoneName":null}],\n'
    b' "filterServerTable": {}}'
)

# What a Java 4.9 broker registers: nulls left out by fastjson, extra fields we do not know.
JAVA_REGISTER = json.dumps(
    {
        "topicConfigSerializeWrapper": {
            "topicConfigTable": {
                "TopicTest": {
                    "topicName": "TopicTest",
                    "readQueueNums": 4,
                    "writeQueueNums": 4,
                    "perm": 6,
                    "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": 0,
                    "order": False,
                },
                "TBW102": {"topicName": "TBW102", "perm": 7},
            },
            "dataVersion": {"timestamp": 1700000000000, "counter": 3},
            "mappingDataVersion": {"timestamp": 0, "counter": 0},
        },
        "filterServerList": [],
    }
).encode()


def test_the_java_route_sample_decodes_and_reencodes_as_standard_json() -> None:
    route = TopicRouteData.from_json(JAVA_ROUTE)
    assert route.queue_datas == (QueueData("broker-a", 4, 4, 6, 0),)
    (broker,) = route.broker_datas
    assert broker == BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})
    assert broker.master_addr == "127.0.0.1:10911"
    assert route.order_topic_conf is None
    standard = json.loads(route.to_json())
    assert standard["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert set(standard) == {"orderTopicConf", "queueDatas", "brokerDatas", "filterServerTable"}
    assert TopicRouteData.from_json(route.to_json()) == route


def test_java_registration_takes_java_defaults_and_skips_unknown_fields() -> None:
    body = RegisterBrokerBody.decode(
        JAVA_REGISTER, compressed=False, expected_crc32=body_crc32(JAVA_REGISTER)
    )
    assert body.topic_configs["TopicTest"] == TopicConfig("TopicTest", 4, 4, 6)
    assert body.topic_configs["TBW102"] == TopicConfig("TBW102", 16, 16, 7)
    assert body.data_version == DataVersion(0, 1700000000000, 3)
    assert body.filter_server_list == ()


def test_a_registration_without_wrapper_is_empty() -> None:
    assert RegisterBrokerBody.from_json(b"{}") == RegisterBrokerBody()


def test_topic_config_json_has_rocketmq_field_names() -> None:
    config = TopicConfig("T", 8, 8, PERM_READ, attributes={"+message.type": "NORMAL"})
    assert json.loads(config.to_json()) == {
        "topicName": "T",
        "readQueueNums": 8,
        "writeQueueNums": 8,
        "perm": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        "attributes": {"+message.type": "NORMAL"},
    }
    assert TopicConfig.from_json(config.to_json()) == config


def test_perm_helpers() -> None:
    assert is_readable(6)
    assert is_writable(6)
    assert is_readable(PERM_READ)
    assert not is_writable(PERM_READ)
    assert not is_readable(PERM_WRITE | PERM_INHERIT)


def test_numeric_keys_are_quoted_only_outside_strings() -> None:
    text = '{0:"a", 12 : "b,3:c", "k":{-1:"{4:x"}}'
    assert quote_numeric_keys(text) == '{"0":"a", "12" : "b,3:c", "k":{"-1":"{4:x"}}'
    assert quote_numeric_keys('["a\\"",1]') == '["a\\"",1]'


def test_the_numeric_key_fix_up_is_linear_on_hostile_input() -> None:
    """An unterminated string followed by many escaped quotes must not cost quadratic time."""
    hostile = b'{0:"' + b'\\"' * 300_000
    with pytest.raises(BadRequestError, match="not valid JSON"):
        TopicRouteData.from_json(hostile)


@pytest.mark.parametrize("compressed", [False, True])
def test_register_body_encode_decode_with_crc(compressed: bool) -> None:
    body = RegisterBrokerBody(
        {"T": TopicConfig("T", 2, 2), "U": TopicConfig("U", order=True)},
        DataVersion(1, 2, 3),
        ("10.0.0.1:1",),
    )
    raw, crc = body.encode(compressed=compressed)
    assert crc == zlib.crc32(raw) & 0x7FFFFFFF
    assert (zlib.decompress(raw) if compressed else raw) == body.to_json()
    assert RegisterBrokerBody.decode(raw, compressed=compressed, expected_crc32=crc) == body


def test_the_crc_is_accepted_masked_unsigned_or_signed_and_skipped_when_zero() -> None:
    raw, _ = RegisterBrokerBody().encode(compressed=False)
    unsigned = zlib.crc32(raw)
    signed = unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned
    for crc in (unsigned, signed, unsigned & 0x7FFFFFFF, None, 0):
        RegisterBrokerBody.decode(raw, compressed=False, expected_crc32=crc)


def test_a_bad_crc_is_refused() -> None:
    raw, crc = RegisterBrokerBody().encode(compressed=True)
    with pytest.raises(BadRequestError, match="CRC32"):
        RegisterBrokerBody.decode(raw, compressed=True, expected_crc32=crc ^ 1)


def test_compressed_bodies_that_do_not_inflate_are_refused() -> None:
    with pytest.raises(BadRequestError, match="does not inflate"):
        RegisterBrokerBody.decode(b"{}", compressed=True, expected_crc32=None)
    with pytest.raises(BadRequestError, match="truncated"):
        RegisterBrokerBody.decode(
            zlib.compress(b"{}" * 100)[:-5], compressed=True, expected_crc32=None
        )


def test_decode_flags_are_keywords() -> None:
    # ``compressed`` and the CRC are easy to swap: they must be named.
    with pytest.raises(TypeError):
        RegisterBrokerBody.decode(b"{}", False, None)  # type: ignore[call-arg]


def test_a_decompression_bomb_is_refused_without_inflating_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(route_module, "MAX_REGISTER_BODY_BYTES", 1000)
    bomb = zlib.compress(b" " * 1001)
    with pytest.raises(BadRequestError, match="inflates past"):
        RegisterBrokerBody.decode(bomb, compressed=True, expected_crc32=None)


def test_cluster_info_and_topic_list_shapes() -> None:
    info = ClusterInfo(
        {"broker-a": BrokerData("c1", "broker-a", {0: "h:1", 2: "h:2"}, zone_name="z")},
        {"c1": ("broker-a",)},
    )
    assert json.loads(info.to_json())["clusterAddrTable"] == {"c1": ["broker-a"]}
    assert ClusterInfo.from_json(info.to_json()) == info
    topics = TopicList(("a", "b"))
    assert json.loads(topics.to_json())["topicList"] == ["a", "b"]
    assert TopicList.from_json(topics.to_json()) == topics


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "not valid JSON"),
        (b"\xff\xfe{", "not UTF-8 JSON|not valid JSON"),
        (b"[]", "must be a JSON object, not an array"),
        (b'{"queueDatas": 3}', "TopicRouteData.queueDatas must be an array"),
        (b'{"queueDatas": [{"brokerName": 1}]}', r"queueDatas\[0\].brokerName must be a string"),
        (
            b'{"queueDatas":[{"brokerName":"a","readQueueNums":true,"writeQueueNums":1,"perm":6}]}',
            "readQueueNums must be an integer, not a boolean",
        ),
        (
            b'{"queueDatas":[{"brokerName":"a","readQueueNums":1e3,"writeQueueNums":1,"perm":6}]}',
            "must be an integer, not a number",
        ),
        (
            (
                b'{"queueDatas":[{"brokerName":"a","readQueueNums":4294967296,"writeQueueNums":1,'
                b'"perm":6}]}'
            ),
            "outside the range",
        ),
        (
            b'{"brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"x":"h:1"}}]}',
            "broker id 'x' is not an integer",
        ),
        (
            b'{"brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"1":2}}]}',
            r"brokerAddrs.1 must be a string",
        ),
        (b"[" * 100_000, "not valid JSON"),
    ],
)
def test_malformed_routes_raise_bad_request(raw: bytes, reason: str) -> None:
    with pytest.raises(BadRequestError, match=reason):
        TopicRouteData.from_json(raw)


def test_malformed_registration_names_the_field() -> None:
    raw = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":"6"}}}}'
    with pytest.raises(BadRequestError, match=r"topicConfigTable\.T\.perm must be an integer"):
        RegisterBrokerBody.decode(raw, compressed=False, expected_crc32=None)


# ---------------------------------------------------------------------------------- properties
names = st.text(min_size=1, max_size=12)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
topic_configs = st.builds(
    TopicConfig,
    topic_name=names,
    read_queue_nums=int32,
    write_queue_nums=int32,
    perm=st.integers(0, 15),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    topic_sys_flag=int32,
    order=st.booleans(),
    attributes=st.dictionaries(names, st.text(max_size=8), max_size=3),
)
broker_datas = st.builds(
    BrokerData,
    cluster=names,
    broker_name=names,
    broker_addrs=st.dictionaries(int64, names, max_size=4),
    enable_acting_master=st.booleans(),
    zone_name=st.none() | names,
)
queue_datas = st.builds(QueueData, names, int32, int32, int32, int32)
routes = st.builds(
    TopicRouteData,
    queue_datas=st.lists(queue_datas, max_size=3).map(tuple),
    broker_datas=st.lists(broker_datas, max_size=3).map(tuple),
    order_topic_conf=st.none() | names,
    filter_server_table=st.dictionaries(names, st.lists(names, max_size=2).map(tuple), max_size=2),
)
register_bodies = st.builds(
    RegisterBrokerBody,
    topic_configs=st.lists(topic_configs, max_size=4).map(
        lambda configs: {c.topic_name: c for c in configs}
    ),
    data_version=st.builds(DataVersion, int64, int64, int64),
    filter_server_list=st.lists(names, max_size=2).map(tuple),
)


@given(routes)
def test_routes_round_trip(route: TopicRouteData) -> None:
    assert TopicRouteData.from_json(route.to_json()) == route


@given(register_bodies, st.booleans())
def test_registrations_round_trip(body: RegisterBrokerBody, compressed: bool) -> None:
    raw, crc = body.encode(compressed=compressed)
    assert RegisterBrokerBody.decode(raw, compressed=compressed, expected_crc32=crc) == body


@given(st.dictionaries(names, broker_datas, max_size=3), st.lists(names, max_size=3))
def test_cluster_info_and_topic_lists_round_trip(
    brokers: dict[str, BrokerData], topics: list[str]
) -> None:
    info = ClusterInfo(brokers, {"c": tuple(topics)})
    assert ClusterInfo.from_json(info.to_json()) == info
    assert TopicList.from_json(TopicList(tuple(topics)).to_json()).topics == tuple(topics)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)


@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_garbage_only_ever_raises_bad_request(raw: bytes) -> None:
    for decode in (
        TopicRouteData.from_json,
        ClusterInfo.from_json,
        TopicList.from_json,
        TopicConfig.from_json,
        RegisterBrokerBody.from_json,
        lambda b: RegisterBrokerBody.decode(b, compressed=True, expected_crc32=None),
    ):
        with contextlib.suppress(BadRequestError):
            decode(raw)


@given(st.builds(dict, routes.map(lambda r: r.to_object())), st.data())
def test_mutated_routes_only_ever_raise_bad_request(obj: dict[str, object], data: st.DataObject):
    """A valid route with one top-level field swapped for any JSON value."""
    key = data.draw(st.sampled_from(sorted(obj)))
    obj[key] = data.draw(json_values)
    with contextlib.suppress(BadRequestError):
        TopicRouteData.from_json(json.dumps(obj).encode())


def test_a_body_that_is_not_json_skips_the_numeric_key_fix_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25 item 6: a 16 MiB REGISTER_BROKER body that is not JSON went through the fix-up's
    regular expressions, 0.5 s of the NameServer's event loop. Only an unquoted key is fixed."""
    calls: list[int] = []

    def counting(text: str) -> str:
        calls.append(len(text))
        return quote_numeric_keys(text)

    monkeypatch.setattr(json_fields, "quote_numeric_keys", counting)
    with pytest.raises(BadRequestError, match="not valid JSON"):
        TopicRouteData.from_json(b"x" * 1_000_000)
    with pytest.raises(BadRequestError, match="not valid JSON"):
        TopicRouteData.from_json(b'{"brokerDatas": [1, 2')
    assert calls == []
    assert load_json(b'{0:"a"}', "t") == {"0": "a"}
    assert calls == [7]


def test_a_registration_with_too_many_values_is_refused_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25 item 6: a 14 MiB registration of tiny values held a NameServer's loop for
    1.4 s; now a body over ``MAX_REGISTER_VALUES`` separators is refused without a parse."""
    pad = b"0," * route_module.MAX_REGISTER_VALUES
    raw = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}},"pad":[' + pad + b"0]}"

    def no_parse(*args: object, **kwargs: object) -> object:
        raise AssertionError("parsed")

    monkeypatch.setattr(json, "loads", no_parse)
    with pytest.raises(BadRequestError, match="the limit is 1000000"):
        RegisterBrokerBody.from_json(raw)
    monkeypatch.undo()
    small = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{}},"pad":[0,0]}'
    assert RegisterBrokerBody.from_json(small).topic_configs == {}
