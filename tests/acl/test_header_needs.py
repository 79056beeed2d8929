"""The one table of what a typed request header needs (issue 26 item 2): every header the
registry parses (``ledgermq.wire.headers.HEADER_TYPES``) has its entry in
``acl.header_needs``, computed from the parsed header, the same the gate computes from the
extFields; a header without an entry needs an admin account."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from ledgermq.errors import BadRequestError
from ledgermq.security.acl import Needs, Perm, Resource, header_needs, request_needs
from ledgermq.security.acl.resources import ADMIN_CODES, RESOURCE_CODES
from ledgermq.wire.codes import MQRequestCode
from ledgermq.wire.headers import HEADER_TYPES, parse_header

C = MQRequestCode
T, G = Resource("topic", "T"), Resource("group", "G")
FULL = {
    "consumerGroup": "G", "topic": "T", "queueId": "1", "queueOffset": "5",
    "commitOffset": "3", "timestamp": "1700000000000", "recallHandle": "h",
    "producerGroup": "P", "clientId": "c1", "maxMsgNums": "4", "invisibleTime": "60000",
    "extraInfo": "handle", "clientID": "c1", "key": "k", "offset": "4096", "group": "G",
    "commitLogOffset": "4096", "commitOrRollback": "8", "groupName": "G", "to": "n2",
    "peer": "n4-127.0.0.1:40914", "id": "n3",
}  # fmt: skip
"""Every field any registered header requires."""
EXPECTED: dict[int, dict[Resource, Perm]] = {
    C.PULL_MESSAGE: {T: Perm.SUB, G: Perm.SUB},
    C.QUERY_CONSUMER_OFFSET: {T: Perm.SUB, G: Perm.SUB},
    C.UPDATE_CONSUMER_OFFSET: {T: Perm.SUB, G: Perm.SUB},
    C.GET_MAX_OFFSET: {T: Perm.SUB},
    C.GET_MIN_OFFSET: {T: Perm.SUB},
    C.GET_EARLIEST_MSG_STORETIME: {T: Perm.SUB},
    C.SEARCH_OFFSET_BY_TIMESTAMP: {T: Perm.SUB},
    C.RECALL_MESSAGE: {T: Perm.PUB},
    C.GET_CONSUMER_CONNECTION_LIST: {G: Perm.SUB},
    C.GET_CONSUMER_RUNNING_INFO: {G: Perm.SUB},
    C.POP_MESSAGE: {T: Perm.SUB, G: Perm.SUB},
    C.ACK_MESSAGE: {T: Perm.SUB, G: Perm.SUB},
    C.CHANGE_MESSAGE_INVISIBLETIME: {T: Perm.SUB, G: Perm.SUB},
    C.UNREGISTER_CLIENT: {G: Perm.SUB},
    C.GET_CONSUMER_LIST_BY_GROUP: {G: Perm.SUB},
    C.GET_TOPIC_STATS_INFO: {T: Perm.SUB},
    C.GET_CONSUME_STATS: {T: Perm.SUB, G: Perm.SUB},
    C.QUERY_MESSAGE: {T: Perm.SUB},
    C.END_TRANSACTION: {T: Perm.PUB},
    C.CONSUMER_SEND_MSG_BACK: {G: Perm.SUB},
    C.VIEW_MESSAGE_BY_ID: {},  # SUB on the record's topic, once read (record_needs)
}
ADMIN_ONLY = {
    C.GET_PRODUCER_CONNECTION_LIST, C.UPDATE_AND_CREATE_TOPIC, C.DELETE_TOPIC_IN_BROKER,
    C.DELETE_SUBSCRIPTIONGROUP, C.TRANSFER_LEADERSHIP, C.GET_QUARANTINED_ENTRIES,
    C.REPLICA_ADD, C.REPLICA_REMOVE, C.REPLICA_BACKUP,
}  # fmt: skip
"""Typed headers only an admin account may send."""

OPTIONAL: dict[int, set[str]] = {
    C.PULL_MESSAGE: {"commitOffset", "maxMsgNums"},
    C.POP_MESSAGE: {"queueId"},
    C.ACK_MESSAGE: {"queueId", "offset"},
    C.CHANGE_MESSAGE_INVISIBLETIME: {"queueId", "offset"},
    C.UNREGISTER_CLIENT: {"consumerGroup"},
    C.GET_CONSUMER_LIST_BY_GROUP: {"consumerGroup"},
    C.GET_CONSUME_STATS: {"topic"},
    C.END_TRANSACTION: {"topic"},
    C.VIEW_MESSAGE_BY_ID: {"topic"},
}
"""Fields a header reads but may lack (a default, or not needed by the broker)."""


def test_every_registered_header_has_its_needs() -> None:
    assert set(HEADER_TYPES) == set(EXPECTED) | ADMIN_ONLY
    for admin_code in ADMIN_ONLY:
        header = parse_header(admin_code, FULL)
        assert header is not None
        assert header_needs(header) == Needs(admin=True) == request_needs(admin_code, FULL)
        assert admin_code in ADMIN_CODES
    for code, resources in EXPECTED.items():
        header = parse_header(code, FULL)
        assert header is not None
        assert code == header.CODE
        needs = header_needs(header)
        assert needs == Needs(resources=resources), code
        assert code in RESOURCE_CODES
        assert code not in ADMIN_CODES
        # the gate, asked without the door's parse, computes the same from the same parser
        assert request_needs(code, FULL) == needs, code


def test_a_header_without_an_entry_needs_an_admin_account() -> None:
    @dataclass(frozen=True)
    class Unlisted:
        CODE: ClassVar[int] = 9999

        def to_ext_fields(self) -> dict[str, str]:
            return {}

    assert header_needs(Unlisted()).admin


@pytest.mark.parametrize("code", sorted(HEADER_TYPES))
def test_headers_round_trip_and_name_a_missing_field(code: int) -> None:
    header = parse_header(code, FULL)
    assert header is not None
    assert parse_header(code, header.to_ext_fields()) == header
    read = header.to_ext_fields()
    for name in FULL:
        fields = {k: v for k, v in FULL.items() if k != name}
        optional = OPTIONAL.get(code, set())
        if code not in ADMIN_ONLY:
            optional = optional | {"producerGroup"}
        if name not in read or name in optional:
            assert parse_header(code, fields) is not None, name  # not read, or optional
            continue
        with pytest.raises(BadRequestError, match=f"lacks the field {name!r}"):
            parse_header(code, fields)


def test_pull_defaults_are_the_brokers() -> None:
    header = parse_header(C.PULL_MESSAGE, FULL)
    assert header is not None
    assert header.to_ext_fields() == {
        "consumerGroup": "G", "topic": "T", "queueId": "1", "queueOffset": "5",
        "maxMsgNums": "4", "sysFlag": "0", "commitOffset": "3",
        "suspendTimeoutMillis": "15000",
    }  # fmt: skip
    with pytest.raises(BadRequestError, match="'maxMsgBytes' must be an integer"):
        parse_header(C.PULL_MESSAGE, {**FULL, "maxMsgBytes": "many"})
