"""The replicated records of POP consumption: every change to a queue's POP state is one of these.

They are decisions, not requests: a record says what happened (offset 7 handed out for the 2nd
time under handle seq 41, invisible until t), never "receive up to 32 messages". The leader makes
the decision with ``PopQueue.plan_*`` against its applied state and its clock, proposes the
records through the ledger's metadata channel, and every replica applies them with
``PopQueue.apply``, which reads nothing but the record and the state: no clock, no consume
queue, no randomness. So a replica that applies the same records holds the same state, and a new
master after a failover answers exactly as the old one would have (issue 16, section 2).

A record planned against a state that moved on before it was applied (two receives planned
concurrently, an ack that overtook a redelivery) is refused by ``apply`` on every replica alike:
see ``Outcome``.

The encoding is a flat JSON object (``encode_record`` / ``decode_record``), the metadata
channel's currency; ``kind`` names the record type.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = [
    "Acked",
    "DeadLetterReason",
    "DeadLettered",
    "Delivered",
    "InvisibilityChanged",
    "PopRecord",
    "ReceiptHandle",
    "decode_record",
    "encode_record",
]


@dataclass(frozen=True, slots=True, order=True)
class ReceiptHandle:
    """Names one delivery of one message: ``offset`` in the queue and the ``seq`` it was given.

    ``seq`` comes from the queue's counter (``PopQueue.next_seq``), which every delivery and
    every change of invisibility advances, so no two handles of a queue are ever equal, and a
    handle stops being valid as soon as its message is delivered again or re-armed. The wire
    form (``str``) is the service's business; this is ``"<offset>.<seq>"``.
    """

    offset: int
    seq: int

    def __str__(self) -> str:
        return f"{self.offset}.{self.seq}"

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """The handle ``str(handle)`` made; ValueError for anything else."""
        offset, sep, seq = text.partition(".")
        if not sep or not offset.isdigit() or not seq.isdigit():
            raise ValueError(f"not a receipt handle: {text!r}")
        return cls(int(offset), int(seq))


@dataclass(frozen=True, slots=True)
class Delivered:
    """The message at ``offset`` was handed out for the ``attempt``-th time (1 = first).

    ``seq``: its new handle's number; at least the queue's ``next_seq`` when applied.
    ``at_ms``: the leader's clock when it decided (the redelivery rule is checked against this,
    never against the applying replica's clock). ``invisible_until_ms``: when it comes back if
    not acknowledged. ``group``: its message group (``MESSAGE_GROUP``), None for none; kept so
    that FIFO planning needs no look-up for messages in flight.
    """

    offset: int
    seq: int
    attempt: int
    at_ms: int
    invisible_until_ms: int
    group: str | None


@dataclass(frozen=True, slots=True)
class Acked:
    """The delivery ``seq`` of the message at ``offset`` was acknowledged: it is done."""

    offset: int
    seq: int


@dataclass(frozen=True, slots=True)
class InvisibilityChanged:
    """ChangeInvisibleDuration: delivery ``seq`` re-armed until ``invisible_until_ms`` under a
    new handle ``new_seq``; the old handle is invalid from here on. The attempt count stays."""

    offset: int
    seq: int
    new_seq: int
    at_ms: int
    invisible_until_ms: int


class DeadLetterReason(enum.Enum):
    """Why a message went to the dead-letter queue (``%DLQ%<group>``)."""

    MAX_ATTEMPTS = "max_attempts"
    """Delivered the group's maximum number of times, and its last delivery expired unacked."""
    FORWARDED = "forwarded"
    """The client asked (ForwardMessageToDeadLetterQueue) with a valid handle."""


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """The message at ``offset`` (last delivery ``seq``) is done by going to the dead letters.

    Copying the message to ``%DLQ%<group>`` is the service's side effect, done before it
    proposes this record: a crash between the two copies it twice, never loses it.
    """

    offset: int
    seq: int
    at_ms: int
    reason: DeadLetterReason


PopRecord: TypeAlias = Delivered | Acked | InvisibilityChanged | DeadLettered

_KINDS: Final[dict[str, type[PopRecord]]] = {
    "delivered": Delivered,
    "acked": Acked,
    "invisibility_changed": InvisibilityChanged,
    "dead_lettered": DeadLettered,
}
_KIND_OF: Final[dict[type[PopRecord], str]] = {cls: kind for kind, cls in _KINDS.items()}
_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "delivered": ("offset", "seq", "attempt", "at_ms", "invisible_until_ms", "group"),
    "acked": ("offset", "seq"),
    "invisibility_changed": ("offset", "seq", "new_seq", "at_ms", "invisible_until_ms"),
    "dead_lettered": ("offset", "seq", "at_ms", "reason"),
}


def encode_record(record: PopRecord) -> dict[str, int | str | None]:
    """The record as a flat JSON-able object, ``kind`` first."""
    kind = _KIND_OF[type(record)]
    encoded: dict[str, int | str | None] = {"kind": kind}
    for name in _FIELDS[kind]:
        value = getattr(record, name)
        encoded[name] = value.value if isinstance(value, DeadLetterReason) else value
    return encoded


def decode_record(encoded: dict[str, object]) -> PopRecord:
    """The record ``encode_record`` made; ValueError names what is wrong with anything else."""
    kind = encoded.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise ValueError(f"unknown POP record kind {kind!r}")
    names = _FIELDS[kind]
    if set(encoded) != {"kind", *names}:
        raise ValueError(f"a {kind} record has the fields {sorted(names)}, got {sorted(encoded)}")
    if kind == "delivered":
        group = encoded["group"]
        if group is not None and not isinstance(group, str):
            raise ValueError(f"a message group is a string or null, got {group!r}")
        offset, seq, attempt, at_ms, until = (_int(encoded, n) for n in names[:-1])
        return Delivered(offset, seq, attempt, at_ms, until, group)
    if kind == "acked":
        offset, seq = (_int(encoded, n) for n in names)
        return Acked(offset, seq)
    if kind == "invisibility_changed":
        offset, seq, new_seq, at_ms, until = (_int(encoded, n) for n in names)
        return InvisibilityChanged(offset, seq, new_seq, at_ms, until)
    reason = encoded["reason"]
    try:
        parsed = DeadLetterReason(reason)
    except ValueError:
        raise ValueError(f"unknown dead-letter reason {reason!r}") from None
    offset, seq, at_ms = (_int(encoded, n) for n in names[:-1])
    return DeadLettered(offset, seq, at_ms, parsed)


def _int(encoded: dict[str, object], name: str) -> int:
    value = encoded[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value
