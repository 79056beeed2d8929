"""What a scheduler does with a head it can never deliver: skip it, never block the rest.

Every scheduler of the broker walks a queue or table in order (delay levels, timers, POP revive,
transaction check-backs). If its head can never be delivered (its target topic is not a valid
topic, e.g. a 132-byte ``%RETRY%`` topic; a queue id that is not a number; a message that does
not decode), retrying it for ever stops every message behind it, and does so on every master
after every failover, since the head is committed state (issue 25 item 7). So a scheduler
tells the two kinds of failure apart:

- **deterministic**: the same head fails the same way on any replica at any time (a refusal by
  validation: ``InvalidMessageError``, ``IllegalMessageError``, ``InvalidArgumentError``; bytes
  that do not decode: ``MessageFormatError``). A scheduler that parses a head's properties
  itself turns what it cannot parse into one of these where it parses it; a bare ``ValueError``,
  ``KeyError`` or ``TypeError`` from anywhere else is a bug of ours, not a property of the head,
  and is retried: dropping a user's message for our bug would lose it. The head is
  dead-lettered where a dead-letter queue makes sense,
  or else dropped, with one ERROR line and the counter
  ``ledgermq_broker_scheduler_dropped_total{scheduler=...}``, and the scheduler goes on;
- **transient** (not the master any more, no quorum, the ledger busy or full, an outcome not
  known): everything else; the head is retried, as before.

Checking the target *before* storing matters too: a topic name the encoder accepts but no queue
can hold (``%RETRY%orders.v1``) would be committed and then quarantined by every replica's
dispatcher (``storage.dispatcher``), so ``target_problem`` refuses it first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import IllegalMessageError, InvalidArgumentError
from ledgermq.errors import InvalidMessageError, MessageFormatError
from ledgermq.wire.names import topic_name_problem

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["DETERMINISTIC_ERRORS", "drop_head", "is_deterministic", "target_problem"]

_log = logging.getLogger(__name__)

DETERMINISTIC_ERRORS: Final = (
    InvalidMessageError,
    IllegalMessageError,
    InvalidArgumentError,
    MessageFormatError,
)
"""Failures that retrying the same head can never fix (the module docstring)."""
MAX_QUEUE_ID: Final = 0x7FFFFFFF


def is_deterministic(exc: BaseException) -> bool:
    """Whether storing the head failed for a reason that retrying it can never fix."""
    return isinstance(exc, DETERMINISTIC_ERRORS)


def target_problem(topic: str | None, queue_id: int | str | None) -> str | None:
    """Why a head cannot be stored in ``topic`` / ``queue_id``, None when it can: the checks
    every replica's dispatcher makes (a valid topic name, a queue id 0 .. 2^31-1)."""
    if not topic:
        return "it names no target topic"
    problem = topic_name_problem(topic)
    if problem is not None:
        return f"its target topic breaks the rule: {problem}"
    if queue_id is None:
        return "it names no target queue"
    try:
        number = int(queue_id)
    except ValueError:
        return f"its target queue id {queue_id!r} is not a number"
    if not 0 <= number <= MAX_QUEUE_ID:
        return f"its target queue id {number} is out of range"
    return None


def drop_head(state: BrokerState, scheduler: str, what: str, reason: str) -> None:
    """Log and count a head that is skipped for good; ``what`` names it (message id, offset)."""
    state.stats.record_dropped(scheduler)
    _log.error(
        "%s scheduler: %s can never be delivered (%s); dropped so the messages behind it go on",
        scheduler, what, reason,
    )  # fmt: skip
