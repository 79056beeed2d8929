"""``ConsumerRunningInfo`` (GET_CONSUMER_RUNNING_INFO's body): what our clients write is what a
Java ``mqadmin`` reads (fastjson's map keyed by ``MessageQueue`` objects), and what Java clients
write (that form, RocketMQ 4's ``droped``, numbers as properties) is what we read."""

from __future__ import annotations

import pytest

from ledgermq.errors import BadRequestError
from ledgermq.wire.running_info import (
    ConsumerRunningInfo,
    QueueRunningInfo,
    SubscriptionInfo,
    TopicConsumeStatus,
)

INFO = ConsumerRunningInfo(
    properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING"},
    subscriptions=(SubscriptionInfo("Orders", "a || b"), SubscriptionInfo("%RETRY%g", "*")),
    queues=(
        QueueRunningInfo(
            "Orders",
            "broker-b",
            0,
            12,
            cached_count=2,
            cached_min_offset=10,
            cached_max_offset=11,
            last_pull_ms=1_700_000_000_123,
        ),
        QueueRunningInfo("Orders", "broker-a", 1, 7, locked=True, last_lock_ms=5),
    ),
    status={"Orders": TopicConsumeStatus(pull_tps=2.5, consume_failed_msgs=3)},
)


def test_round_trip_in_fastjson_form() -> None:
    body = INFO.encode()
    # the map keyed by objects, as fastjson writes a TreeMap<MessageQueue, ProcessQueueInfo>
    assert b'"mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"Orders"}:{' in body
    decoded = ConsumerRunningInfo.decode(body)
    assert decoded.properties == INFO.properties
    assert decoded.consume_type == "CONSUME_PASSIVELY"
    assert set(decoded.subscriptions) == set(INFO.subscriptions)
    assert decoded.queues == tuple(sorted(INFO.queues, key=lambda q: q.broker_name))
    assert decoded.status == INFO.status
    assert decoded.jstack is None


def test_reads_what_a_java_client_writes() -> None:
    body = (
        b'{"jstack":"main thread","mqTable":{{"brokerName":"b","queueId":3,"topic":"T"}:'
        b'{"cachedMsgCount":1,"commitOffset":40,"droped":true,"lastConsumeTimestamp":9,'
        b'"locked":false}},"properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,'
        b'"PROP_CONSUMEORDERLY":false,"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},'
        b'"statusTable":{"T":{"consumeOKTPS":1.5,"pullRT":2}},"subscriptionSet":'
        b'[{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1",'
        b'"subVersion":1,"tagsSet":[],"topic":"T"}],"userConsumerInfo":{},"mqPopTable":{}}'
    )
    info = ConsumerRunningInfo.decode(body)
    assert info.properties["PROP_CONSUMER_START_TIMESTAMP"] == "1700000000000"
    assert info.properties["PROP_CONSUMEORDERLY"] == "false"
    assert info.subscriptions == (SubscriptionInfo("T", "a > 1", "SQL92"),)
    assert info.queues == (
        QueueRunningInfo("T", "b", 3, 40, cached_count=1, dropped=True, last_consume_ms=9),
    )
    assert info.status == {"T": TopicConsumeStatus(pull_rt=2.0, consume_ok_tps=1.5)}
    assert info.jstack == "main thread"


def test_an_empty_answer_is_java_defaults() -> None:
    assert ConsumerRunningInfo.decode(b"{}") == ConsumerRunningInfo()
    assert ConsumerRunningInfo.decode(b'{"mqTable":{}}').queues == ()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b'{"a" 1}', "Expecting ':' delimiter"),
        (b'{"a":1 "b":2}', "Expecting ',' delimiter"),
        (b"\xff", "not valid JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"mqTable":{{"topic":"T"}:{}}}', "malformed"),
        (b'{"mqTable":{{"topic":"T","brokerName":"b","queueId":[]}:{}}}', "malformed"),
    ],
)
def test_bad_bodies_say_so(body: bytes, message: str) -> None:
    with pytest.raises(BadRequestError, match=message):
        ConsumerRunningInfo.decode(body)
