"""The whole exception tree of LedgerMQ, in one place.

Each class says what the caller should do about it. Policy flags are class attributes so that retry
loops read flags instead of matching messages (STYLE.md section 7.9):

- ``retriable``: the same request may succeed later or elsewhere;
- ``refresh_route``: the caller should look up who serves the request before retrying.

Messages are full sentences that carry the values involved.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "BenchmarkError",
    "ConfigError",
    "CorruptLogError",
    "DiskFullError",
    "EntryTooLargeError",
    "FrameRefusedError",
    "Http2PrefaceError",
    "InconsistentLogError",
    "IndexCompactedError",
    "IndexOutOfRangeError",
    "LeaderPendingFullError",
    "LeaderTransferringError",
    "LedgerDiskFullError",
    "LedgerMQError",
    "LedgerRequestError",
    "MembershipChangeBusyError",
    "MembershipChangeError",
    "NotLeaderError",
    "OutcomeUnknownError",
    "ProtocolError",
    "RaftError",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
]


class LedgerMQError(Exception):
    """Base of every error LedgerMQ raises on purpose."""

    retriable: ClassVar[bool] = False
    refresh_route: ClassVar[bool] = False


class ConfigError(LedgerMQError):
    """A setting is missing, unknown or out of range: fix the configuration and start again."""


class StoreError(LedgerMQError):
    """The log store refused an operation; the store is left consistent."""


class CorruptLogError(StoreError):
    """The log on disk is damaged in a way that must not be repaired automatically.

    Raised when opening a store finds a CRC mismatch or an inconsistent header *before* the tail,
    and when a read finds an entry whose checksum does not match. The store never returns the
    damaged bytes. An operator has to decide: restore the replica from its peers (delete the
    store directory and let replication refill it) or inspect the file named here.
    """

    def __init__(self, path: str, pos: int, reason: str) -> None:
        super().__init__(f"corrupt log in {path} at byte {pos}: {reason}")
        self.path = path
        self.pos = pos
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptLogError], tuple[str, int, str]]:
        return (type(self), (self.path, self.pos, self.reason))


class DiskFullError(StoreError):
    """The disk holding the store is (nearly) full; appends fail until space is freed.

    Nothing was written. Retention or an operator must free space; the caller may retry later.
    """

    retriable = True


class EntryTooLargeError(StoreError):
    """An entry body exceeds the configured maximum; the request itself is wrong."""


class IndexOutOfRangeError(StoreError, LookupError):
    """The index is past the end of the log (or negative): nothing is stored there yet."""


class IndexCompactedError(StoreError, LookupError):
    """The index is before the log's begin index: retention has deleted it."""


class InconsistentLogError(StoreError):
    """An append or truncate does not fit the log as stored (wrong index, position or chain).

    For replication this means the follower's log diverges from the leader's; the caller has to
    find the common prefix and truncate before appending.
    """


class StoreClosedError(StoreError):
    """The store was closed; open it again to use it."""


class StoreLockedError(StoreError):
    """Another process (or another open store object) holds this store directory."""


class RaftError(LedgerMQError):
    """The replicated log refused a request; ``code`` is DLedger's response code."""

    code: ClassVar[int] = 500


class NotLeaderError(RaftError):
    """This replica is not the leader: send the request to ``leader_hint`` (None if unknown)."""

    code = 404
    retriable = True
    refresh_route = True

    def __init__(self, message: str, leader_hint: str | None = None) -> None:
        super().__init__(message)
        self.leader_hint = leader_hint


class LeaderTransferringError(RaftError):
    """Leadership is moving to another replica; retry shortly (DLedger LEADER_TRANSFERRING)."""

    code = 506
    retriable = True
    refresh_route = True


class LeaderPendingFullError(RaftError):
    """Too many appends wait for a quorum (DLedger LEADER_PENDING_FULL); back off and retry."""

    code = 503
    retriable = True


class LedgerRequestError(RaftError):
    """A replica refused a request for a reason retrying will not fix (bad index, bad request).

    ``code`` is the DLedger response code the replica answered.
    """

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]  # per instance: whatever the replica answered


