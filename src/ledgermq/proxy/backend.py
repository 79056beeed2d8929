"""What the gRPC door asks of the messages it serves: the ``Backend`` protocol (issue 26 item 4).

One servicer (``proxy.door``) translates the v5 protocol to these calls, whoever stores the
messages: a replica's own services (``proxy.local_backend``: RocketMQ's "local" proxy mode) or
the brokers' masters over remoting (``proxy.remote_backend``: the stand-alone proxy, "cluster"
mode). The ACL, the name and timestamp checks stay at the servicer, once; a backend is asked
only what the door has admitted.

The requests and results are plain values, not the protocol's messages. A backend refuses with
``Refusal`` (``proxy.messages``), whose status it decides: only the backend knows what its
failures mean (a broker service's error, a master's remoting code), and ``proxy.status`` /
``proxy.remote_status`` are the two tables that say it.

Served through the protocol so far: acknowledgements, invisible-time changes, dead letters,
transaction ends, recalls, pulls and offsets. Routes, sends, receives and Telemetry are still
served by each mode's servicer (``proxy.servicer``, ``proxy.cluster_servicer``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ledgermq.proxy.refusal import Refusal
    from ledgermq.wire.message import MessageExt

__all__ = [
    "AckEntry",
    "Backend",
    "Caller",
    "EndTransaction",
    "OffsetPolicy",
    "PullOutcome",
    "PullQuery",
    "Pulled",
    "QueueRef",
    "Resolution",
]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made an admitted call: for the checks a backend makes once it has read a record
    (EndTransaction: PUB on the half message's real topic)."""

    address: str
    """The client's ``host:port``."""
    metadata: Mapping[str, str]
    """The call's metadata, keys in lower case (``authorization`` among them)."""
    request: str
    """The RPC's name, as the ACL's audit names it."""


@dataclass(frozen=True, slots=True)
class AckEntry:
    """One delivery to acknowledge."""

    message_id: str
    receipt_handle: str


class Resolution(enum.Enum):
    """How a producer ended its transaction."""

    COMMIT = "commit"
    ROLLBACK = "rollback"
    UNKNOWN = "unknown"
    """Not decided yet: nothing happens, the broker checks back later."""


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """Commit or roll back the half message a transaction id names."""

    topic: str
    """The topic the caller was granted PUB on; the half message's must be the same."""
    transaction_id: str
    """As the backend's send answered it (its form is the backend's)."""
    message_id: str
    resolution: Resolution
    from_check: bool
    """The answer to a check-back."""


@dataclass(frozen=True, slots=True)
class QueueRef:
    """One queue of a topic."""

    topic: str
    broker_name: str
    """Its broker group; "" when the request names none (a replica's door: its own)."""
    queue_id: int


class PullOutcome(enum.Enum):
    """What a pull found."""

    FOUND = "found"
    NOT_FOUND = "not found"
    """Nothing new at the offset: pull it again later."""
    FILTERED = "filtered"
    """Nothing the filter wanted: go on from the next offset."""
    OFFSET_MOVED = "offset moved"
    """The offset is outside the queue: go on from the next offset."""


@dataclass(frozen=True, slots=True)
class PullQuery:
    """Read a queue from an offset."""

    group: str
    queue: QueueRef
    offset: int
    max_messages: int
    expression: str
    expression_type: str
    """``TAG`` or ``SQL92``."""
    poll_ms: int
    """How long to wait for a message when there is none."""


@dataclass(frozen=True, slots=True)
class Pulled:
    """A pull's answer: the messages as stored, and where the next pull starts."""

    outcome: PullOutcome
    records: Sequence[MessageExt]
    next_offset: int
    min_offset: int = 0
    max_offset: int = 0
    """The queue's bounds, for an offset outside it."""


class OffsetPolicy(enum.Enum):
    """Where QueryOffset looks: a queue's beginning, its end, or a time."""

    BEGINNING = "beginning"
    END = "end"
    TIMESTAMP = "timestamp"


class Backend(Protocol):
    """The operations behind the door (module docstring). ``deadline_s``: how long the call may
    take (a remote backend retries across a failover until then)."""

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> list[Refusal | None]:
        """Acknowledge each entry; one result per entry, in order (None: acknowledged)."""
        ...

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int, deadline_s: float
    ) -> str:
        """Hide the delivery again for ``invisible_ms`` from now; its new receipt handle."""
        ...

    async def forward_to_dead_letters(
        self, group: str, topic: str, receipt_handle: str, deadline_s: float
    ) -> None:
        """Store the delivered message in ``%DLQ%<group>`` and settle its delivery."""
        ...

    async def end_transaction(
        self, request: EndTransaction, caller: Caller, deadline_s: float
    ) -> None:
        """Commit or roll back a half message (``Refusal`` when it cannot be)."""
        ...

    async def recall(self, topic: str, recall_handle: str, deadline_s: float) -> str:
        """Cancel the pending timer message the handle names; its message id."""
        ...

    async def pull(self, query: PullQuery, deadline_s: float) -> Pulled:
        """Read a queue from an offset."""
        ...

    async def commit_offset(
        self, group: str, queue: QueueRef, offset: int, deadline_s: float
    ) -> None:
        """Store ``group``'s progress in the queue."""
        ...

    async def consumer_offset(self, group: str, queue: QueueRef, deadline_s: float) -> int | None:
        """Where ``group`` goes on in the queue; None when it has no offset there."""
        ...

    async def query_offset(
        self, queue: QueueRef, policy: OffsetPolicy, at_ms: int | None, deadline_s: float
    ) -> int:
        """The queue's first or next offset, or the first stored at or after ``at_ms``."""
        ...
