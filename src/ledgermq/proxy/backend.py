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

Every RPC is served through it: routes and settings, sends (a request's messages committed
together: one batch append per destination queue), POP receives, acknowledgements,
invisible-time changes, dead letters, transaction ends, recalls, pulls and offsets, and the
v5 clients' sessions (``ClientSession``: Heartbeat and Telemetry settings register a client in
the broker's client registry, where the remoting heartbeats register theirs).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ledgermq.wire.message import encode_batch, encode_properties

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ledgermq.proxy.message_types import TopicMessageType
    from ledgermq.proxy.refusal import Refusal
    from ledgermq.proxy.telemetry import TelemetryStreams
    from ledgermq.wire.message import MessageExt
    from ledgermq.wire.route import QueueData

__all__ = [
    "AckEntry",
    "Backend",
    "Caller",
    "ClientKind",
    "ClientSession",
    "Door",
    "EndTransaction",
    "Limits",
    "OffsetPolicy",
    "Outgoing",
    "PullOutcome",
    "PullQuery",
    "Pulled",
    "QueueRef",
    "Receive",
    "Received",
    "ReceivedMessage",
    "Resolution",
    "Sending",
    "Sent",
    "TopicRoute",
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


@dataclass(frozen=True, slots=True)
class Door:
    """A gRPC endpoint a route names for a broker group."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """A topic's queues as a door answers them."""

    queue_datas: Sequence[QueueData]
    """Per broker group, in the order to answer."""
    doors: Mapping[str, Sequence[Door]]
    """broker group -> the doors that serve it (a group with none is left out)."""
    message_type: TopicMessageType | None
    """The topic's message type (None: every type is taken, no check)."""
    no_queue: str
    """Why there is no queue to answer, when none is left (the status's message)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What a client's settings are answered with and checked against."""

    max_body_size: int
    """``maxMessageSize``."""
    validate_message_type: bool
    """``enableTopicMessageTypeCheck``, as told to producers."""
    max_subscriptions: int
    """The most subscriptions one client's settings may hold."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to store, protocol-neutral: its properties as a mapping (RocketMQ's names,
    as ``proxy.messages`` maps a v5 message)."""

    body: bytes
    properties: Mapping[str, str]
    compressed: bool
    """The body is compressed (the v5 ``GZIP`` encoding)."""
    born_ms: int
    """0: the store time."""
    reconsume_times: int
    queue_id: int
    """The queue the client named (the backend places the message: ``proxy.placement``)."""


@dataclass(frozen=True, slots=True)
class Sending:
    """Messages of one topic committed together: one append into one queue (a batch when
    more than one)."""

    topic: str
    messages: Sequence[Outgoing]
    born_host: str
    """The client's ``host:port``."""
    message_group: str | None
    """Their FIFO message group (one queue for it)."""

    def body(self) -> bytes:
        """One message's body, or several messages in RocketMQ's batch encoding (each with
        its own properties), for one append."""
        if len(self.messages) == 1:
            return self.messages[0].body
        return encode_batch([(m.body, 0, encode_properties(m.properties)) for m in self.messages])

    def properties_text(self) -> str:
        """One message's properties in RocketMQ's string ("" for a batch: each carries its
        own)."""
        return encode_properties(self.messages[0].properties) if len(self.messages) == 1 else ""


@dataclass(frozen=True, slots=True)
class Sent:
    """A stored ``Sending``."""

    queue_offset: int
    """Of the first message; the others follow it."""
    transaction_id: str
    """A transactional message's id for EndTransaction (the backend's form), else ""."""
    recall_handle: str
    """A timer message's handle for RecallMessage, else ""."""


@dataclass(frozen=True, slots=True)
class Receive:
    """A POP receive."""

    group: str
    topic: str
    broker_name: str
    """The assignment's broker group ("": any, or the replica's own)."""
    max_messages: int
    invisible_ms: int
    expression: str
    expression_type: str
    """``TAG`` or ``SQL92``."""
    poll_ms: int


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One delivery of a receive."""

    record: MessageExt
    """The message as stored (without the broker's ``POP_CK`` property)."""
    receipt_handle: str
    attempt: int
    """1 for the first delivery."""
    invisible_ms: int


@dataclass(frozen=True, slots=True)
class Received:
    """A receive's deliveries and when they were handed out."""

    messages: Sequence[ReceivedMessage]
    pop_time_ms: int


class ClientKind(enum.Enum):
    """What a v5 client is, as its settings say."""

    PRODUCER = "producer"
    CONSUMER = "consumer"
    """A push or simple consumer (POP)."""
    PULL_CONSUMER = "pull consumer"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class ClientSession:
    """A live v5 client, as a Heartbeat or Telemetry settings announce it: registered where the
    broker keeps its remoting clients, so every view (``consumer-connection``, the console's
    group page, the metrics) sees it."""

    client_id: str
    """The ``x-mq-client-id`` metadata."""
    address: str
    """``host:port`` of the client."""
    kind: ClientKind
    group: str
    """The consumer group ("" for a producer)."""
    subscriptions: Mapping[str, tuple[str, str]]
    """A consumer's: topic -> (expression, ``TAG`` / ``SQL92``)."""
    publishes: tuple[str, ...]
    """A producer's topics."""
    language: str
    """The ``x-mq-language`` metadata (``PYTHON``, ``JAVA``, ...)."""
    version: str
    """The ``x-mq-client-version`` metadata."""


class Backend(Protocol):
    """The operations behind the door (module docstring). ``deadline_s``: how long the call may
    take (a remote backend retries across a failover until then)."""

    @property
    def streams(self) -> TelemetryStreams:
        """The open Telemetry streams of v5 producers: where check-backs go."""
        ...

    async def route(self, topic: str) -> TopicRoute:
        """The topic's queues and the doors to name (``Refusal`` when there is no route)."""
        ...

    def limits(self) -> Limits: ...

    async def consumes_orderly(self, group: str, topics: Sequence[str]) -> bool:
        """Whether consumer group ``group`` consumes in order (``consumeMessageOrderly``)."""
        ...

    async def send(self, sending: Sending, deadline_s: float) -> Sent:
        """Store the messages together (``Refusal`` when they are not stored)."""
        ...

    async def receive(self, request: Receive, deadline_s: float) -> Received:
        """POP: messages handed out invisibly (none when nothing came in the polling time)."""
        ...

    async def client_alive(self, session: ClientSession) -> None:
        """Register or renew a v5 client (``Refusal`` when its groups or subscriptions are
        refused, as a remoting heartbeat's would be)."""
        ...

    async def client_gone(self, client_id: str, group: str) -> None:
        """The client ended its session (NotifyClientTermination)."""
        ...

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
