"""POP consumption (RocketMQ 5's receive / ack / change-invisible) as a pure, replicated model.

No I/O, no clock of its own, no randomness: the broker's service layer plans with
``PopQueue.plan_*`` (passing the clock), proposes the records through the ledger's metadata
channel and applies them on every replica with ``PopQueue.apply``. ``queue.py`` has the theory
of operation. A package of its own for now, beside the broker's refactoring into
``broker/state``, where it will move (issue 16).
"""

from ledgermq.broker.pop.queue import DEFAULT_MAX_ATTEMPTS, InFlight, Outcome, PopQueue, PopSettings
from ledgermq.broker.pop.records import (
    Acked,
    DeadLettered,
    DeadLetterReason,
    Delivered,
    InvisibilityChanged,
    PopRecord,
    ReceiptHandle,
    decode_record,
    encode_record,
)

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "Acked",
    "DeadLetterReason",
    "DeadLettered",
    "Delivered",
    "InFlight",
    "InvisibilityChanged",
    "Outcome",
    "PopQueue",
    "PopRecord",
    "PopSettings",
    "ReceiptHandle",
    "decode_record",
    "encode_record",
]
