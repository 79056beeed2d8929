"""Timer messages of the broker: ``ledgermq.broker.timers.TimerWheel`` fed by the replicated log.

A timer message is stored at once, in the system timer topic ``rmq_sys_wheel_timer`` (RocketMQ
5's ``TimerMessageStore.TIMER_TOPIC``) with its real topic and queue in ``REAL_TOPIC`` /
``REAL_QID`` and its due time in ``TIMER_OUT_MS``; its timer id is its commit-log offset. The
table changes on three kinds of committed entries, applied by every replica in log order:

- a record in the timer topic (dispatched like any message): ``Scheduled(offset, due)``. The
  send is one append, and the pending set is rebuilt from the records on every replica;
- a ``timer`` op on the metadata channel (``ops.TimerOp``): ``Firing`` (the master starts
  delivering), ``Recalled`` (RecallMessage) and ``Fired`` (a timer dropped because its message
  is unreadable);
- a delivered message carrying ``LEDGERMQ_TIMER_ID`` in its real topic: ``Fired``. The delivery
  and the end of its timer are the same entry, so a master that dies after writing it cannot
  leave the timer firing: a new master re-delivers exactly the timers whose message was not
  written, and nothing twice.

Data entries carry no op index of their own, so the table keeps ``applied_index``, the last
ledger index whose records are in it, and skips anything older on a replay after a restart
(metadata ops are also skipped by ``BrokerMetadata``'s own index). A record of the entry at
``applied_index`` itself may be applied again: every outcome of that is a no-op (DUPLICATE,
NOT_FOUND, STALE).

Besides the wheel, the table knows each timer's (real topic, unique key), so that a recall
handle (which names those) finds its timers, and the unique keys of firing timers, so that the
dispatcher decodes only the records that may be deliveries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.timers import (
    DEFAULT_SLOT_MS,
    Fired,
    Firing,
    Recalled,
    Scheduled,
    TimerOutcome,
    TimerRecord,
    TimerWheel,
)
from ledgermq.errors import MessageFormatError
from ledgermq.wire.message import MessageProperty, decode_records

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.broker.state.ops import TimerOp

__all__ = ["TIMER_TOPIC", "TimerKey", "TimerTable"]

_log = logging.getLogger(__name__)

TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
"""Where timer messages wait (RocketMQ 5's ``TimerMessageStore.TIMER_TOPIC``), queue 0."""

TimerKey = tuple[str, str]
"""(real topic, unique key): what a recall handle names."""


class TimerTable:
    """The applied timers; changed only by the three entry kinds of the module docstring."""

    def __init__(self, slot_ms: int = DEFAULT_SLOT_MS) -> None:
        self.wheel = TimerWheel(slot_ms)
        self.applied_index = -1
        """The last ledger index whose timer records are in this table."""
        self._keys: dict[int, TimerKey] = {}
        """Timer id -> (topic, unique key), for every pending or firing timer."""
        self._by_key: dict[TimerKey, set[int]] = {}
        self.firing_uniqs: dict[str, int] = {}
        """Unique key -> how many firing timers have it: the dispatcher's cheap test."""

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.wheel)

    def key(self, timer_id: int) -> TimerKey | None:
        return self._keys.get(timer_id)

    def timers_of(self, key: TimerKey) -> list[int]:
        """Pending or firing timers of a (topic, unique key), oldest first."""
        return sorted(self._by_key.get(key, ()))

    def is_pending(self, timer_id: int) -> bool:
        return self.wheel.due_ms(timer_id) is not None

    def is_firing(self, timer_id: int) -> bool:
        return timer_id in self._keys and self.wheel.due_ms(timer_id) is None

    # ------------------------------------------------------------------ changes
    def _fresh(self, index: int) -> bool:
        """Whether the entry at ``index`` is new to this table (module docstring)."""
        if index < self.applied_index:
            return False
        self.applied_index = index
        return True

    def on_timer_record(self, index: int, offset: int, record: bytes) -> None:
        """A record of the timer topic was dispatched: schedule it."""
        if not self._fresh(index):
            return
        try:
            (message,) = decode_records(record)
            props = message.properties
            due_ms = int(props[MessageProperty.TIMER_OUT_MS])
            topic = props[MessageProperty.REAL_TOPIC]
        except (MessageFormatError, KeyError, ValueError) as exc:
            # Written by a master, so never expected; every replica skips it alike.
            _log.error("timer message at offset %d is malformed (%s); not scheduled", offset, exc)
            return
        uniq = props.get(MessageProperty.UNIQ_KEY, "")
        if self.wheel.apply(Scheduled(offset, max(0, due_ms))) is TimerOutcome.APPLIED:
            key = (topic, uniq)
            self._keys[offset] = key
            self._by_key.setdefault(key, set()).add(offset)

    def on_possible_delivery(self, index: int, record: bytes) -> None:
        """A record whose unique key is a firing timer's was dispatched: if it is the delivery
        of one (``LEDGERMQ_TIMER_ID``), that timer has fired."""
        try:
            (message,) = decode_records(record)
        except (MessageFormatError, ValueError):
            return
        text = message.properties.get(MessageProperty.TIMER_ID)
        if text is None or not text.isdigit():
            return
        if self._fresh(index):
            self._apply(Fired(int(text)))

    def apply_op(self, index: int, op: TimerOp) -> list[TimerOutcome]:
        """Apply a ``timer`` op (``ops.decode_op`` checked it: this does not fail)."""
        if not self._fresh(index):
            return []
        return [self._apply(r) for r in op.records]

    def _apply(self, record: TimerRecord) -> TimerOutcome:
        outcome = self.wheel.apply(record)
        if outcome is not TimerOutcome.APPLIED:
            return outcome
        key = self._keys.get(record.timer_id)
        if key is None:  # only a timer scheduled by a record has a key; nothing to keep
            return outcome
        uniq = key[1]
        if isinstance(record, Firing):
            self.firing_uniqs[uniq] = self.firing_uniqs.get(uniq, 0) + 1
        elif isinstance(record, (Fired, Recalled)):
            if isinstance(record, Fired):
                left = self.firing_uniqs.get(uniq, 0) - 1
                if left > 0:
                    self.firing_uniqs[uniq] = left
                else:
                    self.firing_uniqs.pop(uniq, None)
            del self._keys[record.timer_id]
            ids = self._by_key[key]
            ids.discard(record.timer_id)
            if not ids:
                del self._by_key[key]
        return outcome

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> dict[str, object]:
        return {
            "appliedIndex": self.applied_index,
            "wheel": self.wheel.snapshot(),
            "keys": [[t, topic, uniq] for t, (topic, uniq) in sorted(self._keys.items())],
        }

    @staticmethod
    def restore(value: Mapping[str, Any]) -> TimerTable:
        """The table ``snapshot`` made; ValueError / TypeError / KeyError if damaged."""
        wheel = TimerWheel.from_snapshot(value["wheel"])
        table = TimerTable(wheel.slot_ms)
        table.wheel = wheel
        table.applied_index = int(value["appliedIndex"])
        firing = set(wheel.firing())
        for timer_id, topic, uniq in value["keys"]:
            key = (str(topic), str(uniq))
            table._keys[int(timer_id)] = key
            table._by_key.setdefault(key, set()).add(int(timer_id))
            if int(timer_id) in firing:
                table.firing_uniqs[key[1]] = table.firing_uniqs.get(key[1], 0) + 1
        return table
