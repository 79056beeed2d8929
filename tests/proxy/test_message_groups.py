"""The FIFO queue choice (``proxy.message_groups``) and the topic message types
(``proxy.message_types``): pure functions checked against the values Java computes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.proxy.message_groups import (
    consistent_hash,
    group_problem,
    java_string_hash,
    queue_of_group,
)
from ledgermq.proxy.message_types import (
    TopicMessageType,
    accepted_message_types,
    message_type_of,
    topic_message_type,
    type_conflict,
)
from ledgermq.proxy.protocol import definition_pb2
from ledgermq.wire.route import TopicConfig


def test_consistent_hash_matches_guavas_golden_values() -> None:
    """Guava's own cross-language compatibility values (HashingTest)."""
    golden100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert [consistent_hash(i, 100) for i in range(20)] == golden100
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert consistent_hash(2, 100001) == 80343
    assert consistent_hash(2201, 100001) == 22152
    assert consistent_hash(2202, 100001) == 15018


def test_java_string_hash() -> None:
    """``String.hashCode`` values Java prints (signed, overflowing, UTF-16 code units)."""
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("order-42") == java_string_hash("order-42")
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two surrogates


@given(st.integers(-(2**63), 2**63 - 1), st.integers(1, 64))
def test_consistent_hash_is_a_bucket_and_moves_little_when_a_bucket_is_added(
    key: int, buckets: int
) -> None:
    bucket = consistent_hash(key, buckets)
    assert 0 <= bucket < buckets
    grown = consistent_hash(key, buckets + 1)
    assert grown in (bucket, buckets)  # a key only ever moves to the new bucket


def test_queue_of_group_spreads_groups_and_keeps_each_in_one_queue() -> None:
    queues = {queue_of_group(f"group-{i}", 8) for i in range(200)}
    assert queues == set(range(8))
    assert len({queue_of_group("group-7", 8) for _ in range(5)}) == 1
    with pytest.raises(ValueError, match="buckets"):
        consistent_hash(1, 0)


def test_group_problems() -> None:
    assert group_problem("order-1") is None
    assert group_problem("x" * 64) is None
    assert "blank" in (group_problem("  ") or "")
    assert "65 characters" in (group_problem("x" * 65) or "")
    assert "control" in (group_problem("a\tb") or "")


def test_message_types() -> None:
    assert topic_message_type(TopicConfig("T")) is TopicMessageType.MIXED  # takes every type
    typed = TopicConfig("T", attributes={"message.type": "NORMAL"})
    assert topic_message_type(typed) is TopicMessageType.NORMAL
    fifo = TopicConfig("T", attributes={"message.type": "FIFO"})
    assert topic_message_type(fifo) is TopicMessageType.FIFO
    assert topic_message_type(TopicConfig("T", attributes={"message.type": "odd"})) is (
        TopicMessageType.UNSPECIFIED
    )
    assert message_type_of({}) is TopicMessageType.NORMAL
    assert message_type_of({"__SHARDINGKEY": "g"}) is TopicMessageType.FIFO
    assert message_type_of({"__SHARDINGKEY": "g", "DELAY": "3"}) is TopicMessageType.DELAY
    assert message_type_of({"TIMER_DELIVER_MS": "1"}) is TopicMessageType.DELAY
    assert message_type_of({"TRAN_MSG": "true", "DELAY": "3"}) is TopicMessageType.TRANSACTION

    normal, fifo_type = TopicMessageType.NORMAL, TopicMessageType.FIFO
    assert type_conflict("T", fifo_type, fifo_type) is None
    assert type_conflict("T", TopicMessageType.MIXED, fifo_type) is None
    refusal = type_conflict("T", fifo_type, normal)
    assert refusal is not None
    assert "the expected type is FIFO, but actual type is NORMAL" in refusal
    assert type_conflict("T", normal, fifo_type) is not None
    assert type_conflict("T", TopicMessageType.MIXED, TopicMessageType.UNSPECIFIED) is not None

    assert accepted_message_types(fifo_type) == (definition_pb2.FIFO,)
    assert len(accepted_message_types(TopicMessageType.MIXED)) == 4
    assert accepted_message_types(TopicMessageType.UNSPECIFIED) == (
        definition_pb2.MESSAGE_TYPE_UNSPECIFIED,
    )
