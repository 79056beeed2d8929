"""Rates from the brokers' running counters, on a fake clock."""

from __future__ import annotations

from ledgermq.console.rates import Rates


class FakeClock:
    def __init__(self) -> None:
        self.ms = 0

    def monotonic_ms(self) -> int:
        return self.ms

    def wall_time_s(self) -> float:
        return self.ms / 1000


def test_a_rate_needs_two_samples_a_second_apart() -> None:
    clock = FakeClock()
    rates = Rates(clock)
    assert rates.rate("a put", 100) is None
    clock.ms = 2000
    assert rates.rate("a put", 300) == 100.0
    clock.ms = 2100  # another browser a moment later: the last rate, no new sample
    assert rates.rate("a put", 301) == 100.0
    clock.ms = 3000
    assert rates.rate("a put", 400) == 100.0
    assert rates.rate("b put", None) is None


def test_a_counter_that_went_down_starts_afresh() -> None:
    clock = FakeClock()
    rates = Rates(clock)
    rates.rate("a get", 1000)
    clock.ms = 1000
    assert rates.rate("a get", 5) is None  # the broker restarted
    clock.ms = 2000
    assert rates.rate("a get", 15) == 10.0
