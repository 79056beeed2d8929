"""The Raft core: DLedger's election and replication as a pure state machine (no I/O)."""

from ledgermq.raft.config import RaftConfig, RaftConfigError
from ledgermq.raft.core import RaftCore
from ledgermq.raft.log_view import LogReader
from ledgermq.raft.membership import (
    CONFIG_CHANGE_TYPE,
    Membership,
    MembershipError,
    MembershipRecord,
    MembershipState,
)
from ledgermq.raft.messages import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    Message,
    ParseResult,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    ResponseCode,
    Role,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.raft.ready import (
    HardState,
    NewEntry,
    ProposalResult,
    Ready,
    RoleChange,
    TransferResult,
)

__all__ = [
    "CONFIG_CHANGE_TYPE",
    "HardState",
    "HeartBeatRequest",
    "HeartBeatResponse",
    "LeadershipTransferRequest",
    "LeadershipTransferResponse",
    "LogReader",
    "Membership",
    "MembershipError",
    "MembershipRecord",
    "MembershipState",
    "Message",
    "NewEntry",
    "ParseResult",
    "ProposalResult",
    "PushEntryRequest",
    "PushEntryResponse",
    "PushKind",
    "RaftConfig",
    "RaftConfigError",
    "RaftCore",
    "Ready",
    "ResponseCode",
    "Role",
    "RoleChange",
    "TransferResult",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
]
