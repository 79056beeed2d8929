"""Topic information a door answers: a topic's route, its message type, the limits of a client.

Protocol-neutral values: the gRPC door renders them as v5 ``QueryRoute`` / settings answers
(``proxy.route_answers``); whoever finds a route (a replica's metadata and the NameServers, or
the stand-alone proxy's client of the cluster) fills them in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ledgermq.wire.route import QueueData

__all__ = ["Door", "Limits", "TopicMessageType", "TopicRoute"]


class TopicMessageType(enum.Enum):
    """``org.apache.rocketmq.common.attribute.TopicMessageType``; values as stored (the rules
    that read and check it are ``proxy.message_types``')."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class Door:
    """An endpoint a route names for a broker group (a gRPC door: host and port)."""

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
