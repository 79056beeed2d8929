"""The broker's timer table (src/ledgermq/broker/state/timer_table.py), without a broker: the
records that schedule, the ops that fire and recall, the delivery that ends a timer, replays
after a restart, and the snapshot."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.state.metadata import BrokerMetadata
from ledgermq.broker.state.ops import TimerOp
from ledgermq.broker.state.timer_table import TimerTable
from ledgermq.broker.timers import Fired, Firing, Recalled, TimerOutcome
from ledgermq.errors import ConfigError
from ledgermq.wire.message import encode_properties, encode_records


def _record(props: dict[str, str], topic: str = "rmq_sys_wheel_timer") -> bytes:
    blob, _ = encode_records(
        topic=topic, queue_id=0, items=[(b"body", 0, encode_properties(props))],
        first_queue_offset=0, born_timestamp=1, born_host=("127.0.0.1", 1),
        store_timestamp=2, store_host=("127.0.0.1", 2),
    )  # fmt: skip
    return blob


def _timer(uniq: str, due_ms: int) -> bytes:
    return _record(
        {"UNIQ_KEY": uniq, "REAL_TOPIC": "T", "REAL_QID": "0", "TIMER_OUT_MS": str(due_ms)}
    )


def test_schedule_fire_deliver_and_replay() -> None:
    table = TimerTable()
    table.on_timer_record(10, 1000, _timer("A", 5_000))
    table.on_timer_record(10, 2000, _timer("B", 6_000))  # same entry: both scheduled
    table.on_timer_record(11, 3000, _record({"UNIQ_KEY": "C"}))  # malformed: skipped
    assert len(table) == 2
    assert table.timers_of(("T", "A")) == [1000]
    assert table.wheel.plan_fire(5_500, 10) == [Firing(1000, 5_500)]
    assert table.apply_op(12, TimerOp((Firing(1000, 5_500),))) == [TimerOutcome.APPLIED]
    assert table.is_firing(1000)
    assert table.firing_uniqs == {"A": 1}
    # a record with A's key but no timer id is not its delivery
    table.on_possible_delivery(13, _record({"UNIQ_KEY": "A"}, topic="T"))
    assert table.is_firing(1000)
    table.on_possible_delivery(14, _record({"UNIQ_KEY": "A", "LEDGERMQ_TIMER_ID": "1000"}, "T"))
    assert not table.is_firing(1000)
    assert table.firing_uniqs == {}
    assert table.timers_of(("T", "A")) == []
    # a replay of entries the table has (a restart from an older point) changes nothing
    before = table.snapshot()
    table.on_timer_record(10, 1000, _timer("A", 5_000))
    assert table.apply_op(12, TimerOp((Firing(2000, 9_000),))) == []
    assert table.snapshot() == before
    # recall: the pending one goes, a second recall finds nothing
    assert table.apply_op(15, TimerOp((Recalled(2000, 5_600),))) == [TimerOutcome.APPLIED]
    assert table.apply_op(16, TimerOp((Recalled(2000, 5_600),))) == [TimerOutcome.NOT_FOUND]
    assert len(table) == 0
    assert table.timers_of(("T", "B")) == []


def test_snapshot_restores_pending_and_firing_timers() -> None:
    table = TimerTable()
    for i, uniq in enumerate("ABC"):
        table.on_timer_record(20 + i, 100 * (i + 1), _timer(uniq, 1_000 * (i + 1)))
    table.apply_op(30, TimerOp((Firing(100, 1_500),)))
    restored = TimerTable.restore(json.loads(json.dumps(table.snapshot())))
    assert restored.snapshot() == table.snapshot()
    assert restored.firing_uniqs == {"A": 1}
    assert restored.applied_index == 30
    assert restored.timers_of(("T", "C")) == [300]
    restored.on_possible_delivery(31, _record({"UNIQ_KEY": "A", "LEDGERMQ_TIMER_ID": "100"}, "T"))
    assert restored.wheel.firing() == []
    assert restored.apply_op(32, TimerOp((Fired(999),))) == [TimerOutcome.NOT_FOUND]


def test_metadata_applies_timer_ops_and_keeps_the_table_in_its_snapshot() -> None:
    metadata = BrokerMetadata()
    metadata.timers.on_timer_record(1, 100, _timer("A", 1_000))
    metadata.apply(2, TimerOp((Firing(100, 1_000),)), 0)
    assert metadata.timers.is_firing(100)
    again = BrokerMetadata()
    again.restore(metadata.snapshot(), "metadata.json")
    assert again.timers.snapshot() == metadata.timers.snapshot()
    # a snapshot from before timers existed restores an empty table
    old = json.loads(metadata.snapshot())
    del old["timerTable"]
    older = BrokerMetadata()
    older.restore(json.dumps(old).encode(), "metadata.json")
    assert len(older.timers) == 0


def test_timer_max_delay_setting(caplog: pytest.LogCaptureFixture) -> None:
    base = {"dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0"}
    assert BrokerConfig.from_properties(base).timer_max_delay_sec == 3 * 24 * 3600
    assert not caplog.records  # the defaults fit the default retention
    BrokerConfig.from_properties({**base, "timerMaxDelaySec": str(30 * 24 * 3600)})
    assert "beyond what the commit log keeps" in caplog.text
    with pytest.raises(ConfigError, match="timerMaxDelaySec"):
        BrokerConfig.from_properties({**base, "timerMaxDelaySec": "0"})


# ---------------------------------------------------------------------- replay from anywhere
_Entry = tuple[str, int, int]
"""(kind, timer id, time): 'schedule' (a record of the timer topic, due at time), 'fire',
'recall', 'deliver' (the delivery record of the timer), 'other' (an entry without timers)."""


def _apply_entry(table: TimerTable, index: int, entry: _Entry) -> None:
    kind, timer_id, at = entry
    uniq = f"U{timer_id % 3}"  # shared keys, as retried sends have
    if kind == "schedule":
        table.on_timer_record(index, timer_id, _timer(uniq, at))
    elif kind == "fire":
        table.apply_op(index, TimerOp((Firing(timer_id, at),)))
    elif kind == "recall":
        table.apply_op(index, TimerOp((Recalled(timer_id, at),)))
    elif kind == "deliver" and uniq in table.firing_uniqs:  # the dispatcher's test
        props = {"UNIQ_KEY": uniq, "LEDGERMQ_TIMER_ID": str(timer_id)}
        table.on_possible_delivery(index, _record(props, "T"))


_ENTRIES = st.lists(
    st.tuples(
        st.sampled_from(["schedule", "fire", "recall", "deliver", "other"]),
        st.integers(1, 6),
        st.integers(0, 5_000),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(entries=_ENTRIES, data=st.data())
def test_a_restart_replaying_from_an_older_point_rebuilds_the_same_table(
    entries: list[_Entry], data: st.DataObject
) -> None:
    """Snapshot after entry k, restart replaying from any entry at or before k + 1 (what the
    dispatcher does: the older of its checkpoint and the metadata snapshot): the same table as
    the replica that never stopped."""
    whole = TimerTable()
    snapshot = TimerTable().snapshot()
    k = data.draw(st.integers(-1, len(entries) - 1))
    for index, entry in enumerate(entries):
        _apply_entry(whole, index, entry)
        if index == k:
            snapshot = json.loads(json.dumps(whole.snapshot()))
    start = data.draw(st.integers(0, k + 1))
    restarted = TimerTable.restore(snapshot)
    for index in range(start, len(entries)):
        _apply_entry(restarted, index, entries[index])
    assert restarted.snapshot() == whole.snapshot()
    assert restarted.firing_uniqs == whole.firing_uniqs
