"""The POP group's ack policy: most messages acked at once, some from their second delivery
(redeliveries in a healthy run), a few never (dead letters), the same for every run."""

from __future__ import annotations

from collections import Counter

from ledgermq.testing.chaos.pop_workload import MAX_ATTEMPTS, ack_policy


def test_the_ack_policy_splits_messages_88_10_2() -> None:
    kinds: Counter[str] = Counter()
    for producer in range(3):
        for seq in range(1000):
            first, second = ack_policy(producer, seq, 1), ack_policy(producer, seq, 2)
            last = ack_policy(producer, seq, MAX_ATTEMPTS)
            assert not first or second, "acked at once but not on its redelivery"
            kinds["now" if first else "second" if second else "never"] += 1
            assert last == second
    assert kinds == {"now": 2640, "second": 300, "never": 60}
    assert ack_policy(1, 5, 1) == ack_policy(1, 5, 1)
