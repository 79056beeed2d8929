"""The one place a service refusal becomes a RocketMQ remoting response code.

The service, state and storage raise ``broker.errors`` classes, which say what the caller should
do and name no protocol; the remoting door answers each with the code RocketMQ's broker answers
the same refusal with (protocol-remoting-and-grpc.md section 2), and with the error's message as
the remark.
"""

from __future__ import annotations

from typing import Final

from ledgermq.broker.errors import (
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
from ledgermq.wire import MQResponseCode

__all__ = ["response_code"]

_CODES: Final[dict[type[ServiceError], MQResponseCode]] = {
    NotMasterError: MQResponseCode.SERVICE_NOT_AVAILABLE,
    UnavailableError: MQResponseCode.SERVICE_NOT_AVAILABLE,
    BusyError: MQResponseCode.SYSTEM_BUSY,
    MaybeStoredError: MQResponseCode.SYSTEM_ERROR,
    NotStoredError: MQResponseCode.SYSTEM_ERROR,
    ForbiddenError: MQResponseCode.NO_PERMISSION,
    UnsupportedError: MQResponseCode.SYSTEM_ERROR,
    IllegalMessageError: MQResponseCode.MESSAGE_ILLEGAL,
    InvalidArgumentError: MQResponseCode.SYSTEM_ERROR,
    # a name that breaks the naming rules: RocketMQ's INVALID_PARAMETER, which no client retries
    # (its TopicValidator answers SYSTEM_ERROR, which clients retry on another broker in vain)
    InvalidTopicError: MQResponseCode.INVALID_PARAMETER,
    InvalidGroupError: MQResponseCode.INVALID_PARAMETER,
    OverLimitError: MQResponseCode.INVALID_PARAMETER,
    InvalidQueueError: MQResponseCode.INVALID_PARAMETER,
    InvalidMembershipChangeError: MQResponseCode.INVALID_PARAMETER,
    InvalidFilterError: MQResponseCode.SUBSCRIPTION_PARSE_FAILED,
    # RocketMQ 5's AckMessageProcessor answers an ack it cannot place so
    InvalidHandleError: MQResponseCode.NO_MESSAGE,
    NoSuchTopicError: MQResponseCode.TOPIC_NOT_EXIST,
    NoSuchGroupError: MQResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    NotFoundError: MQResponseCode.SYSTEM_ERROR,
    # ours: no pending timer message to recall (RocketMQ's remark-only refusal, with a code
    # a forwarding gRPC door can tell apart)
    NotRecallableError: MQResponseCode.NO_MESSAGE,
}


def response_code(exc: ServiceError) -> MQResponseCode:
    """The response code that answers ``exc``.

    A refused leadership transfer is SERVICE_NOT_AVAILABLE when retriable (the leader moved or
    is moving: ask again), else SYSTEM_ERROR. A class without a code of its own takes its
    nearest base's; SYSTEM_ERROR for the base itself."""
    if isinstance(exc, TransferRefusedError):
        return (
            MQResponseCode.SERVICE_NOT_AVAILABLE if exc.retriable else MQResponseCode.SYSTEM_ERROR
        )
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return MQResponseCode.SYSTEM_ERROR
