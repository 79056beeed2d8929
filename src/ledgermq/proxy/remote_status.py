"""A remoting failure met while forwarding, as a status of RocketMQ 5's gRPC protocol.

The stand-alone proxy's counterpart of ``proxy.status`` (which maps the broker service's
errors): what the master answered, or why it could not be reached, becomes the ``Status`` the
v5 client reads (the codes the Java proxy's ``ResponseBuilder`` gives the same remoting codes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError, MQResponseError, NetworkError, NoRouteError
from ledgermq.proxy.status import Code, status
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.proxy.protocol import definition_pb2

__all__ = ["remote_status"]

_R = MQResponseCode
_CODES: Final[dict[int, definition_pb2.Code.ValueType]] = {
    _R.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    _R.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    _R.SERVICE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    _R.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    _R.FLUSH_SLAVE_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    _R.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    _R.NO_PERMISSION: Code.FORBIDDEN,
    _R.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    _R.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    _R.SUBSCRIPTION_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    _R.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    # a name that breaks the naming rules (the proxy checks names itself first; the remark
    # names the rule)
    _R.INVALID_PARAMETER: Code.BAD_REQUEST,
    _R.NO_MESSAGE: Code.INVALID_RECEIPT_HANDLE,
    _R.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    _R.VERSION_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
}


def remote_status(exc: LedgerMQError) -> definition_pb2.Status:
    """The status answering a forwarded request that ended in ``exc``: the master's code's
    counterpart, HA_NOT_AVAILABLE when no master could be reached before the deadline (the
    client retries), INTERNAL_ERROR for anything else; the message is the error's sentence."""
    if isinstance(exc, MQResponseError):
        return status(_CODES.get(exc.code, Code.INTERNAL_ERROR), str(exc))
    if isinstance(exc, NetworkError | NoRouteError):
        return status(Code.HA_NOT_AVAILABLE, f"no master reachable now: {exc}")
    return status(Code.INTERNAL_ERROR, str(exc))
