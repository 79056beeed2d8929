"""The typed metadata ops (src/ledgermq/broker/state/ops.py): every op type round-trips through
its bytes in both format versions, and a decoder given anything else raises only
``MetadataOpError`` naming the rule (STYLE.md rule 9: whole, cut short, with trailing bytes,
fuzzed). The dispatcher's handling of what does not decode is in test_dispatcher.py; today's
logs are replayed in test_metadata_ops_v0_fixture.py."""

from __future__ import annotations

import contextlib
import json
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.broker.pop import (
    Acked,
    DeadLettered,
    DeadLetterReason,
    Delivered,
    InvisibilityChanged,
    PopSettings,
)
from ledgermq.broker.state.group_config import SubscriptionGroupConfig
from ledgermq.broker.state.ops import (
    OP_VERSION,
    CommitOffsetsOp,
    DelayOffsetsOp,
    DeleteGroupOp,
    DeleteTopicOp,
    MetadataOp,
    MetadataOpError,
    PopOp,
    PutGroupOp,
    PutTopicOp,
    TimerOp,
    TxnOp,
    UnknownOpVersionError,
    decode_op,
)
from ledgermq.broker.state.transactions import CHECK, COMMIT, DISCARD, ROLLBACK
from ledgermq.broker.timers import Fired, Firing, Recalled, Scheduled
from ledgermq.wire.route import TopicConfig

NAMES = st.text(min_size=1, max_size=12)
INTS = st.integers(-(2**63), 2**63 - 1)
"""Queue ids and offsets: any integer (types are checked, not ranges; ops.py says why)."""
COUNTS = st.integers(0, 2**31 - 1)
TIMES = st.integers(0, 2**53)

