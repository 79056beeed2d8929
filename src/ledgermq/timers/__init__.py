"""Timer (delay) messages as a pure, replicated timer wheel (issue 16 section 3).

No I/O, no clock of its own: the broker plans with ``TimerWheel.plan_fire(now_ms, ...)``,
proposes the records through the ledger's metadata channel and applies them on every replica.
``wheel.py`` has the theory of operation. It moves to ``broker/state`` with the POP model.
"""

from ledgermq.timers.wheel import (
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
