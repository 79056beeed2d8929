"""Who asks, for the permission checks a service can only make once it has read a record.

Some requests name a record by its commit-log offset (VIEW_MESSAGE_BY_ID, CONSUMER_SEND_MSG_BACK,
END_TRANSACTION): which topic they touch is known only once the record is read, and offsets are
predictable, so the front door's ACL check cannot be the only one (issue 25 items 3-5). The door
that admitted the request hands the service an ``Access`` for its requester; the service calls
``require`` after reading and before answering or changing anything. Without an ACL the door
hands ``OPEN_ACCESS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from ledgermq.broker.state.topics import DLQ_PREFIX, RETRY_PREFIX
from ledgermq.wire.message import MessageProperty

if TYPE_CHECKING:
    from ledgermq.security.acl import Needs
    from ledgermq.wire.message import MessageExt

__all__ = ["OPEN_ACCESS", "Access", "record_topic"]


class Access(Protocol):
    """The requester of one request, as its front door authenticated it."""

    def require(self, needs: Needs, rule: str) -> None:
        """Return if the requester has ``needs``; else raise ``ForbiddenError`` (NO_PERMISSION)
        whose message is ``rule``, the rule broken in words a client may read: it names no
        resource, since the requester may not know what the record it named belongs to (the
        full reason is logged and audited)."""


class _Open:
    def require(self, needs: Needs, rule: str) -> None:
        return None


OPEN_ACCESS: Final[Access] = _Open()
"""Everyone may do everything: a door without an ACL, or the broker itself."""


def record_topic(message: MessageExt) -> str:
    """The topic a stored record is a message of, for the ACL: for a retry or dead-letter record
    the topic it was first consumed from (``RETRY_TOPIC``), for one parked in a system topic
    (delay, timer, transaction half) its ``REAL_TOPIC``, else the topic it is stored under."""
    properties = message.properties
    topic = message.topic
    if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return properties.get(MessageProperty.RETRY_TOPIC) or topic
    return properties.get(MessageProperty.REAL_TOPIC) or topic