TOPIC_CONFIGS = st.builds(
    TopicConfig,
    topic_name=NAMES,
    read_queue_nums=COUNTS,
    write_queue_nums=COUNTS,
    perm=st.integers(0, 7),
    topic_filter_type=NAMES,
    topic_sys_flag=COUNTS,
    order=st.booleans(),
    attributes=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
GROUP_CONFIGS = st.builds(
    SubscriptionGroupConfig,
    group_name=NAMES,
    consume_enable=st.booleans(),
    consume_from_min_enable=st.booleans(),
    consume_broadcast_enable=st.booleans(),
    consume_message_orderly=st.booleans(),
    retry_queue_nums=COUNTS,
    retry_max_times=COUNTS,
    broker_id=COUNTS,
    which_broker_when_consume_slowly=COUNTS,
)
POP_RECORDS = st.one_of(
    st.builds(Delivered, TIMES, TIMES, TIMES, TIMES, TIMES, st.none() | NAMES),
    st.builds(Acked, TIMES, TIMES),
    st.builds(InvisibilityChanged, TIMES, TIMES, TIMES, TIMES, TIMES),
    st.builds(DeadLettered, TIMES, TIMES, TIMES, st.sampled_from(DeadLetterReason)),
)
TIMER_RECORDS = st.one_of(
    st.builds(Scheduled, TIMES, TIMES),
    st.builds(Firing, TIMES, TIMES),
    st.builds(Fired, TIMES),
    st.builds(Recalled, TIMES, TIMES),
)
STRATEGIES: dict[type[Any], st.SearchStrategy[Any]] = {
    PutTopicOp: st.builds(PutTopicOp, TOPIC_CONFIGS),
    DeleteTopicOp: st.builds(DeleteTopicOp, NAMES),
    PutGroupOp: st.builds(PutGroupOp, GROUP_CONFIGS),
    DeleteGroupOp: st.builds(DeleteGroupOp, NAMES),
    CommitOffsetsOp: st.builds(
        CommitOffsetsOp, st.lists(st.tuples(NAMES, NAMES, INTS, INTS), max_size=5).map(tuple)
    ),
    DelayOffsetsOp: st.builds(DelayOffsetsOp, st.dictionaries(INTS, INTS, max_size=5)),
    PopOp: st.builds(
        PopOp,
        st.tuples(NAMES, NAMES, INTS),
        st.builds(PopSettings, st.booleans(), st.integers(1, 2**31)),
        st.lists(POP_RECORDS, max_size=5).map(tuple),
    ),
    TimerOp: st.builds(TimerOp, st.lists(TIMER_RECORDS, max_size=5).map(tuple)),
    TxnOp: st.builds(
        TxnOp,
        st.lists(
            st.tuples(INTS, st.sampled_from([COMMIT, ROLLBACK, DISCARD, CHECK])), max_size=5
        ).map(tuple),
    ),
}
OPS = st.one_of(*STRATEGIES.values())


def test_every_op_type_has_a_strategy() -> None:
    """A new op type must join the round-trip test below."""
    assert set(STRATEGIES) == set(get_args(MetadataOp))


def _v0(body: bytes) -> bytes:
    """The same op as release 0.1.0 wrote it: no ``v``."""
    value = json.loads(body)
    assert value.pop("v") == OP_VERSION
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_every_op_round_trips_in_both_versions(op: MetadataOp) -> None:
    body = op.encode()
    assert json.loads(body)["v"] == 1
    assert decode_op(body) == op
    assert decode_op(_v0(body)) == op  # version 0 decodes to the same dataclass


@settings(max_examples=50, deadline=None)
@given(OPS)
def test_a_cut_short_or_extended_op_is_refused_as_malformed(op: MetadataOp) -> None:
    body = op.encode()
    for end in range(len(body)):
        with pytest.raises(MetadataOpError):
            decode_op(body[:end])
    for extra in (b"x", b"{}", b"\x00"):
        with pytest.raises(MetadataOpError):
            decode_op(body + extra)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
_FIELDS = ["topic", "group", "offsets", "queue", "fifo", "maxAttempts", "records", "items", "v"]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([*(cls.NAME for cls in STRATEGIES), "nope", 7]),
    st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=7),
)
def test_only_the_op_error_escapes_the_decoder(name: object, fields: dict[str, object]) -> None:
    """Objects shaped like ops, with fields of any JSON value: an op or ``MetadataOpError``."""
    body = json.dumps({"op": name, **fields}).encode()
    try:
        op = decode_op(body)
    except MetadataOpError:
        return
    assert decode_op(op.encode()) == op


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_only_the_op_error_escapes_the_decoder_given_bytes(body: bytes) -> None:
    with contextlib.suppress(MetadataOpError):
        decode_op(body)


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (b"[not an op", "is a JSON object"),
        (b"\xff\xfe", "is a JSON object"),
        (b'["op"]', "is a JSON object, not list"),
        (b'{"op":' + b"[" * 100_000, "is a JSON object: maximum recursion depth"),
        (b'{"topic":"T"}', "unknown metadata op None"),
        (b'{"op":"drop_everything"}', "unknown metadata op 'drop_everything'"),
        (b'{"op":"delete_topic"}', r"delete_topic op has the fields \['topic'\], got \[\]"),
        (b'{"op":"delete_topic","topic":"T","why":1}', r"got \['topic', 'why'\]"),
        (b'{"op":"delete_topic","topic":""}', "topic is a non-empty string"),
        (b'{"op":"delete_group","group":7}', "group is a non-empty string"),
        (b'{"op":"put_topic","topic":{"perm":6}}', "topic.topicName must be a string"),
        (b'{"op":"put_group","group":"G"}', "group is a JSON object"),
        (b'{"op":"put_group","group":{}}', "needs a groupName"),
        (b'{"offsets":[["G","T","0",1]],"op":"commit_offsets"}', r"\[group, topic, queue id"),
        (b'{"offsets":[["G","T",true,1]],"op":"commit_offsets"}', r"\[group, topic, queue id"),
        (b'{"offsets":[["","T",0,1]],"op":"commit_offsets"}', "names non-empty"),
        (b'{"offsets":{"G":1},"op":"commit_offsets"}', "offsets is a list"),
        (b'{"offsets":[1,2],"op":"delay_offsets"}', "offsets is an object"),
        (b'{"offsets":{"x":1},"op":"delay_offsets"}', "delay_offsets op is malformed"),
        (b'{"offsets":{"1":"2"},"op":"delay_offsets"}', "delay level 1 is an integer"),
        (b'{"items":[[9,"maybe"]],"op":"txn"}', "a transaction item is"),
        (b'{"items":[[9,["commit"]]],"op":"txn"}', "txn op is malformed"),
        (b'{"op":"timer","records":[{"kind":"fired","timer_id":-1}]}', "non-negative"),
        (b'{"op":"timer","records":[{"kind":"ring"}]}', "unknown timer record kind"),
        (b'{"op":"timer","records":[7]}', "a timer record is a JSON object"),
        (
            (
                b'{"fifo":false,"group":"G","maxAttempts":0,"op":"pop","queue":0,"records":[],'
                b'"topic":"T"}'
            ),
            "max_attempts must be at least 1",
        ),
        (
            b'{"fifo":0,"group":"G","maxAttempts":1,"op":"pop","queue":0,"records":[],"topic":"T"}',
            "fifo is true or false",
        ),
        (
            (
                b'{"fifo":false,"group":"G","maxAttempts":1,"op":"pop","queue":0,'
                b'"records":[{"kind":"acked"}],"topic":"T"}'
            ),
            r"acked record has the fields \['offset', 'seq'\], got \['kind'\]",
        ),
        (b'{"op":"delete_topic","topic":"T","v":0}', "v is an integer from 1 to 1, got 0"),
        (b'{"op":"delete_topic","topic":"T","v":"1"}', "got '1'"),
        (b'{"op":"delete_topic","topic":"T","v":true}', "got True"),
        (b'{"op":"delete_topic","topic":"T","v":1.0}', "got 1.0"),
    ],
)
def test_a_malformed_op_is_refused_naming_the_rule(body: bytes, rule: str) -> None:
    with pytest.raises(MetadataOpError, match=rule) as caught:
        decode_op(body)
    assert not isinstance(caught.value, UnknownOpVersionError)


def test_a_newer_version_is_refused_naming_it() -> None:
    """A release that writes v2 gates it until every replica reads it (upgrades.md rule 3);
    one that gets here anyway is refused with the version in the message, not guessed at."""
    with pytest.raises(UnknownOpVersionError, match="format version 2 is newer") as caught:
        decode_op(b'{"op":"delete_topic","topic":"T","v":2}')
    assert caught.value.version == 2
    with pytest.raises(UnknownOpVersionError, match="version 70000 is newer"):
        decode_op(b'{"op":"a_future_op","v":70000,"whatever":{}}')


def test_both_versions_of_one_op_decode_alike() -> None:
    v0 = b'{"offsets":[["orders-consumers","orders",3,123456]],"op":"commit_offsets"}'
    op = CommitOffsetsOp((("orders-consumers", "orders", 3, 123456),))
    assert decode_op(v0) == op
    assert op.encode() == v0[:-1] + b',"v":1}'
    assert decode_op(op.encode()) == op
