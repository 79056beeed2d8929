"""The ``Backend`` protocol: what a door asks of whoever stores the messages it serves.

A door translates its protocol into these calls and their answers back; the requests and
results are the contract's plain values (``messaging.sending``, ``messaging.consuming``,
``messaging.topics``, ``messaging.sessions``), never a protocol's messages. Two backends
implement it today, behind the one gRPC servicer (``proxy.door``): a replica's own services
(``proxy.local_backend``, RocketMQ's "local" proxy mode) and the brokers' masters over remoting
(``proxy.remote_backend``, the stand-alone proxy, "cluster" mode). The ACL, the name and
timestamp checks stay at the door, once; a backend is asked only what the door has admitted.

A backend refuses with the contract's errors (``messaging.errors``: a ``ServiceError`` subclass,
which every door maps to its status in one table) or with a ``Refused`` already in its door's
own terms. ``deadline_s``: how long the call may take (a remote backend retries across a
failover until then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.messaging.consuming import (
        AckEntry,
        Delivered,
        OffsetPolicy,
        PullQuery,
        QueueRef,
        Receive,
    )
    from ledgermq.messaging.errors import Refused
    from ledgermq.messaging.sending import Caller, EndTransaction, Sending, Sent
    from ledgermq.messaging.sessions import ClientSession
    from ledgermq.messaging.topics import Limits, TopicRoute

__all__ = ["Backend"]


class Backend(Protocol):
    """The operations behind a door (module docstring)."""

    async def route(self, topic: str) -> TopicRoute:
        """The topic's queues and the doors to name (refused when there is no route)."""
        ...

    def limits(self) -> Limits: ...

    async def consumes_orderly(self, group: str, topics: Sequence[str]) -> bool:
        """Whether consumer group ``group`` consumes in order (``consumeMessageOrderly``)."""
        ...

    async def send(self, sending: Sending, deadline_s: float) -> Sent:
        """Store the messages together (refused when they are not stored)."""
        ...

    async def receive(self, request: Receive, deadline_s: float) -> Delivered:
        """POP: messages handed out invisibly (none when nothing came in the polling time)."""
        ...

    async def client_alive(self, session: ClientSession) -> None:
        """Register or renew a client (refused when its groups or subscriptions are, as a
        remoting heartbeat's would be)."""
        ...

    async def client_gone(self, client_id: str, group: str) -> None:
        """The client ended its session."""
        ...

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> Sequence[Refused | None]:
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
        """Commit or roll back a half message (refused when it cannot be)."""
        ...

    async def recall(self, topic: str, recall_handle: str, deadline_s: float) -> str:
        """Cancel the pending timer message the handle names; its message id."""
        ...

    async def pull(self, query: PullQuery, deadline_s: float) -> Delivered:
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
