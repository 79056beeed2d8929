"""``broker.events.ReplicaEvents``: listeners are called in the order they subscribed, a
listener of one topic only for that topic, and commit listeners cannot come after the replica
handed them to its ledger (they must run before its dispatcher)."""

from __future__ import annotations

import pytest

from ledgermq.broker.events import ReplicaEvents


class _Recorder:
    def __init__(self, name: str, seen: list[tuple[str, object]]) -> None:
        self.name = name
        self.seen = seen

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        self.seen.append((self.name, (topic, queue_id, max_offset)))

    def on_commit(self, committed_index: int) -> None:
        self.seen.append((self.name, committed_index))

    def on_failure(self, failure: BaseException) -> None:
        self.seen.append((self.name, str(failure)))


def test_arrivals_reach_every_listener_in_order_and_topic_listeners_only_for_their_topic() -> None:
    seen: list[tuple[str, object]] = []
    events = ReplicaEvents()
    events.subscribe_arrivals(_Recorder("pulls", seen))
    events.subscribe_arrivals(_Recorder("timers", seen), topic="rmq_sys_wheel_timer")
    events.subscribe_arrivals(_Recorder("receives", seen))
    events.arrived("T", 1, 7)
    events.arrived("rmq_sys_wheel_timer", 0, 3)
    assert seen == [
        ("pulls", ("T", 1, 7)),
        ("receives", ("T", 1, 7)),
        ("pulls", ("rmq_sys_wheel_timer", 0, 3)),
        ("receives", ("rmq_sys_wheel_timer", 0, 3)),
        ("timers", ("rmq_sys_wheel_timer", 0, 3)),
    ]


def test_commit_listeners_are_handed_over_once_and_a_late_one_is_refused() -> None:
    seen: list[tuple[str, object]] = []
    events = ReplicaEvents()
    door, other = _Recorder("door", seen), _Recorder("other", seen)
    events.subscribe_commits(door)
    events.subscribe_commits(other)
    for listener in events.take_commit_listeners():
        listener(5)
    assert seen == [("door", 5), ("other", 5)]
    with pytest.raises(RuntimeError, match="before it opens"):
        events.subscribe_commits(_Recorder("late", seen))


def test_a_failure_reaches_every_failure_listener() -> None:
    seen: list[tuple[str, object]] = []
    events = ReplicaEvents()
    events.subscribe_failures(_Recorder("assembly", seen))
    events.subscribe_failures(_Recorder("other", seen))
    events.failed(OSError("disk full"))
    assert seen == [("assembly", "disk full"), ("other", "disk full")]
