"""The messages the Raft core exchanges, as DLedger's RPCs, plus their result codes.

DLedger's RPCs are request/response (spec-election.md section 3.1, spec-replication-storage.md
section 3.2). The core treats both directions as messages: a request stepped in produces a
response addressed to the requester that carries the request's ``rid``, and the core matches
responses to its own outstanding requests by ``rid``. Transports map ``rid`` onto their own
request ids (RocketMQ remoting's ``opaque``).

Messages are frozen, slotted dataclasses (never string-keyed dicts) so the simulator, the golden
traces and the wire codec all see the same typed objects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.raft.membership import MembershipRecord

__all__ = [
    "HeartBeatRequest",
    "HeartBeatResponse",
    "LeadershipTransferRequest",
    "LeadershipTransferResponse",
    "LogEntry",
    "Message",
    "ParseResult",
    "PushEntryRequest",
    "PushEntryResponse",
    "PushKind",
    "ResponseCode",
    "Role",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
]


class Role(enum.Enum):
    """MemberState.Role (spec-election section 1.1). UNKNOWN is never used."""

    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


class ResponseCode(enum.IntEnum):
    """DLedgerResponseCode (spec-election section 4.1), with the numbers DLedger sends."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506
    NOT_AUTHENTICATED = 600  # ours: the ledger port accepts only its group's peers (peer_auth)


class VoteResult(enum.Enum):
    """VoteResponse.RESULT in DLedger's enum order (spec-election section 3.5)."""

    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class ParseResult(enum.Enum):
    """The outcome of a vote round (spec-election section 2.6)."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


class PushKind(enum.Enum):
    """What a push request asks of a follower (spec-replication-storage section 3.2)."""

    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"
    APPEND = "APPEND"
    COMMIT = "COMMIT"


class LogEntry(Protocol):
    """What the core needs of a stored entry; the store's ``Entry`` satisfies it.

    The core never builds or inspects bodies of replicated entries: it passes the objects the
    leader's log returned to the follower's log unchanged.
    """

    @property
    def index(self) -> int: ...
    @property
    def term(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def entry_type(self) -> int:
        """1 NORMAL, 2 NOOP, 3 CONFIG_CHANGE (the core reads the body of CONFIG_CHANGE only)."""
        ...

    @property
    def body(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate asks for a vote (spec-election section 3.1). ``leader_id`` is the candidate."""

    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    leader_id: str
    ledger_end_index: int
    ledger_end_term: int


@dataclass(frozen=True, slots=True)
class VoteResponse:
    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    result: VoteResult
    code: ResponseCode = ResponseCode.SUCCESS


@dataclass(frozen=True, slots=True)
class HeartBeatRequest:
    """A leader's heartbeat (spec-election section 4.1)."""

    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    leader_id: str


@dataclass(frozen=True, slots=True)
class HeartBeatResponse:
    group: str
    local_id: str
    remote_id: str
    rid: int
    code: ResponseCode
    term: int = -1
    """-1 unless the code is EXPIRED_TERM (or a membership error): then the responder's term."""


@dataclass(frozen=True, slots=True)
class PushEntryRequest:
    """Leader to follower replication (spec-replication-storage section 3.2, G2 shape).

    - COMPARE: does the follower hold ``index`` with ``compare_term``? (``index`` -1 = empty)
    - TRUNCATE: delete every entry with index >= ``index``.
    - APPEND: ``entries`` start at ``index``.
    - COMMIT: only ``commit_index``.
    Every kind carries the leader's ``commit_index``.
    """

    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    leader_id: str
    kind: PushKind
    index: int
    commit_index: int
    compare_term: int = -1
    entries: Sequence[LogEntry] = field(default=())
    membership: MembershipRecord | None = None
    """TRUNCATE carrying the leader's oldest entry only: the leader's latest committed
    membership, so a follower that begins its log again there knows the configuration the
    deleted entries had made (``MembershipLog.reset``)."""


@dataclass(frozen=True, slots=True)
class PushEntryResponse:
    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    code: ResponseCode
    kind: PushKind
    index: int
    """The request's index (first entry for APPEND)."""
    count: int = 0
    """APPEND: how many entries were appended (or were already there)."""
    end_index: int = -1
    """The follower's last index, for COMPARE mismatches."""
    x_term: int = -1
    """COMPARE mismatch: the follower's term at the compared index (G2 ``xTerm``)."""
    x_index: int = -1
    """COMPARE mismatch: the first index of ``x_term`` on the follower (G2 ``xIndex``)."""


@dataclass(frozen=True, slots=True)
class LeadershipTransferRequest:
    """The leader asks ``transferee_id`` to take over (spec-election section 6.3).

    ``take_leadership_ledger_index`` is the leader's ``ledgerEndIndex`` when it asked: the
    transferee first waits until its own log reaches it (``leadershipTransferWaitTimeout``).
    """

    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    transfer_id: str
    transferee_id: str
    take_leadership_ledger_index: int


@dataclass(frozen=True, slots=True)
class LeadershipTransferResponse:
    """Sent once the take-over is decided (section 6.5), not when the request arrives."""

    group: str
    local_id: str
    remote_id: str
    rid: int
    term: int
    code: ResponseCode


Message = (
    VoteRequest
    | VoteResponse
    | HeartBeatRequest
    | HeartBeatResponse
    | PushEntryRequest
    | PushEntryResponse
    | LeadershipTransferRequest
    | LeadershipTransferResponse
)
