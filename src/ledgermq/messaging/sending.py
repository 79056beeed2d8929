"""Sending: the messages a producer stores, the answer, and the end of a transaction.

A message's properties are a mapping (RocketMQ's names), not RocketMQ's encoded string: the
contract knows no protocol. ``Outgoing.encoded`` is the one allowance (issue 26's hot path):
a door that already holds the properties as RocketMQ's text (the remoting door, which receives
them so) may hand that text over instead of a mapping, and the mapping is decoded only when
someone asks for it; a message stored as received is never decoded and re-encoded.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledgermq.wire.message import SysFlag, decode_properties, encode_batch, encode_properties

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "Caller",
    "EndTransaction",
    "Outgoing",
    "Resolution",
    "SendRequest",
    "Sending",
    "Sent",
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
    """The request's name, as the ACL's audit names it."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to store, protocol-neutral: its properties as a mapping (RocketMQ's names,
    as ``proxy.messages`` maps a v5 message), or as the RocketMQ text a door received them in
    (``encoded``, module docstring)."""

    body: bytes
    properties: Mapping[str, str]
    """The properties; when ``encoded`` is set this is empty and ``property_map()`` decodes
    the text on demand."""
    compressed: bool
    """The body is compressed (the v5 ``GZIP`` encoding)."""
    born_ms: int
    """0: the store time."""
    reconsume_times: int
    queue_id: int
    """The queue the client named (the backend places the message: ``proxy.placement``)."""
    encoded: str | None = None
    """The properties in RocketMQ's text as received (None: ``properties`` holds them)."""

    def property_map(self) -> Mapping[str, str]:
        """The properties as a mapping, decoded from ``encoded`` when that holds them."""
        if self.encoded is None:
            return self.properties
        return decode_properties(self.encoded)

    def property_text(self) -> str:
        """The properties in RocketMQ's text, as received when they came so (no re-encoding)."""
        if self.encoded is not None:
            return self.encoded
        return encode_properties(self.properties)


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
        return encode_batch([(m.body, 0, m.property_text()) for m in self.messages])

    def properties_text(self) -> str:
        """One message's properties in RocketMQ's string ("" for a batch: each carries its
        own)."""
        return self.messages[0].property_text() if len(self.messages) == 1 else ""


@dataclass(slots=True)
class SendRequest:
    """What a door asks the broker's send service to store: one append of one topic, with the
    fields a remoting send carries beyond a ``Sending`` (the producer group, the template topic
    for creating the topic, the born time, flag and sys flag, the reconsume count).

    Not frozen: built once per send on the remoting door's hot path, and a frozen dataclass's
    ``__init__`` costs four times a plain one's. The messages come one of two ways:

    - in ``messages`` (``of``: a ``Sending``'s ``Outgoing`` messages, their properties a
      mapping or the text they came in), stored as they are, never encoded as a batch to be
      decoded again;
    - beside the request, as the remoting door received them (its frame body: one message's
      body, or RocketMQ's batch encoding when ``batch``), a single message's properties in
      ``encoded``, RocketMQ's text as received: ``Outgoing``'s allowance, so that the hot path
      never decodes and re-encodes them (``property_map`` decodes on demand)."""

    producer_group: str
    topic: str
    default_topic: str | None
    """The template topic for creating ``topic`` on first send (``TBW102``), None for none."""
    default_topic_queue_nums: int
    queue_id: int
    """-1: the broker picks a write queue."""
    sys_flag: int
    """RocketMQ's message sys flag (compressed body, transaction prepared, ...)."""
    born_timestamp: int
    """ms; 0: the store time."""
    flag: int
    encoded: str | None
    """A single message's properties in RocketMQ's text as received, with its body beside the
    request (None: ``messages`` holds the messages; unused for a batch beside the request,
    whose messages carry their own)."""
    reconsume_times: int
    max_reconsume_times: int | None
    """None: the group's ``retryMaxTimes``."""
    batch: bool
    """More than one message: the body beside holds them in RocketMQ's batch encoding, or
    ``messages`` holds them."""
    messages: Sequence[Outgoing] | None = None
    """The messages themselves (``of``), when no body travels beside the request."""

    @classmethod
    def of(cls, sending: Sending, producer_group: str, default_queue_nums: int) -> SendRequest:
        """The request that stores ``sending``'s messages (their bodies and properties as they
        are: ``messages``, never the text beside, ``encoded``) in the queue its first message
        names, creating no topic."""
        first = sending.messages[0]
        return cls(
            producer_group, sending.topic, None, default_queue_nums, first.queue_id,
            SysFlag.COMPRESSED if first.compressed else 0, first.born_ms, 0, None,
            first.reconsume_times, None, len(sending.messages) > 1, sending.messages,
        )  # fmt: skip

    def property_text(self) -> str:
        """A single message's properties in RocketMQ's text, as received when they came so
        ("" for a batch)."""
        encoded = self.encoded
        if encoded is not None:
            return encoded
        messages = self.messages
        return messages[0].property_text() if messages and len(messages) == 1 else ""

    def property_map(self) -> Mapping[str, str]:
        """A single message's properties as a mapping, decoded from the text when they came so
        (empty for a batch)."""
        encoded = self.encoded
        if encoded is not None:
            return decode_properties(encoded)
        messages = self.messages
        return messages[0].property_map() if messages and len(messages) == 1 else {}


@dataclass(frozen=True, slots=True)
class Sent:
    """A stored ``Sending``."""

    queue_offset: int
    """Of the first message; the others follow it."""
    transaction_id: str
    """A transactional message's id for EndTransaction (the backend's form), else ""."""
    recall_handle: str
    """A timer message's handle for RecallMessage, else ""."""


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
