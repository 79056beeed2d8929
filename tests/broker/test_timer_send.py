"""The send side of timer messages (``broker.service.timers``), pure: which property gives the
due time (RocketMQ's precedence), what is refused, what a waiting message carries, and the
recall handle's wire form (RocketMQ 5.3's ``RecallMessageHandle`` v1)."""

from __future__ import annotations

import base64

import pytest

from ledgermq.broker.errors import IllegalMessageError, InvalidArgumentError
from ledgermq.broker.service.timers import RecallHandle, divert_timer, due_ms
from ledgermq.wire.message import decode_properties

NOW = 1_800_000_000_000


def test_due_time_precedence_sec_then_ms_then_deliver() -> None:
    assert due_ms({}, NOW) is None
    assert due_ms({"TIMER_DELIVER_MS": str(NOW + 5)}, NOW) == NOW + 5
    assert due_ms({"TIMER_DELIVER_MS": "1", "TIMER_DELAY_MS": "70"}, NOW) == NOW + 70
    everything = {"TIMER_DELIVER_MS": "1", "TIMER_DELAY_MS": "70", "TIMER_DELAY_SEC": "3"}
    assert due_ms(everything, NOW) == NOW + 3000
    for bad in ("", "soon", "1.5", " 5", "+5", "5_000", "9" * 400):
        with pytest.raises(IllegalMessageError, match="whole number"):
            due_ms({"TIMER_DELAY_MS": bad}, NOW)
    with pytest.raises(IllegalMessageError, match="negative"):
        due_ms({"TIMER_DELAY_SEC": "-1"}, NOW)


def test_divert() -> None:
    assert divert_timer({"a": "b"}, "T", 1, NOW, 60) is None  # not a timer
    assert divert_timer({"TIMER_DELIVER_MS": str(NOW)}, "T", 1, NOW, 60) is None  # due now
    assert divert_timer({"TIMER_DELIVER_MS": "5"}, "T", 1, NOW, 60) is None  # past
    with pytest.raises(IllegalMessageError, match="timerMaxDelaySec"):
        divert_timer({"TIMER_DELAY_SEC": "61"}, "T", 1, NOW, 60)
    kept = divert_timer({"TIMER_DELAY_SEC": "60", "UNIQ_KEY": "U", "k": "v"}, "T", 1, NOW, 60)
    assert kept is not None
    assert (kept.due_ms, kept.uniq_key) == (NOW + 60_000, "U")
    props = decode_properties(kept.properties)
    assert props == {
        "TIMER_DELAY_SEC": "60", "UNIQ_KEY": "U", "k": "v", "REAL_TOPIC": "T", "REAL_QID": "1",
        "TIMER_OUT_MS": str(NOW + 60_000),
    }  # fmt: skip
    no_key = divert_timer({"TIMER_DELAY_MS": "10"}, "T", 0, NOW, 60)
    assert no_key is not None
    assert no_key.uniq_key  # one is made: recall and the delivery need it
    assert decode_properties(no_key.properties)["UNIQ_KEY"] == no_key.uniq_key


def test_recall_handle_wire_form() -> None:
    handle = RecallHandle("T", "broker-a", NOW, "ID1")
    text = str(handle)
    assert base64.urlsafe_b64decode(text).decode() == f"v1 T broker-a {NOW} ID1"
    assert RecallHandle.parse(text) == handle
    for bad in ("", "!!!", base64.urlsafe_b64encode(b"v2 T b 1 x").decode(),
                base64.urlsafe_b64encode(b"v1 T b notanumber x").decode(),
                base64.urlsafe_b64encode(b"v1 T b 1").decode()):  # fmt: skip
        with pytest.raises(InvalidArgumentError, match="recall handle is invalid"):
            RecallHandle.parse(bad)
