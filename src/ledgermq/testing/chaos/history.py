"""What a chaos run records: every send with its outcome, every fault, every message read back.

A history is data, not behaviour: the workload and the nemesis append to it while the run goes
on, the checker (``checker.py``) judges it afterwards, and it is written to ``history.jsonl`` so
that a failed run can be judged again, or by another checker, without running it again.
Times are milliseconds since the start of the run (``time.monotonic`` based), so that the
invoke / complete intervals of different producers can be compared.
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FaultRecord",
    "History",
    "LiveRead",
    "OffsetOp",
    "Outcome",
    "PopAck",
    "PopDeadLetter",
    "PopDelivery",
    "ReadMessage",
    "SendOp",
    "message_body",
    "parse_body",
    "queue_key",
]

_BODY_PREFIX = "chaos"
QUEUE_STRIDE = 1000
"""A history's queue numbers are ``group index x QUEUE_STRIDE + queue id`` (``queue_key``):
with two broker groups, queue 0 of ``broker-b`` is queue 1000 (with one, queue ids as is)."""


def queue_key(broker_name: str, queue_id: int) -> int:
    """The history's number of queue ``queue_id`` of ``broker-a``, ``broker-b``, ..."""
    return (ord(broker_name[-1]) - ord("a")) * QUEUE_STRIDE + queue_id


