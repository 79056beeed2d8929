"""The typed refusals of the messaging contract, by what the caller should do (STYLE.md 7.9).

The broker's rooms below the doors (its service, state and storage) raise these and know no
protocol; every door maps each class to its protocol's status in one table
(``broker.remoting.errors`` for RocketMQ's remoting response codes, ``proxy.status`` for the v5
gRPC codes), so a refusal means the same at either door by construction. The message is a full
sentence a client can show as the remark. ``retriable`` says whether the same request may
succeed later or at another replica; ``refresh_route`` whether the caller should look the route
up again first.

``Refused`` is the other kind a backend may raise: a refusal already in its door's own terms
(the stand-alone proxy's remote backend holds a master's remoting answer, which it maps to a
gRPC status itself, ``proxy.remote_status``); a door answers it as it is.
"""

from __future__ import annotations

from typing import ClassVar

from ledgermq.errors import LedgerMQError

__all__ = [
    "BusyError",
    "ForbiddenError",
    "IllegalMessageError",
    "InvalidArgumentError",
    "InvalidFilterError",
    "InvalidGroupError",
    "InvalidHandleError",
    "InvalidMembershipChangeError",
    "InvalidQueueError",
    "InvalidTopicError",
    "MaybeStoredError",
    "MessagingError",
    "NoSuchGroupError",
    "NoSuchTopicError",
    "NotFoundError",
    "NotMasterError",
    "NotRecallableError",
    "NotStoredError",
    "OverLimitError",
    "Refused",
    "ServiceError",
    "TransferRefusedError",
    "UnavailableError",
    "UnsupportedError",
]


class Refused(Exception):  # noqa: N818 - an answer to give, not an error of ours
    """A backend's refusal in its door's own terms (module docstring): each door subclasses it
    with its answer (the gRPC door's ``proxy.refusal.Refusal`` carries a status)."""


class ServiceError(LedgerMQError):
    """The broker refused an operation; the subclass says why and what to do. The base of the
    contract's errors (``MessagingError`` names it too)."""

    retriable: ClassVar[bool] = False
    refresh_route: ClassVar[bool] = False


MessagingError = ServiceError
"""The contract's name for the base of its refusals (the broker's code says ``ServiceError``)."""


class NotMasterError(ServiceError):
    """This replica is a slave (or has no role yet): send the write to the master, whose address
    a fresh route lookup gives."""

    retriable = True
    refresh_route = True


class UnavailableError(ServiceError):
    """This replica cannot take the change now (it is no longer the leader, a transfer is under
    way, it is shutting down); nothing was stored. Look the route up again and retry."""

    retriable = True
    refresh_route = True


class BusyError(ServiceError):
    """The master is overloaded (too many appends waiting for a quorum); nothing was stored.
    Back off and retry."""

    retriable = True


class MaybeStoredError(ServiceError):
    """The write was handed to the ledger but not acknowledged by a quorum in time (or the broker
    stopped first): it may still be stored, so a retry can duplicate it."""


class NotStoredError(ServiceError):
    """The ledger refused the write (too large for it, its disk is full) or it did not take
    effect; nothing was stored. The same request fails again until an operator acts."""


class ForbiddenError(ServiceError):
    """The broker's or the topic's permission, or the group's, forbids the operation."""


class UnsupportedError(ServiceError):
    """The broker does not offer this."""


class IllegalMessageError(ServiceError):
    """A message breaks the rules (topic name, size, properties); fix the message."""


class InvalidArgumentError(ServiceError):
    """An argument is out of range (a queue id, an offset, a topic name); fix the request."""


class InvalidTopicError(InvalidArgumentError):
    """A topic name breaks the naming rules (``ledgermq.wire.names``): the message names the
    rule. Refused before anything is stored; the same name is refused everywhere."""


class InvalidGroupError(InvalidArgumentError):
    """A group name breaks the naming rules (``ledgermq.wire.names``; among them, its
    ``%RETRY%`` / ``%DLQ%`` topic must be a valid topic): the message names the rule."""


class InvalidMembershipChangeError(InvalidArgumentError):
    """A replica-add / replica-remove breaks a membership rule (a replica added twice, one that
    is not a member removed, the last voter removed, a malformed id or address): fix it."""


class InvalidQueueError(InvalidArgumentError):
    """A queue id the topic does not have (0 <= id < its queue count): fix the request."""


class OverLimitError(InvalidArgumentError):
    """A request asks for more than a bound the broker keeps (groups or subscriptions in one
    heartbeat): the message names the bound and its broker.conf key. Fix the request."""


class InvalidFilterError(ServiceError):
    """The subscription's filter expression does not parse or cannot be used."""


class NoSuchTopicError(ServiceError):
    """The topic does not exist on this broker (and may not be created automatically)."""

    refresh_route = True


class NoSuchGroupError(ServiceError):
    """The subscription group does not exist and may not be created automatically."""


class NotFoundError(ServiceError):
    """What the request names is not there: no message at the offset, an empty queue, a group
    with no consumer online."""


class NotRecallableError(NotFoundError):
    """RecallMessage found no pending timer message to cancel: it was delivered (or is being
    delivered), or it was recalled already; the remark says which."""


class TransferRefusedError(ServiceError):
    """A leadership transfer did not happen; ``retriable`` when the leader moved or is moving
    (ask again), not when the target cannot take over."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable  # type: ignore[misc]  # per instance: what the ledger said


class InvalidHandleError(ServiceError):
    """A POP receipt handle that names no current delivery: malformed, of another queue, or
    stale (its message was handed out again or re-armed since; ack with the newest handle)."""
