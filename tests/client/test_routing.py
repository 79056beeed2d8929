"""Pure routing policy: publish info, queue selection with fault avoidance, pull addresses,
AllocateMessageQueueAveragely (RocketMQ's examples), ProcessQueue offset tracking."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledgermq.client._routing import (
    LatencyFaultTolerance,
    MessageQueue,
    ProcessQueue,
    allocate_averagely,
    java_hash_mod,
    master_address,
    publish_info,
    pull_address,
    select_queue,
    sharding_queue,
    subscribe_queues,
)
from ledgermq.wire.route import BrokerData, QueueData, TopicRouteData


def route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=(
            QueueData("b", 2, 2, 6),
            QueueData("a", 3, 2, 6),
            QueueData("c", 2, 2, 4),  # read only
            QueueData("d", 2, 2, 6),  # no master
        ),
        broker_datas=(
            BrokerData("C", "a", {0: "a0", 1: "a1"}),
            BrokerData("C", "b", {0: "b0"}),
            BrokerData("C", "c", {0: "c0"}),
            BrokerData("C", "d", {2: "d2", 1: "d1"}),
        ),
    )


def mq(broker: str, qid: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic, broker, qid)


def test_publish_info_lists_writable_queues_of_groups_with_a_master_in_order() -> None:
    info = publish_info("T", route())
    assert info.queues == (mq("a", 0), mq("a", 1), mq("b", 0), mq("b", 1))
    borrowed = publish_info("New", route(), borrowed=True, borrowed_queue_nums=1)
    assert borrowed.queues == (mq("a", 0, "New"), mq("b", 0, "New"))
    assert borrowed.borrowed


def test_subscribe_queues_are_readable_queues_of_every_group() -> None:
    queues = subscribe_queues("T", route())
    assert queues == sorted(queues)
    assert len(queues) == 3 + 2 + 2 + 2


def test_addresses_master_else_lowest_slave() -> None:
    r = route()
    assert master_address(r, "a") == "a0"
    assert master_address(r, "d") is None
    assert pull_address(r, "a") == "a0"
    assert pull_address(r, "d") == "d1"
    assert pull_address(r, "zzz") is None


def test_selection_is_round_robin_and_avoids_failed_groups() -> None:
    info = publish_info("T", route())
    assert [select_queue(info, i) for i in range(5)] == [*info.queues, info.queues[0]]
    # the group of the previous failed attempt is skipped
    assert select_queue(info, 0, last_failed_broker="a").broker_name == "b"
    faults = LatencyFaultTolerance()
    faults.mark_failed("b", now_ms=1000, duration_ms=500)
    picks = {select_queue(info, i, faults=faults, now_ms=1200).broker_name for i in range(4)}
    assert picks == {"a"}
    # everything excluded: still sends somewhere, preferring a group other than the last failed
    faults.mark_failed("a", now_ms=1000, duration_ms=500)
    assert (
        select_queue(info, 0, last_failed_broker="a", faults=faults, now_ms=1200).broker_name == "b"
    )
    # time passes: available again
    assert faults.is_available("b", 1500)
    faults.mark_ok("a")
    assert faults.is_available("a", 1200)


def test_sharding_is_java_string_hash_mod() -> None:
    info = publish_info("T", route())
    # "hello".hashCode() == 99162322 in Java
    assert java_hash_mod("hello", 4) == 99162322 % 4
    # negative hash: "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert java_hash_mod("polygenelubricants", 3) == abs(-(1 << 31)) % 3
    assert sharding_queue(info, "hello") == info.queues[99162322 % 4]


def test_allocate_averagely_rocketmq_examples() -> None:
    queues = [mq("a", i) for i in range(8)]
    cids = ["c0", "c1", "c2"]
    result = {c: [q.queue_id for q in allocate_averagely(c, cids, queues)] for c in cids}
    assert result == {"c0": [0, 1, 2], "c1": [3, 4, 5], "c2": [6, 7]}
    two = [mq("a", 0), mq("a", 1)]
    assert [allocate_averagely(c, cids, two) for c in cids] == [[two[0]], [two[1]], []]
    # unsorted input is sorted first; a client not in the list gets nothing
    assert allocate_averagely("c1", ["c2", "c1"], reversed(queues)) == queues[:4]
    assert allocate_averagely("zz", cids, queues) == []
    assert allocate_averagely("c0", cids, []) == []


@given(
    st.integers(1, 40),
    st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=12, unique=True),
)
def test_allocation_partitions_the_queues(n_queues: int, cids: list[str]) -> None:
    queues = [mq("a", i) for i in range(n_queues)]
    shares = [allocate_averagely(c, cids, queues) for c in cids]
    flat = [q for share in shares for q in share]
    assert sorted(flat) == queues  # every queue exactly once
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_process_queue_never_passes_an_unconsumed_offset() -> None:
    pq = ProcessQueue(10)
    assert pq.consumed_offset == 10
    pq.put([10, 11, 12, 13], next_offset=14)
    assert pq.count == 4
    assert pq.remove([11, 13]) == 10  # 10 is still in flight
    assert pq.remove([10]) == 12
    pq.skip_to(20)  # nothing matched up to 20, but 12 is in flight
    assert pq.consumed_offset == 12
    assert pq.remove([12]) == 20
    assert pq.count == 0


@given(st.lists(st.integers(0, 49), unique=True))
def test_process_queue_matches_a_dumb_oracle(order: list[int]) -> None:
    pq = ProcessQueue(0)
    pq.put(range(50), next_offset=50)
    consumed: set[int] = set()
    for offset in order:
        got = pq.remove([offset])
        consumed.add(offset)
        expected = next((o for o in range(50) if o not in consumed), 50)
        assert got == expected