class LedgerDiskFullError(LedgerRequestError):
    """The leader's disk is full: nothing was stored, and that leader is handing its
    leadership to a replica with room, so a client retries (elsewhere) until its budget is
    spent. Only when every replica's disk is full does the caller see it."""

    retriable = True


class OutcomeUnknownError(RaftError):
    """The request may or may not have taken effect (timeout, term change before the quorum).

    Retrying an append after this can store the entry twice (at-least-once), as with any
    replicated log whose client cannot see the outcome.
    """

    retriable = True
    refresh_route = True

    def __init__(self, message: str, code: int = 300) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]


class MembershipChangeError(RaftError):
    """A membership change breaks a rule (adding a member twice, removing a non-member or the
    last voter, promoting a voter): the request is wrong, retrying will not help."""

    code = 411  # DLedger UNEXPECTED_ARGUMENT


class MembershipChangeBusyError(RaftError):
    """A membership change must wait: another change is not committed yet, or the leader has
    not committed an entry of its own term. Retry shortly (the message says which)."""

    code = 504  # DLedger ILLEGAL_MEMBER_STATE
    retriable = True


class ProtocolError(LedgerMQError):
    """A peer sent bytes that are not a valid frame: close that connection, nothing was applied.

    Raised only by the frame decoder (and request parsers built on it); the message says what
    was wrong and where, never echoing more than a few bytes of the input.
    """


class FrameRefusedError(ProtocolError):
    """One frame broke a rule of the frame decoder (its length, its header's size or field
    count, a header that does not parse): answer it with this message, then close.

    ``opaque`` is the refused request's when it could be read (else 0) and ``serialize_type``
    its header type, so that the answer reaches the caller waiting for it; the stream has lost
    its framing all the same, and nothing after the frame is read.
    """

    def __init__(self, message: str, *, opaque: int = 0, serialize_type: int = 0) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.serialize_type = serialize_type


class Http2PrefaceError(ProtocolError):
    """The peer opened with an HTTP/2 client preface: a gRPC client (a RocketMQ 5 SDK) dialled a
    remoting port. Close the connection as for any protocol error, but log where gRPC is served
    (``ledgermq.wire.http2``): that client's operator has only the address to change.
    """


__all__ += [
    "ConnectError",
    "ConnectionClosedError",
    "NetworkError",
    "RequestTimeoutError",
]


