"""``consumer-status``'s analysis (``ledgermq.client.consumer_status``), RocketMQ's
``analyzeProcessQueue`` and ``analyzeSubscription``: lag against the broker's offset, a queue
that looks blocked, an orderly queue not locked, clients of one group that subscribe
differently."""

from __future__ import annotations

from ledgermq.client.consumer_status import (
    BLOCKED_AFTER_MS,
    ClientStatus,
    queue_statuses,
    subscriptions_differ,
    warnings,
)
from ledgermq.wire.running_info import ConsumerRunningInfo, QueueRunningInfo, SubscriptionInfo

NOW = 1_700_000_000_000
STARTED = NOW - 10 * BLOCKED_AFTER_MS


def client(
    cid: str,
    queues: tuple[QueueRunningInfo, ...] = (),
    *,
    orderly: bool = False,
    subscriptions: tuple[SubscriptionInfo, ...] = (SubscriptionInfo("T", "*"),),
    consume_type: str = "CONSUME_PASSIVELY",
    model: str = "CLUSTERING",
) -> ClientStatus:
    info = ConsumerRunningInfo(
        properties={
            "PROP_CONSUME_TYPE": consume_type,
            "PROP_CONSUMEORDERLY": "true" if orderly else "false",
            "PROP_CONSUMER_START_TIMESTAMP": str(STARTED),
            "messageModel": model,
        },
        subscriptions=subscriptions,
        queues=queues,
    )
    return ClientStatus(cid, "10.0.0.1:5000", "JAVA", 0, "broker-a", info,
                        queue_statuses(info, {("T", "b", 0): 50, ("T", "b", 1): 9}))  # fmt: skip


def test_lag_is_the_broker_offset_minus_the_clients() -> None:
    status = client("c1", (QueueRunningInfo("T", "b", 0, 42), QueueRunningInfo("T", "b", 1, 12),
                           QueueRunningInfo("T", "b", 2, 3)))  # fmt: skip
    assert [(q.queue_id, q.broker_offset, q.lag) for q in status.queues] == [
        (0, 50, 8),
        (1, 9, 0),  # a client ahead of a stale broker offset is not behind
        (2, None, None),  # the master did not say
    ]


def test_a_queue_with_a_cache_and_no_consumption_for_a_minute_looks_blocked() -> None:
    fresh = NOW - BLOCKED_AFTER_MS + 1_000
    stale = NOW - BLOCKED_AFTER_MS - 5_000
    status = client(
        "c1",
        (
            QueueRunningInfo("T", "b", 0, 1, cached_count=3, last_consume_ms=stale),
            QueueRunningInfo("T", "b", 1, 1, cached_count=3, last_consume_ms=fresh),
            QueueRunningInfo("T", "b", 2, 1, cached_count=0, last_consume_ms=stale),
            QueueRunningInfo("T", "b", 3, 1, cached_count=2),  # never consumed: since start
        ),
    )
    assert warnings(status, NOW) == [
        "T@b:0: 3 message(s) cached and nothing consumed for 65 s: the listener may be blocked",
        "T@b:3: 2 message(s) cached and nothing consumed for 600 s: the listener may be blocked",
    ]
    assert warnings(client("pull", status.info.queues if status.info else (),
                           consume_type="CONSUME_ACTIVELY"), NOW) == []  # fmt: skip


def test_orderly_queues_not_locked_are_named() -> None:
    queues = (QueueRunningInfo("T", "b", 0, 1, locked=True),
              QueueRunningInfo("T", "b", 1, 1, locked=False))  # fmt: skip
    assert warnings(client("c1", queues, orderly=True), NOW) == [
        "T@b:1: not locked, so orderly consumption of it waits"
    ]
    assert warnings(client("c1", queues, orderly=True, model="BROADCASTING"), NOW) == []


def test_clients_that_subscribe_differently_are_shown() -> None:
    same = [client("c1"), client("c2")]
    assert subscriptions_differ(same) is None
    assert subscriptions_differ([client("c1")]) is None
    other = client("c2", subscriptions=(SubscriptionInfo("T", "tagA"),))
    assert subscriptions_differ([client("c1"), other]) == {
        "c1": "T (TAG *)",
        "c2": "T (TAG tagA)",
    }
