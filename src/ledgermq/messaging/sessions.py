"""Client sessions: what a client announces to the broker, whatever its door.

A remoting client announces itself with HEART_BEAT (``Heartbeat``, parsed by the remoting
door); a v5 client with its Heartbeat and Telemetry settings (``ClientSession``, read by the
gRPC door), which ``ClientSession.heartbeat`` says in the same terms. Both go into the
broker's one client registry (``broker.state.clients``), so every view (``consumer-connection``,
the console's group page, the metrics, the check-backs) sees every client.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ClientKind", "ClientSession", "ConsumerData", "Heartbeat"]


@dataclass(frozen=True, slots=True)
class ConsumerData:
    """A consumer group a client is a member of, and how it consumes (RocketMQ's
    ``ConsumerData``; enum values in RocketMQ's names)."""

    group: str
    consume_type: str
    """``CONSUME_ACTIVELY`` (pull), ``CONSUME_PASSIVELY`` (push) or ``CONSUME_POP``."""
    message_model: str
    """``CLUSTERING`` or ``BROADCASTING``."""
    consume_from_where: str
    subscriptions: dict[str, str]
    """topic -> subscription expression."""
    expression_types: dict[str, str] = field(default_factory=dict)
    """topic -> ``expressionType`` of its subscription (``TAG`` or ``SQL92``)."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A client's announcement: its id, its producer groups and its consumer groups."""

    client_id: str
    producer_groups: tuple[str, ...]
    consumers: tuple[ConsumerData, ...]


class ClientKind(enum.Enum):
    """What a v5 client is, as its settings say."""

    PRODUCER = "producer"
    CONSUMER = "consumer"
    """A push or simple consumer (POP)."""
    PULL_CONSUMER = "pull consumer"
    OTHER = "other"


_CONSUME_TYPES: Final = {
    ClientKind.CONSUMER: "CONSUME_POP",
    ClientKind.PULL_CONSUMER: "CONSUME_ACTIVELY",
}
"""How a v5 consumer consumes, in the registry's (RocketMQ's ``ConsumeType``) words."""


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

    def heartbeat(self, producer_group: str) -> Heartbeat:
        """The session in a heartbeat's terms: a consumer's group with its subscriptions, or a
        producer in ``producer_group`` (v5 producers have no group of their own)."""
        consumers: tuple[ConsumerData, ...] = ()
        consume_type = _CONSUME_TYPES.get(self.kind)
        if consume_type is not None and self.group:
            subscriptions = self.subscriptions
            consumers = (
                ConsumerData(
                    group=self.group,
                    consume_type=consume_type,
                    message_model="CLUSTERING",
                    consume_from_where="CONSUME_FROM_LAST_OFFSET",
                    subscriptions={t: e for t, (e, _) in subscriptions.items()},
                    expression_types={t: kind for t, (_, kind) in subscriptions.items()},
                ),
            )
        producers = (producer_group,) if self.kind is ClientKind.PRODUCER else ()
        return Heartbeat(self.client_id, producers, consumers)