class NetworkError(LedgerMQError):
    """Talking to a peer failed; ``address`` ("host:port") names the peer when it is known.

    Every network failure is retriable: the request may succeed later, on a new connection or
    against another replica. The subclasses say how far the request got, which decides whether a
    non-idempotent request may be repeated blindly. Only ``ledgermq.net.map_os_error`` turns
    operating-system errors into these.
    """

    retriable = True

    def __init__(self, message: str, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address

    def __reduce__(self) -> tuple[type[NetworkError], tuple[str, str | None]]:
        return (type(self), (str(self), self.address))


class ConnectError(NetworkError):
    """No connection could be made (refused, unreachable, unknown host, timed out).

    Nothing was sent: the request may be repeated, here later or at another replica.
    """


class PeerAuthenticationError(ConnectError):
    """A connection was made but the two ends did not prove they share the group's secret.

    Nothing was sent but the handshake. Retriable like any failed connect (a replica restarting
    with a new secret), but it persists while the secrets differ: the message says which end.
    """


class ConnectionClosedError(NetworkError):
    """The connection closed (by us, by the peer, or after a protocol error) before an answer came.

    A request in flight may or may not have been applied by the peer.
    """


class RequestTimeoutError(NetworkError):
    """No answer came within the timeout; the connection stays open and a late answer is dropped.

    As with a closed connection, the peer may or may not have applied the request.
    """


class BenchmarkError(LedgerMQError):
    """A benchmark could not run: a process failed to start or the cluster never became ready.

    Nothing was measured; the message names the step that failed and, for a child process, the
    end of its log.
    """


# Messaging: the broker, the NameServer and their clients.
__all__ += [
    "BadRequestError",
    "InvalidGroupNameError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidTopicNameError",
    "MQResponseError",
    "MessageFormatError",
    "NoRouteError",
    "RequestRejectedError",
    "SendOutcomeUnknownError",
    "TopicNotFoundError",
]

_RETRIABLE_RESPONSE_CODES = frozenset({1, 2, 10, 11, 12, 14, 209, 501})
"""RocketMQ response codes after which the same request may succeed later or at another broker:
SYSTEM_ERROR (a quorum timeout reports this), SYSTEM_BUSY, FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE,
FLUSH_SLAVE_TIMEOUT, SERVICE_NOT_AVAILABLE (a slave, or a master being elected), POLLING_FULL and
NOT_LEADER_FOR_QUEUE."""
_ROUTE_RESPONSE_CODES = frozenset({14, 17, 501})
"""Codes after which the route may be stale: SERVICE_NOT_AVAILABLE, TOPIC_NOT_EXIST and
NOT_LEADER_FOR_QUEUE."""


class RequestRejectedError(LedgerMQError):
    """Server side: a request cannot be served; the broker answers it with ``code`` and this text.

    Raised by request processors; the dispatcher turns it into the error response, so a client
    always gets an answer that says what was wrong.
    """

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class BadRequestError(RequestRejectedError):
    """Server side: a request is malformed (a header field missing or not a number, a bad body).

    Answered with SYSTEM_ERROR (1), as RocketMQ answers a header it cannot decode.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message, code)


class MQResponseError(LedgerMQError):
    """Client side: a broker or NameServer answered with an error ``code`` (and its ``remark``).

    ``retriable`` and ``refresh_route`` follow the code: a slave or a busy master may succeed
    later or elsewhere; a request the broker calls wrong will not.
    """

    def __init__(self, message: str, code: int, address: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.address = address
        self.retriable = code in _RETRIABLE_RESPONSE_CODES  # type: ignore[misc]
        self.refresh_route = code in _ROUTE_RESPONSE_CODES  # type: ignore[misc]

    def __reduce__(self) -> tuple[type[MQResponseError], tuple[str, int, str | None]]:
        return (type(self), (str(self), self.code, self.address))


class TopicNotFoundError(MQResponseError):
    """The topic does not exist and the cluster does not create topics on first use."""

    def __init__(self, message: str, code: int = 17, address: str | None = None) -> None:
        super().__init__(message, code, address)


class NoRouteError(LedgerMQError):
    """No broker can serve the request now (no master of any group holding the topic).

    Retriable: a master is usually being elected; the route is looked up again before retrying.
    """

    retriable = True
    refresh_route = True


class SendOutcomeUnknownError(LedgerMQError):
    """A send failed, but the message **may be stored** ("maybe stored"): a request went out and
    no answer came (timeout, connection lost), or the broker answered that a quorum did not
    confirm it in time. It may be delivered; sending it again may deliver it twice (consumers
    deduplicate by ``msg_id``). Every other failure of a send means it was not stored.

    ``msg_id`` is the message's id (its ``UNIQ_KEY``, comma-joined for a batch); the last
    attempt's error is the ``__cause__``.
    """

    retriable = True

    def __init__(self, message: str, msg_id: str = "") -> None:
        super().__init__(message)
        self.msg_id = msg_id

    def __reduce__(self) -> tuple[type[SendOutcomeUnknownError], tuple[str, str]]:
        return (type(self), (str(self), self.msg_id))


class InvalidMessageError(LedgerMQError):
    """A message cannot be sent as it is (too large, bad topic name, bad property): fix it."""


class InvalidNameError(InvalidMessageError):
    """A topic or group name breaks RocketMQ's naming rules (``ledgermq.wire.names``); the
    message names the rule. Never retriable: the same name is refused everywhere."""


class InvalidTopicNameError(InvalidNameError):
    """A topic name is not valid, or names a topic producers may not send into."""


class InvalidGroupNameError(InvalidNameError):
    """A consumer or producer group name is not valid (its ``%RETRY%`` / ``%DLQ%`` topic would
    not be a valid topic)."""


class MessageFormatError(ProtocolError):
    """Bytes that should hold stored messages (a pull body, a commit-log record) do not parse."""
