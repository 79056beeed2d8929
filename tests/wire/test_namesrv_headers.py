"""Typed NameServer request headers (``ledgermq.wire.namesrv_headers``, issue 26 item 2): each
reads back what it writes, under RocketMQ's field names; a missing, malformed or blank field is
a ``BadRequestError`` naming it, with the messages the NameServer answered before."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import BadRequestError
from ledgermq.wire.codes import MQRequestCode
from ledgermq.wire.namesrv_headers import (
    NAMESRV_HEADER_TYPES,
    AddWritePermOfBrokerRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_TEXT = st.text(min_size=1, max_size=12)
_NOT_BLANK = st.from_regex(r"[a-zA-Z0-9_.:-]{1,30}", fullmatch=True)
_TYPES: list[Any] = sorted(NAMESRV_HEADER_TYPES.values(), key=lambda t: t.CODE)


def test_every_header_is_registered_under_rocketmqs_code_and_class_name() -> None:
    assert {code: t.__name__ for code, t in NAMESRV_HEADER_TYPES.items()} == {
        MQRequestCode.REGISTER_BROKER: "RegisterBrokerRequestHeader",
        MQRequestCode.UNREGISTER_BROKER: "UnRegisterBrokerRequestHeader",
        MQRequestCode.GET_ROUTEINFO_BY_TOPIC: "GetRouteInfoRequestHeader",
        MQRequestCode.DELETE_TOPIC_IN_NAMESRV: "DeleteTopicFromNamesrvRequestHeader",
        MQRequestCode.WIPE_WRITE_PERM_OF_BROKER: "WipeWritePermOfBrokerRequestHeader",
        MQRequestCode.ADD_WRITE_PERM_OF_BROKER: "AddWritePermOfBrokerRequestHeader",
    }


def _value(header_type: Any, item: dataclasses.Field[Any]) -> st.SearchStrategy[object]:
    kind = str(item.type)
    key = item.metadata.get("ext") or _camel(item.name)
    text = _NOT_BLANK if key in header_type._NOT_BLANK else _TEXT
    if header_type is RegisterBrokerRequestHeader and item.name == "heartbeat_timeout_millis":
        return st.none() | st.integers(1, (1 << 63) - 1)  # positive: the header's own rule
    return {
        "str": text,
        "str | None": st.none() | text,
        "int": _INT64,
        "int | None": st.none() | _INT64,
        "bool": st.booleans(),
    }[kind]


@pytest.mark.parametrize("header_type", _TYPES, ids=lambda t: t.__name__)
@given(data=st.data())
def test_each_header_reads_back_what_it_writes(header_type: Any, data: st.DataObject) -> None:
    values = [data.draw(_value(header_type, item)) for item in dataclasses.fields(header_type)]
    header = header_type(*values)
    fields = header.to_ext_fields()
    assert fields == header.to_ext_fields_slowly()
    assert all(isinstance(value, str) for value in fields.values())
    assert header_type.from_ext_fields(fields) == header


def test_the_fields_are_rocketmqs() -> None:
    """What the broker and the clients sent before these headers were typed, key for key."""
    assert RegisterBrokerRequestHeader(
        "broker-a", "10.0.0.1:10911", "c1", 0, "10.0.0.1:10911", 120_000, False, 77, 3
    ).to_ext_fields() == {
        "brokerName": "broker-a",
        "brokerAddr": "10.0.0.1:10911",
        "clusterName": "c1",
        "haServerAddr": "10.0.0.1:10911",
        "brokerId": "0",
        "heartbeatTimeoutMillis": "120000",
        "compressed": "false",
        "bodyCrc32": "77",
        "term": "3",
    }
    assert UnRegisterBrokerRequestHeader("b", "a:1", "c", 2).to_ext_fields() == {
        "brokerName": "b",
        "brokerAddr": "a:1",
        "clusterName": "c",
        "brokerId": "2",
    }
    assert GetRouteInfoRequestHeader("T").to_ext_fields() == {"topic": "T"}
    assert DeleteTopicFromNamesrvRequestHeader("T").to_ext_fields() == {"topic": "T"}
    assert DeleteTopicFromNamesrvRequestHeader("T", "c1").to_ext_fields() == {
        "topic": "T",
        "clusterName": "c1",
    }
    assert WipeWritePermOfBrokerRequestHeader("b").to_ext_fields() == {"brokerName": "b"}
    assert AddWritePermOfBrokerRequestHeader("b").to_ext_fields() == {"brokerName": "b"}


def _full(header_type: Any) -> dict[str, str]:
    """Every field of ``header_type`` present, with a value each rule takes."""
    fields = {}
    for item in dataclasses.fields(header_type):
        kind = str(item.type)
        fields[item.metadata.get("ext") or _camel(item.name)] = (
            "true" if kind == "bool" else "1" if "int" in kind else "x"
        )
    return fields


@pytest.mark.parametrize("header_type", _TYPES, ids=lambda t: t.__name__)
def test_a_missing_required_field_is_named(header_type: Any) -> None:
    required = [
        item.metadata.get("ext") or _camel(item.name)
        for item in dataclasses.fields(header_type)
        if item.default is dataclasses.MISSING
    ]
    assert required
    for key in required:
        fields = _full(header_type)
        del fields[key]
        with pytest.raises(BadRequestError, match=f"lacks the field '{key}'"):
            header_type.from_ext_fields(fields)


@pytest.mark.parametrize("header_type", _TYPES, ids=lambda t: t.__name__)
def test_a_blank_name_or_address_is_named(header_type: Any) -> None:
    for key in header_type._NOT_BLANK:
        for blank in ("", "  "):
            fields = _full(header_type) | {key: blank}
            with pytest.raises(BadRequestError, match=f"header field '{key}' must not be empty"):
                header_type.from_ext_fields(fields)


def test_a_registration_with_a_broken_number_is_refused_by_the_parse() -> None:
    good = _full(RegisterBrokerRequestHeader)
    for key, value, message in [
        ("brokerId", "zero", "'brokerId' must be an integer"),
        ("heartbeatTimeoutMillis", "0", "heartbeatTimeoutMillis must be positive, not 0"),
        ("heartbeatTimeoutMillis", "-1", "heartbeatTimeoutMillis must be positive, not -1"),
        ("bodyCrc32", "x", "'bodyCrc32' must be an integer"),
        ("compressed", "maybe", "'compressed' must be true/false or 1/0"),
        ("term", "1.5", "'term' must be an integer"),
    ]:
        with pytest.raises(BadRequestError, match=message):
            RegisterBrokerRequestHeader.from_ext_fields(good | {key: value})


def test_absent_optional_fields_read_as_the_nameservers_defaults() -> None:
    header = RegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "0"}
    )
    assert header == RegisterBrokerRequestHeader("b", "a:1", "c", 0)
    assert (header.ha_server_addr, header.heartbeat_timeout_millis, header.body_crc32) == (
        None,
        None,
        None,
    )
    assert DeleteTopicFromNamesrvRequestHeader.from_ext_fields(
        {"topic": "T", "clusterName": ""}
    ) == DeleteTopicFromNamesrvRequestHeader("T", None)


def test_a_topic_is_looked_up_or_deleted_without_the_naming_rules() -> None:
    """A route lookup of a malformed topic finds none (TOPIC_NOT_EXIST, as before and as in
    RocketMQ): the topic is only looked up, never stored, so the parse does not refuse it."""
    for topic in ("a/b", "", "t" * 200):
        assert GetRouteInfoRequestHeader.from_ext_fields({"topic": topic}).topic == topic
        assert DeleteTopicFromNamesrvRequestHeader.from_ext_fields({"topic": topic}).topic == topic
    assert GetRouteInfoRequestHeader.name_rules() == {}
    assert DeleteTopicFromNamesrvRequestHeader.name_rules() == {}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