class Outcome(enum.Enum):
    """How a send ended, as the producer saw it.

    ``OK``: the broker acknowledged it (SEND_OK) at ``(queue, offset)``: it must be there for
    ever. ``FAILED``: the broker or the client says it was not stored (refused, no route,
    connection never made): it must be absent. ``UNKNOWN``: a timeout, a connection lost after
    the request left, or the broker's "not acknowledged by a quorum in time": either is fine,
    it is counted.
    """

    OK = "ok"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SendOp:
    """One send: producer ``producer`` sent its message number ``seq``."""

    producer: int
    seq: int
    invoke_ms: float
    complete_ms: float
    outcome: Outcome
    queue: int = -1
    """Queue id the broker stored it in (OK only)."""
    offset: int = -1
    """Queue offset the broker acknowledged (OK only)."""
    error: str = ""
    mode: str = "single"
    """How it was sent: "single" (``send``), "batch" (one of a ``send_batch``; the messages of
    a batch share the request's times and outcome), "orderly" (``send_orderly``, the
    producer's own sharding key: every message of the producer goes to one queue)."""
    attempt: int = 0
    """0 for the first attempt; a retry of the same message after an unknown outcome is its
    own record with attempt 1, 2, ..."""


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One fault of the nemesis: what, on which node(s), from when to when (heal time)."""

    kind: str
    nodes: tuple[str, ...]
    start_ms: float
    end_ms: float


@dataclass(frozen=True, slots=True)
class ReadMessage:
    """One message as a reader found it: ``(queue, offset)`` and who sent it."""

    queue: int
    offset: int
    producer: int
    seq: int


@dataclass(frozen=True, slots=True)
class LiveRead:
    """One message a pull reader got while the run went on, faults included, at ``at_ms``."""

    at_ms: float
    queue: int
    offset: int
    producer: int
    seq: int


@dataclass(frozen=True, slots=True)
class OffsetOp:
    """One request about the pull reader's consumer group offset of ``queue``.

    ``kind`` "commit": UPDATE_CONSUMER_OFFSET of ``offset`` (the next offset to read), which the
    broker answers once the ledger committed it; ``outcome`` as a send's. ``kind`` "query":
    QUERY_CONSUMER_OFFSET, ``offset`` the answer (-1: none stored), OK or FAILED.
    """

    kind: str
    queue: int
    invoke_ms: float
    complete_ms: float
    outcome: Outcome
    offset: int


@dataclass(frozen=True, slots=True)
class PopDelivery:
    """One message a POP receiver of the run's POP group got: the receive was invoked at
    ``invoke_ms`` and answered at ``complete_ms``; ``attempt`` 1 is the first delivery."""

    receiver: int
    invoke_ms: float
    complete_ms: float
    queue: int
    offset: int
    producer: int
    seq: int
    attempt: int
    handle: str
    msg_id: str = ""


@dataclass(frozen=True, slots=True)
class PopAck:
    """One ack of a POP delivery (by its ``handle``), and how it ended: ``OK`` (answered
    SUCCESS: the message is done for the group), ``FAILED`` (refused: a stale handle, not the
    master; shown as "refused") or ``UNKNOWN`` (a timeout, a lost connection, "not committed
    in time": it may have taken effect)."""

    receiver: int
    invoke_ms: float
    complete_ms: float
    queue: int
    offset: int
    producer: int
    seq: int
    handle: str
    outcome: Outcome
    error: str = ""


@dataclass(frozen=True, slots=True)
class PopDeadLetter:
    """A message of the topic found in the POP group's ``%DLQ%`` topic after healing;
    ``origin_msg_id`` is the id of the message it copies (``ORIGIN_MESSAGE_ID``)."""

    producer: int
    seq: int
    origin_msg_id: str = ""


def message_body(producer: int, seq: int, pad: int = 0) -> bytes:
    """The body that names a message: ``chaos:<producer>:<seq>:`` then ``pad`` dots."""
    return f"{_BODY_PREFIX}:{producer}:{seq}:".encode() + b"." * pad


def parse_body(body: bytes) -> tuple[int, int] | None:
    """``(producer, seq)`` of a body made by ``message_body``; None for any other message."""
    parts = body.split(b":", 3)
    if len(parts) < 4 or parts[0] != _BODY_PREFIX.encode():
        return None
    try:
        return int(parts[1]), int(parts[2])
    except ValueError:
        return None


@dataclass
class History:
    """The whole record of one run (see the module docstring)."""

    seed: int
    sends: list[SendOp] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    replica_reads: dict[str, list[ReadMessage]] = field(default_factory=dict)
    """Node name -> every message of the topic as that replica serves it, after healing."""
    replica_first: dict[str, dict[int, int]] = field(default_factory=dict)
    """Node name -> queue -> the first offset the replica still holds, where retention deleted
    the queue's oldest messages there (a full disk forces it, whatever their age)."""
    replica_groups: dict[str, int] = field(default_factory=dict)
    """Node name -> its broker group's index (empty: one group); a replica holds only the
    queues ``q`` with ``q // QUEUE_STRIDE`` its group's."""
    replica_errors: dict[str, str] = field(default_factory=dict)
    """Node name -> why it could not be read completely (a replica that must be read)."""
    consumed: list[ReadMessage] = field(default_factory=list)
    """What the consumer group received (duplicates included)."""
    live_reads: list[LiveRead] = field(default_factory=list)
    """What the pull reader got during the run (before healing ended it)."""
    offset_ops: list[OffsetOp] = field(default_factory=list)
    """The pull reader's offset commits and queries, in invoke order."""
    final_offsets: dict[int, int] = field(default_factory=dict)
    """Queue -> the reader group's committed offset as the master answers after healing (-1:
    none, or no answer)."""
    pop_deliveries: list[PopDelivery] = field(default_factory=list)
    """Every message the POP group's receivers got, redeliveries included."""
    pop_acks: list[PopAck] = field(default_factory=list)
    """Every ack the POP receivers sent, with its outcome."""
    pop_dead_letters: list[PopDeadLetter] = field(default_factory=list)
    """The workload's messages in the POP group's ``%DLQ%`` topic after healing."""
    pop_max_attempts: int = 0
    """The POP group's ``retryMaxTimes`` (0: the run had no POP group)."""
    queues: int = 0
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """What went wrong with the cluster itself, e.g. no master once healed (violations)."""

    def holds_queue(self, node: str, queue: int) -> bool:
        """Whether replica ``node`` belongs to the broker group of ``queue``."""
        return self.replica_groups.get(node, 0) == queue // QUEUE_STRIDE

    def expired(self, node: str, queue: int, offset: int) -> bool:
        """Whether retention deleted slot ``(queue, offset)`` on replica ``node``."""
        return offset < self.replica_first.get(node, {}).get(queue, 0)

    def expired_messages(self) -> set[tuple[int, int]]:
        """``(producer, seq)`` of every message (acknowledged, or found on a replica) whose slot
        retention deleted on some replica: a consumer may never see it."""
        slots = {
            (op.queue, op.offset, op.producer, op.seq)
            for op in self.sends
            if op.outcome is Outcome.OK
        }
        for reads in self.replica_reads.values():
            slots |= {(r.queue, r.offset, r.producer, r.seq) for r in reads}
        return {
            (producer, seq)
            for queue, offset, producer, seq in slots
            if any(self.expired(node, queue, offset) for node in self.replica_first)
        }

    def write_jsonl(self, path: Path) -> None:
        """One JSON object a line: a header, then sends, faults, reads, consumed messages,
        the pull reader's messages and offset requests, the POP group's deliveries, acks and
        dead letters."""
        with path.open("w") as out:
            head = {
                "type": "run",
                "seed": self.seed,
                "queues": self.queues,
                "pop_max_attempts": self.pop_max_attempts,
                "notes": self.notes,
                "problems": self.problems,
            }
            out.write(json.dumps(head) + "\n")
            for op in self.sends:
                row = asdict(op)
                row["outcome"] = op.outcome.value
                out.write(json.dumps({"type": "send", **row}) + "\n")
            for fault in self.faults:
                out.write(json.dumps({"type": "fault", **asdict(fault)}) + "\n")
            for node, reads in self.replica_reads.items():
                for read in reads:
                    out.write(json.dumps({"type": "replica", "node": node, **asdict(read)}) + "\n")
            for node, group in self.replica_groups.items():
                out.write(json.dumps({"type": "replica_group", "node": node, "group": group}))
                out.write("\n")
            for node, firsts in self.replica_first.items():
                for queue, first in sorted(firsts.items()):
                    row = {"type": "replica_first", "node": node, "queue": queue, "offset": first}
                    out.write(json.dumps(row) + "\n")
            for node, error in self.replica_errors.items():
                out.write(json.dumps({"type": "replica_error", "node": node, "error": error}))
                out.write("\n")
            for read in self.consumed:
                out.write(json.dumps({"type": "consumed", **asdict(read)}) + "\n")
            for live in self.live_reads:
                out.write(json.dumps({"type": "live_read", **asdict(live)}) + "\n")
            for offset_op in self.offset_ops:
                row = {"type": "offset", **asdict(offset_op), "outcome": offset_op.outcome.value}
                out.write(json.dumps(row) + "\n")
            for queue, offset in sorted(self.final_offsets.items()):
                out.write(json.dumps({"type": "final_offset", "queue": queue, "offset": offset}))
                out.write("\n")
            for delivery in self.pop_deliveries:
                out.write(json.dumps({"type": "pop_delivery", **asdict(delivery)}) + "\n")
            for ack in self.pop_acks:
                row = {"type": "pop_ack", **asdict(ack), "outcome": ack.outcome.value}
                out.write(json.dumps(row) + "\n")
            for letter in self.pop_dead_letters:
                out.write(json.dumps({"type": "pop_dead_letter", **asdict(letter)}) + "\n")

    @classmethod
    def read_jsonl(cls, path: Path) -> History:
        """The inverse of ``write_jsonl``."""
        history = cls(seed=0)
        for line in path.read_text().splitlines():
            row = json.loads(line)
            kind = row.pop("type")
            if kind == "run":
                history.seed, history.queues = row["seed"], row["queues"]
                history.notes = list(row["notes"])
                history.problems = list(row.get("problems", []))
                history.pop_max_attempts = int(row.get("pop_max_attempts", 0))
            elif kind == "send":
                row["outcome"] = Outcome(row["outcome"])
                history.sends.append(SendOp(**row))
            elif kind == "fault":
                row["nodes"] = tuple(row["nodes"])
                history.faults.append(FaultRecord(**row))
            elif kind == "replica":
                node = row.pop("node")
                history.replica_reads.setdefault(node, []).append(ReadMessage(**row))
            elif kind == "replica_group":
                history.replica_groups[row["node"]] = row["group"]
            elif kind == "replica_first":
                history.replica_first.setdefault(row["node"], {})[row["queue"]] = row["offset"]
            elif kind == "replica_error":
                history.replica_errors[row["node"]] = row["error"]
            elif kind == "consumed":
                history.consumed.append(ReadMessage(**row))
            elif kind == "live_read":
                history.live_reads.append(LiveRead(**row))
            elif kind == "offset":
                row["outcome"] = Outcome(row["outcome"])
                history.offset_ops.append(OffsetOp(**row))
            elif kind == "final_offset":
                history.final_offsets[row["queue"]] = row["offset"]
            elif kind == "pop_delivery":
                history.pop_deliveries.append(PopDelivery(**row))
            elif kind == "pop_ack":
                row["outcome"] = Outcome(row["outcome"])
                history.pop_acks.append(PopAck(**row))
            elif kind == "pop_dead_letter":
                history.pop_dead_letters.append(PopDeadLetter(**row))
        return history
