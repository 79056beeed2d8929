"""The POP group's ack policy: most messages acked at once, some from their second delivery
(redeliveries in a healthy run), a few never (dead letters), the same for every run."""

from __future__ import annotations

from collections import Counter

from ledgermq.errors import MQResponseError, NetworkError, NoRouteError
from ledgermq.testing.chaos.history import Outcome
from ledgermq.testing.chaos.pop_workload import MAX_ATTEMPTS, ack_policy, classify_ack
from ledgermq.wire import MQResponseCode


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


def test_an_ack_is_refused_only_when_nothing_was_proposed() -> None:
    def answered(code: int, remark: str) -> MQResponseError:
        return MQResponseError(f"10.0.0.1:10911 answered {code} {remark}", code)

    stale = answered(MQResponseCode.NO_MESSAGE, "receipt handle ... is not the current delivery")
    slave = answered(MQResponseCode.SERVICE_NOT_AVAILABLE, "replica n2 is a slave now; POP ...")
    late = answered(MQResponseCode.SERVICE_NOT_AVAILABLE, "the change was not stored: timeout")
    assert classify_ack(stale) is Outcome.FAILED
    assert classify_ack(slave) is Outcome.FAILED
    assert classify_ack(NoRouteError("broker group broker-a has no master")) is Outcome.FAILED
    assert classify_ack(late) is Outcome.UNKNOWN  # its entry may still commit
    assert classify_ack(NetworkError("timed out after 3 s")) is Outcome.UNKNOWN
    assert classify_ack(answered(MQResponseCode.SYSTEM_ERROR, "x")) is Outcome.UNKNOWN
