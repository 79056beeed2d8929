"""The messaging contract: what every door of LedgerMQ asks, in one protocol-neutral vocabulary.

Typed requests, results and errors for send, pull, POP (receive, ack, change-invisible, dead
letters), offsets, end-transaction, recall, topic information and client sessions, and the
``Backend`` protocol a door speaks (issue 26 item 1). Nothing here knows a protocol: no
remoting frame or header, no protobuf, no connection; properties are a mapping (with one
documented allowance for text a door already holds, ``messaging.sending``), and pull and POP
answer in one shape (``messaging.consuming.Delivered``). The message records themselves are the
storage format (``wire.message``), which every room shares.

- ``errors``: the refusals, by what the caller should do; each door maps them to its codes.
- ``sending``: ``Sending`` / ``Outgoing`` / ``Sent``, ``SendRequest`` (what a door asks the
  broker's send service), ``EndTransaction``, ``Caller``.
- ``consuming``: ``PullQuery``, ``Receive``, ``Delivered`` / ``Delivery``, ``AckEntry``,
  ``QueueRef``, ``OffsetPolicy``.
- ``topics``: ``TopicRoute``, ``Door``, ``Limits``, ``TopicMessageType``.
- ``sessions``: ``Heartbeat`` / ``ConsumerData`` (what any client announces), ``ClientSession``.
- ``backend``: the ``Backend`` protocol.
"""

from __future__ import annotations

from ledgermq.messaging.backend import Backend
from ledgermq.messaging.consuming import (
    AckEntry,
    Delivered,
    Delivery,
    OffsetPolicy,
    PullOutcome,
    PullQuery,
    QueueRef,
    Receive,
)
from ledgermq.messaging.errors import MessagingError, Refused, ServiceError
from ledgermq.messaging.sending import (
    Caller,
    EndTransaction,
    Outgoing,
    Resolution,
    Sending,
    SendRequest,
    Sent,
)
from ledgermq.messaging.sessions import ClientKind, ClientSession, ConsumerData, Heartbeat
from ledgermq.messaging.topics import Door, Limits, TopicMessageType, TopicRoute

__all__ = [
    "AckEntry",
    "Backend",
    "Caller",
    "ClientKind",
    "ClientSession",
    "ConsumerData",
    "Delivered",
    "Delivery",
    "Door",
    "EndTransaction",
    "Heartbeat",
    "Limits",
    "MessagingError",
    "OffsetPolicy",
    "Outgoing",
    "PullOutcome",
    "PullQuery",
    "QueueRef",
    "Receive",
    "Refused",
    "Resolution",
    "SendRequest",
    "Sending",
    "Sent",
    "ServiceError",
    "TopicMessageType",
    "TopicRoute",
]
