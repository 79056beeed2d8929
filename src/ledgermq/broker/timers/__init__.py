"""Timer (delay) messages as a pure, replicated timer wheel (issue 16 section 3).

No I/O, no clock of its own: the broker plans with ``TimerWheel.plan_fire(now_ms, ...)``,
proposes the records through the ledger's metadata channel and applies them on every replica.
``wheel.py`` has the theory of operation. The broker holds one in ``broker.state.timer_table``
(fed by the replicated log) and drives it from ``broker.service.timers`` (the master's driver,
the send side and RecallMessage).
"""

from ledgermq.broker.timers.wheel import (
    DEFAULT_SLOT_MS,
    Fired,
    Firing,
    Recalled,
    Scheduled,
    TimerOutcome,
    TimerRecord,
    TimerWheel,
    decode_timer_record,
    encode_timer_record,
)

__all__ = [
    "DEFAULT_SLOT_MS",
    "Fired",
    "Firing",
    "Recalled",
    "Scheduled",
    "TimerOutcome",
    "TimerRecord",
    "TimerWheel",
    "decode_timer_record",
    "encode_timer_record",
]
