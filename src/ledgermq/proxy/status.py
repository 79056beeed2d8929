"""The one place a service refusal becomes a status of RocketMQ 5's gRPC protocol.

The service raises ``broker.errors`` classes, which name no protocol; this door answers each
with a ``Status{code, message}`` inside the response (the gRPC status itself stays OK, as the
Java proxy does: protocol-remoting-and-grpc.md section 3.1). The official clients raise on every
code except OK, MULTIPLE_RESULTS and MESSAGE_NOT_FOUND, and retry a send on any failure.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import (
    BusyError,
    ForbiddenError,
    IllegalMessageError,
    InvalidArgumentError,
    InvalidFilterError,
    InvalidGroupError,
    InvalidHandleError,
    InvalidTopicError,
    MaybeStoredError,
    NoSuchGroupError,
    NoSuchTopicError,
    NotFoundError,
    NotMasterError,
    NotStoredError,
    ServiceError,
    UnavailableError,
    UnsupportedError,
)
from ledgermq.proxy.protocol import definition_pb2

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "Code",
    "common_status",
    "error_status",
    "internal_error",
    "not_implemented",
    "ok",
    "status",
]

Code = definition_pb2.Code

_CODES: Final[dict[type[ServiceError], definition_pb2.Code.ValueType]] = {
    # A slave or a replica between roles: the client retries, and its next route refresh
    # names the new master's endpoint.
    NotMasterError: Code.HA_NOT_AVAILABLE,
    UnavailableError: Code.HA_NOT_AVAILABLE,
    BusyError: Code.TOO_MANY_REQUESTS,
    MaybeStoredError: Code.MASTER_PERSISTENCE_TIMEOUT,
    NotStoredError: Code.INTERNAL_ERROR,
    ForbiddenError: Code.FORBIDDEN,
    UnsupportedError: Code.NOT_IMPLEMENTED,
    IllegalMessageError: Code.BAD_REQUEST,
    InvalidArgumentError: Code.BAD_REQUEST,
    InvalidTopicError: Code.ILLEGAL_TOPIC,
    InvalidGroupError: Code.ILLEGAL_CONSUMER_GROUP,
    InvalidFilterError: Code.ILLEGAL_FILTER_EXPRESSION,
    InvalidHandleError: Code.INVALID_RECEIPT_HANDLE,
    NoSuchTopicError: Code.TOPIC_NOT_FOUND,
    NoSuchGroupError: Code.CONSUMER_GROUP_NOT_FOUND,
    NotFoundError: Code.NOT_FOUND,
}


_log = logging.getLogger(__name__)


def status(code: definition_pb2.Code.ValueType, message: str) -> definition_pb2.Status:
    return definition_pb2.Status(code=code, message=message)


def ok() -> definition_pb2.Status:
    return definition_pb2.Status(code=Code.OK, message="OK")


def common_status(statuses: Sequence[definition_pb2.Status]) -> definition_pb2.Status:
    """The status of an answer with one entry per item (a send's messages, an ack's entries):
    the entries' common one, else MULTIPLE_RESULTS, as the Java proxy answers."""
    if len({s.code for s in statuses}) == 1:
        return statuses[0]
    return status(Code.MULTIPLE_RESULTS, "the entries have different results")


def internal_error(rpc: str, exc: BaseException) -> definition_pb2.Status:
    """An unexpected failure of ``rpc``, logged with its traceback, as the status a client
    reads (INTERNAL_ERROR, as the Java proxy answers; never a bare gRPC UNKNOWN). Call it
    from an ``except`` block."""
    _log.exception("gRPC %s failed", rpc)
    return status(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")


def not_implemented(what: str) -> definition_pb2.Status:
    return status(
        Code.NOT_IMPLEMENTED,
        f"{what} is not implemented by this broker yet (issue 16); "
        "normal messages can be sent, and read with a remoting consumer",
    )


def error_status(exc: ServiceError) -> definition_pb2.Status:
    """The status that answers ``exc``: its class's code (or its nearest base's), with the
    error's sentence as the message; INTERNAL_ERROR for the base itself."""
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return status(code, str(exc))
    return status(Code.INTERNAL_ERROR, str(exc))
