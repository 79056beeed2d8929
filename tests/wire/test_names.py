"""The naming rules every door checks (``ledgermq.wire.names``; issue 25, items 1, 7 and 19)."""

from __future__ import annotations

import pytest

from ledgermq.errors import InvalidGroupNameError, InvalidMessageError, InvalidTopicNameError
from ledgermq.wire.names import (
    GROUP_MAX_LENGTH,
    check_group_name,
    check_send_topic,
    check_topic_name,
    group_name_problem,
    is_group_name,
    is_topic_name,
    send_topic_problem,
    topic_name_problem,
)


@pytest.mark.parametrize("topic", ["T", "%RETRY%g", "%DLQ%g", "a|b", "x-y_z9", "t" * 127])
def test_valid_topics(topic: str) -> None:
    assert is_topic_name(topic)
    check_topic_name(topic)


@pytest.mark.parametrize(
    ("topic", "rule"),
    [
        ("", "empty"),
        ("orders.v1", "may contain only the characters a-z A-Z 0-9 % | _ -"),
        ("a/b", "may contain only"),
        ("T\n", "may contain only"),
        ("tópico", "may contain only"),
        ("t" * 128, "at most 127"),
    ],
)
def test_invalid_topics_name_the_rule(topic: str, rule: str) -> None:
    problem = topic_name_problem(topic)
    assert problem is not None
    assert rule in problem
    with pytest.raises(InvalidTopicNameError, match=rule):
        check_topic_name(topic)


def test_a_group_is_valid_only_if_its_retry_and_dead_letter_topics_are() -> None:
    assert GROUP_MAX_LENGTH == 120
    for group in ("orders_v1", "g" * 120, "CID_x-1"):
        assert is_group_name(group)
        assert is_topic_name("%RETRY%" + group)
        assert is_topic_name("%DLQ%" + group)
    for group, rule in (
        ("orders.v1", "may contain only the characters"),
        ("g" * 125, "at most 120"),  # its retry topic would be 132 characters
        ("", "empty"),
    ):
        problem = group_name_problem(group)
        assert problem is not None
        assert rule in problem
        with pytest.raises(InvalidGroupNameError, match=rule):
            check_group_name(group)
    # a refusal is an InvalidMessageError too: callers that caught bad topics still do
    with pytest.raises(InvalidMessageError):
        check_group_name("orders.v1")


@pytest.mark.parametrize(
    "topic",
    ["SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC",
     "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "OFFSET_MOVED_EVENT"],
)  # fmt: skip
def test_producers_may_not_send_into_system_topics(topic: str) -> None:
    assert is_topic_name(topic)
    assert send_topic_problem(topic) is not None
    with pytest.raises(InvalidTopicNameError, match="forbidden"):
        check_send_topic(topic)


def test_producers_may_send_into_the_trace_and_retry_topics() -> None:
    for topic in ("RMQ_SYS_TRACE_TOPIC", "%RETRY%g", "Orders"):
        check_send_topic(topic)
