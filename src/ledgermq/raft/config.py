"""Settings of the Raft core, named after DLedger's ``DLedgerConfig`` (spec-election 1.6).

Defaults differ from DLedger's where DLedger's are tuned for 6-second failover: ours aim at a new
leader accepting writes within 2 s of the old one dying (at the median), so heartbeats are ten
times more frequent and the waits DLedger hard-codes (2000 ms vote wait, 3000 ms RPC timeout)
scale with the heartbeat interval. Every option keeps DLedger's meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RaftConfig", "RaftConfigError"]


class RaftConfigError(ValueError):
    """A setting is out of range (spec-election section 11 #22: fail at config time)."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    group: str
    self_id: str
    peer_ids: tuple[str, ...]
    """Every member of the group, self included (DLedger ``peerMap`` keys), in sorted order."""

    heart_beat_time_interval_ms: int = 200
    """``heartBeatTimeIntervalMs`` (DLedger 2000)."""
    max_heart_beat_leak: int = 3
    """``maxHeartBeatLeak``: follower timeout and leader lease = leak x interval."""
    min_vote_interval_ms: int = 100
    """``minVoteIntervalMs`` (DLedger 300): lower bound of the candidate back-off."""
    max_vote_interval_ms: int = 300
    """``maxVoteIntervalMs`` (DLedger 1000): upper bound (exclusive)."""
    vote_wait_ms: int = 400
    """How long a vote round waits for answers before deciding (DLedger: 2000 + rand[0, max))."""
    rpc_timeout_ms: int = 600
    """An unanswered request counts as failed after this (DLedger: 3000)."""
    min_take_leadership_vote_interval_ms: int = 30
    """``minTakeLeadershipVoteIntervalMs``: back-off of a node taking over leadership."""
    max_take_leadership_vote_interval_ms: int = 100
    """``maxTakeLeadershipVoteIntervalMs`` (exclusive)."""
    max_leadership_transfer_wait_index: int = 1000
    """``maxLeadershipTransferWaitIndex``: a transferee this many entries behind is refused."""
    leadership_transfer_wait_timeout_ms: int = 1000
    """``leadershipTransferWaitTimeout``: how long a transferee waits for its log to catch up.
    The leader gives the whole transfer this plus two ``rpc_timeout_ms`` before TIMEOUT."""
    preferred_leader_ids: tuple[str, ...] = ()
    """``preferredLeaderIds`` (``;``-separated in DLedger): leadership moves to the first live."""
    check_preferred_leader_interval_ms: int = 1000
    """How often a leader runs ``checkPreferredLeader`` (DLedger hard-codes 1000 ms)."""
    enable_leader_elector: bool = True

    max_pending_requests_num: int = 10000
    """``maxPendingRequestsNum``: proposals waiting for quorum before LEADER_PENDING_FULL."""
    max_wait_ack_time_ms: int = 2500
    """``maxWaitAckTimeMs``: a proposal fails with WAIT_QUORUM_ACK_TIMEOUT after this."""
    max_push_timeout_ms: int = 1000
    """``maxPushTimeOutMs``: an unacknowledged push is resent after this."""
    max_pending_pushes: int = 1000
    """In-flight APPEND pushes per follower (DLedger ``maxPendingSize``)."""
    max_push_batch_bytes: int = 1 << 20
    """Entry bytes per APPEND push (DLedger ``maxBatchAppendSize`` is 4 KiB; batching is ours)."""
    commit_push_interval_ms: int = 1000
    """An idle leader re-sends the commit index at least this often (DLedger: 1 s)."""
    commit_push_delay_ms: int = 5
    """A new commit index rides on the next APPEND push; a COMMIT push of its own goes out only
    when none has carried it for this long (0: at once). DLedger waits up to a second; at once
    cost every sequential send two more frames, wake-ups and parses per follower."""
    auto_promote_learners: bool = True
    """A leader promotes a learner that has caught up to voter on its own (etcd: by hand)."""
    learner_promote_lag_entries: int = 100
    """N: a learner is caught up when its log is within N entries of the leader's last index
    (and holds the leader's NOOP of its term). 100 entries is well under a second of a busy
    group's writes, so the new voter does not slow commits down as soon as it counts."""
    learner_promote_heartbeats: int = 5
    """M: ... for M consecutive heartbeat rounds (5 x 200 ms = 1 s): a learner that only touched
    the end once, then fell behind again, is not promoted."""
    legacy_heartbeat_term_check: bool = False
    """Version A of the heartbeat decision (EXPIRED_TERM only counts without quorum)."""

    def __post_init__(self) -> None:
        if self.self_id not in self.peer_ids:
            raise RaftConfigError(
                f"selfId {self.self_id!r} is not one of the peers {self.peer_ids}"
            )
        if list(self.peer_ids) != sorted(set(self.peer_ids)):
            raise RaftConfigError(f"peer ids must be unique and sorted, got {self.peer_ids}")
        if any("-" in p for p in self.peer_ids):
            raise RaftConfigError("peer ids must not contain '-' (DLedger peer string format)")
        if self.max_vote_interval_ms <= self.min_vote_interval_ms:
            raise RaftConfigError("maxVoteIntervalMs must be greater than minVoteIntervalMs")
        if self.max_take_leadership_vote_interval_ms <= self.min_take_leadership_vote_interval_ms:
            raise RaftConfigError(
                "maxTakeLeadershipVoteIntervalMs must be greater than "
                "minTakeLeadershipVoteIntervalMs"
            )
        for name in (
            "heart_beat_time_interval_ms",
            "max_heart_beat_leak",
            "vote_wait_ms",
            "rpc_timeout_ms",
            "max_pending_requests_num",
            "max_wait_ack_time_ms",
            "max_push_timeout_ms",
            "max_pending_pushes",
            "max_push_batch_bytes",
            "check_preferred_leader_interval_ms",
            "learner_promote_heartbeats",
        ):
            if getattr(self, name) < 1:
                raise RaftConfigError(f"{name} must be positive")
        if self.learner_promote_lag_entries < 0:
            raise RaftConfigError("learner_promote_lag_entries must not be negative")
        if self.commit_push_delay_ms < 0:
            raise RaftConfigError("commit_push_delay_ms must not be negative")

    @property
    def quorum(self) -> int:
        """Votes needed: a strict majority (``isQuorum``: n >= size // 2 + 1)."""
        return len(self.peer_ids) // 2 + 1

    def is_quorum(self, n: int) -> bool:
        return n >= self.quorum

    @property
    def others(self) -> tuple[str, ...]:
        return tuple(p for p in self.peer_ids if p != self.self_id)
