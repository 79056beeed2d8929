"""The broker's refusals: the messaging contract's typed errors (``ledgermq.messaging.errors``).

They moved to the contract so that every door, and every backend behind the gRPC door, refuses
in the same classes; this module keeps the broker's rooms importing them by their old home. The
service, the state and the storage raise these and know no protocol: a front door maps each
class to its protocol's status in one place (``broker.remoting.errors`` for RocketMQ's remoting
response codes, ``proxy.status`` for the gRPC door's). The message is a full sentence a client
can show as the remark. ``retriable`` says whether the same request may succeed later or at
another replica; ``refresh_route`` whether the caller should look the route up again first.
"""

from __future__ import annotations

from ledgermq.messaging.errors import (
    BusyError,
    ForbiddenError,
    IllegalMessageError,
    InvalidArgumentError,
    InvalidFilterError,
    InvalidGroupError,
    InvalidHandleError,
    InvalidMembershipChangeError,
    InvalidQueueError,
    InvalidTopicError,
    MaybeStoredError,
    NoSuchGroupError,
    NoSuchTopicError,
    NotFoundError,
    NotMasterError,
    NotRecallableError,
    NotStoredError,
    OverLimitError,
    ServiceError,
    TransferRefusedError,
    UnavailableError,
    UnsupportedError,
)

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
    "NoSuchGroupError",
    "NoSuchTopicError",
    "NotFoundError",
    "NotMasterError",
    "NotRecallableError",
    "NotStoredError",
    "OverLimitError",
    "ServiceError",
    "TransferRefusedError",
    "UnavailableError",
    "UnsupportedError",
]
