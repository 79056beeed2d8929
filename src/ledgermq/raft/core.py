"""The Raft core: DLedger's election and replication as a pure state machine.

Theory of operation
-------------------
Inputs are ``tick(now_ms)``, ``step(message)``, ``propose(bodies)`` and
``transfer_leadership(to)``; output is a ``Ready`` the driver persists and sends before calling
``advance``. Time arrives as ``now_ms`` and randomness
from the injected ``random.Random``: the core has no clock, no I/O and no threads, so the same
code runs in the server and in the seeded simulator (STYLE.md 7.1).

DLedger runs blocking rounds on a maintainer thread (a vote round waits on a latch, a heartbeat
round too). Here a round is state: it starts on a tick, counts responses as they are stepped in,
and is decided as soon as DLedger's latch would be released (enough answers, everyone answered,
or the deadline passed at a later tick).

Election (spec-election.md): every node starts as CANDIDATE; the term goes up only after a
round whose outcome asks for it (WAIT_TO_VOTE_NEXT) or after a higher term is seen (then
``need_increase_term_immediately``); ``next_term`` jumps to the highest known term. Votes follow
the decision table of section 3.3 and rounds the seven outcomes of section 3.5. Heartbeats follow
section 4 (version B, section 4.2, by default). Step-downs always go to CANDIDATE.

Leadership transfer (section 6): the leader marks a transferee (appends are refused with
LEADER_TRANSFERRING meanwhile) and asks it to take over; the transferee waits until its log has
reached the leader's end, then campaigns at ``term + 1`` with the short take-leadership back-off
and answers once it leads (or has failed). A leader with ``preferred_leader_ids`` that is not
itself preferred hands over to the first live preferred peer every second (section 6.1).

Replication (spec-replication-storage.md, G2 shapes with the section 9 recommendations): a
dispatcher per follower walks COMPARE -> TRUNCATE -> APPEND; APPEND pushes are pipelined up to a
window; a push unacknowledged for ``max_push_timeout_ms`` makes the dispatcher go back to the last
acknowledged index; the follower applies pushes strictly in index order, buffering early ones;
the commit index is the quorum of watermarks.

Safety beats fidelity, in four places (each says so where it is implemented):

- a new leader appends a NOOP entry and counts a quorum only for entries of its own term (Raft
  section 5.4.2; DLedger has this only as ``enableFastAdvanceCommitIndex``, off by default);
- a leader that learns of a higher term, from any response, steps down (the newer DLedger order,
  spec-election section 4.2 version B, applied to late responses too);
- a follower takes the leader's commit index only up to the last entry it has verified against
  that leader in this term (Raft's ``min(leaderCommit, index of last new entry)``), and TRUNCATE
  and COMMIT pushes are checked for term and leader (spec-replication-storage section 9 #3);
- a node restarting with a vote for itself campaigns in a new term, never again in the term it
  may have led (DLedger re-elects it in the same term, unsafe if the restart lost entries).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from ledgermq.errors import (
    LeaderPendingFullError,
    LeaderTransferringError,
    MembershipChangeBusyError,
    MembershipChangeError,
    NotLeaderError,
)
from ledgermq.raft.log_view import LogReader, LogView
from ledgermq.raft.membership import (
    CONFIG_CHANGE_TYPE,
    Membership,
    MembershipError,
    MembershipLog,
    MembershipRecord,
    MembershipState,
)
from ledgermq.raft.messages import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    LogEntry,
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
from ledgermq.raft.quorum import quorum_index
from ledgermq.raft.ready import (
    HardState,
    NewEntry,
    ProposalResult,
    Ready,
    RoleChange,
    TransferResult,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Sequence

    from ledgermq.raft.config import RaftConfig

__all__ = ["RaftCore"]

_log: Final = logging.getLogger("ledgermq.raft")
NEVER: Final = -(1 << 62)
_PREFERRED_RETRY_CHECKS: Final = 3
"""A preferred replica whose transfer failed is asked again after this many preferred checks."""
"""The "-1" timestamps of DLedger: long enough ago that every elapsed check passes."""
NOOP_TYPE: Final = 2


@dataclass(slots=True)
class _VoteRound:
    """One canvass (spec-election section 3.4): the tally of a round in ``term``."""

    term: int
    deadline_ms: int
    waiting: set[int]
    """rids of vote requests not answered yet."""
    all_num: int = 0
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    unknown_num: int = 0
    """Peers that do not count this candidate as a member (REJECT_UNKNOWN_LEADER)."""
    already_has_leader: bool = False
    known_max_term: int = 0


@dataclass(slots=True)
class _HeartbeatRound:
    """One heartbeat round (spec-election section 4.2); the leader counts itself (if a voter).

    Learners get heartbeats too but their answers count only as answers (``all_num``), never
    towards the quorum.
    """

    term: int
    deadline_ms: int
    waiting: dict[int, str]
    size: int = 1
    """Answers that release the round: every peer asked, plus the leader itself."""
    all_num: int = 1
    succ_num: int = 1
    not_ready_num: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False


@dataclass(slots=True)
class _Dispatcher:
    """Leader-side replication state for one follower (DLedger ``EntryDispatcher``)."""

    peer: str
    state: PushKind = PushKind.COMPARE
    compare_index: int = -1
    match_index: int = -1
    """Highest index known to be on the follower and equal to ours (its watermark)."""
    write_index: int = 0
    """Next index to push in APPEND state."""
    control_rid: int | None = None
    """The outstanding COMPARE or TRUNCATE request."""
    match_rid: int = 0
    """Request id of the answer that last set ``match_index``: an answer to an older request
    (a COMMIT push overtaken by APPENDs) says nothing about the follower's log now."""
    restarting: bool = False
    """The outstanding TRUNCATE carries our oldest entry: the follower begins its log again."""
    control_sent_ms: int = NEVER
    retry_at_ms: int = NEVER
    """A peer that is not following yet is asked again no earlier than this."""
    in_flight: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """rid -> (first index, count, sent at) of outstanding APPEND pushes."""
    last_commit_push_ms: int = NEVER
    last_pushed_commit: int = -1
    commit_behind_since_ms: int | None = None
    """Since when the follower has not been sent our commit index (None: it has been)."""


@dataclass(slots=True)
class _Transfer:
    """Leader side of a transfer (DLedger's pending ``leadershipTransfer`` RPC future)."""

    transfer_id: int
    transferee: str
    term: int
    rid: int
    deadline_ms: int
    started_ms: int = NEVER


@dataclass(slots=True)
class _TakeLeadership:
    """Transferee side (DLedger ``TakeLeadershipTask`` plus the catch-up wait of section 6.2)."""

    request: LeadershipTransferRequest
    catch_up_deadline_ms: int
    target_term: int = -1
    """-1 while waiting for the log to catch up; then ``request.term + 1``."""


@dataclass(slots=True)
class _Proposal:
    proposal_id: int
    first_index: int
    last_index: int
    term: int
    deadline_ms: int


class RaftCore:
    """One replica's Raft state machine. See the module docstring for the contract."""

    peers_live: dict[str, bool]
    """Leader: DLedger's ``peersLiveTable`` (false after a NETWORK_ERROR answer)."""
    _heard_ms: dict[str, int]
    """Leader: when each follower last answered a heartbeat (``hears_from``)."""
    _preferred_refused_ms: dict[str, int]
    """Leader: when a transfer to each replica last failed (``_check_preferred_leader``)."""
    refused_as_non_member: bool = False
    """A quorum of the voters it knows answered that it is not a member: it stops campaigning
    until a leader contacts it (``_refused_by_a_quorum``); a restart forgets it."""

    def __init__(
        self,
        config: RaftConfig,
        hard_state: HardState,
        log: LogReader,
        rng: random.Random,
        now_ms: int,
        committed_index: int = -1,
        membership: MembershipRecord | None = None,
    ) -> None:
        self.config = config
        self._rng = rng
        self._now = now_ms
        self._log = LogView(log)
        # MemberState (spec-election section 1.2).
        self.role = Role.CANDIDATE  # every node starts as CANDIDATE
        self.term = hard_state.term
        self.voted_for = hard_state.voted_for
        self.leader_id: str | None = None
        self.known_max_term_in_group = -1
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        self._init_commit_and_membership(committed_index, membership)
        # A node started with no log (new, or its disk was replaced) is blank; once it sees
        # that the group has a log it is rebuilding (HardState.rebuilding, _note_peer,
        # _rebuilding_refusal) until it has caught up with a leader. Its hard state does not
        # make it less blank: a node whose disk was replaced may campaign, persist a term and
        # restart before it has heard of the group's log (simulation seed 50), and its vote must
        # still not elect a log that misses entries it had held.
        self._blank = self._log.last_index < 0
        self._rebuilding = hard_state.rebuilding
        self._forget_peers()
        self.peers_live, self._heard_ms, self._preferred_refused_ms = {}, {}, {}
        # Elector (section 2.1); "-1" timestamps are NEVER.
        self._last_leader_heartbeat_ms = NEVER
        self._last_send_heartbeat_ms = NEVER
        self._last_succ_heartbeat_ms = NEVER
        self._next_time_to_request_vote_ms = NEVER
        self._need_increase_term_immediately = False
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        if hard_state.voted_for == config.self_id:
            # Deviation (spec-election 11 #1 keeps the term): a node that had voted for itself
            # may have led this term, and its restart may have lost entries it had already sent
            # (flush=async). Leading the same term again would create a second, different entry
            # with the same index and term, breaking log matching. Its first round runs in a new
            # term instead.
            self.last_parse_result = ParseResult.WAIT_TO_VOTE_NEXT
        self._vote_round: _VoteRound | None = None
        self._heartbeat_round: _HeartbeatRound | None = None
        # Replication.
        self._dispatchers: dict[str, _Dispatcher] = {}
        self._proposals: dict[int, _Proposal] = {}
        self._next_proposal_id = 1
        self._self_match_index = -1
        """Leader: last index of its own log that is stored (its own watermark)."""
        self._verified_end = -1
        """Follower: last index verified equal to the current leader's log in this term."""
        self._push_buffer: dict[int, PushEntryRequest] = {}
        """Follower: APPEND pushes that arrived before the entries they follow."""
        self._push_gap_since_ms = NEVER
        """Follower: since when the buffered pushes have not continued the log (NEVER: no gap)."""
        # Leadership transfer (section 6).
        self._transfer: _Transfer | None = None
        self._take: _TakeLeadership | None = None
        self._next_transfer_id = 1
        self._next_preferred_check_ms = now_ms + config.check_preferred_leader_interval_ms

        # Outputs, collected until ready().
        self._next_rid = 1
        self._hard_state_dirty = False
        self._messages: list[Message] = []
        self._messages_after_persist: list[Message] = []
        self._role_changes: list[RoleChange] = []
        self._completed: list[ProposalResult] = []
        self._transfer_results: list[TransferResult] = []
        self._commit_dirty = False
        self._in_ready = False

    def _init_commit_and_membership(
        self, committed_index: int, membership: MembershipRecord | None
    ) -> None:
        """The commit index (``_known_committed``) and the configurations of the log.

        ``membership`` is the latest committed configuration the driver persisted (None: none
        was ever persisted, so the seed ``config.peer_ids``, all voters, is the base); the
        CONFIG_CHANGE entries after the commit index are read from the log.
        """
        self.committed_index = self._known_committed(committed_index)
        if membership is not None and self.committed_index < membership.index <= self.last_index:
            # The driver persisted this configuration once its entry was committed, possibly
            # before the commit index reached the disk: the entry is committed. Without this
            # floor a new leader's TRUNCATE cut the log below the committed configuration and
            # left it in effect over an empty log (simulation seed 760).
            self.committed_index = membership.index
        seed = Membership(tuple(sorted(self.config.peer_ids)))
        self._members = MembershipLog(membership or MembershipRecord(-1, seed))
        self._membership_dirty = False
        self._learner_rounds: dict[str, int] = {}
        """Leader: consecutive heartbeat rounds each learner was caught up (auto-promotion)."""
        self._term_first_index = -1
        """Leader: index of its NOOP; a membership change waits until it is committed."""
        self._scan_configurations()

    def _known_committed(self, kept: int) -> int:
        """The commit index to start with: the driver's ``kept`` one, or the log's first entry.

        A log that no longer begins at 0 was cut by retention (which deletes only committed
        entries and keeps the newest committed one) or begun again at a leader's oldest entry
        (committed): its first entry is committed, whatever commit index the driver kept
        (LedgerStore derives the same at open; a commit index lost with a crash did not).
        Without this floor a follower restarted with a lower one cut its whole log when a new
        leader's COMPARE skipped the conflicting term back to the log's begin (G2 xIndex),
        matched below it (deleted here, so committed) and sent TRUNCATE at that begin
        (simulation seed 910062: "cannot remove every entry of a log that begins at 47").
        """
        committed = min(kept, self._log.last_index)
        begin = self._log.begin_index
        return max(committed, begin) if begin > 0 else committed

    # ================================================================== inputs
    def tick(self, now_ms: int) -> None:
        """Advance time; run the maintainer (section 2.2) and the replication work."""
        self._check_not_in_ready()
        self._now = max(self._now, now_ms)
        self._expire_rounds()
        self._expire_transfer()
        self._poll_take_leadership()
        if not self.config.enable_leader_elector:
            return
        if self.role is Role.LEADER:
            self._check_preferred_leader()
        if self.role is Role.LEADER:
            self._maintain_as_leader()
        elif self.role is Role.FOLLOWER:
            self._maintain_as_follower()
        else:
            self._maintain_as_candidate()
        if self.role is Role.LEADER:
            self._expire_proposals()
            self._replicate()

    def step(self, message: Message) -> None:
        """Take in a message from another node (a request or a response to ours)."""
        self._check_not_in_ready()
        if (self._blank or self._rebuilding) and self.membership.is_member(message.local_id):
            self._note_peer(message)
        if isinstance(message, VoteRequest):
            self._send(self._handle_vote_rpc(message))
        elif isinstance(message, VoteResponse):
            self._on_vote_response(message)
        elif isinstance(message, HeartBeatRequest):
            self._send(self._handle_heartbeat_rpc(message))
        elif isinstance(message, HeartBeatResponse):
            self._on_heartbeat_response(message)
        elif isinstance(message, PushEntryRequest):
            self._handle_push(message)
            self._poll_take_leadership()
        elif isinstance(message, PushEntryResponse):
            self._on_push_response(message)
        elif isinstance(message, LeadershipTransferRequest):
            self._handle_take_leadership_rpc(message)
        else:
            self._on_transfer_response(message)

    def transfer_leadership(self, to: str, term: int | None = None) -> int:
        """Hand leadership to ``to`` (spec-election 6.2, the leader's checks, then 6.3).

        ``term``, when given, must be the current term (the admin command's guard against acting
        on a stale view). Returns a transfer id; the outcome arrives in ``Ready.transfers``,
        refusals in the very next ``Ready``.
        """
        self._check_not_in_ready()
        tid = self._next_transfer_id
        self._next_transfer_id += 1
        code = self._transfer_refusal(to, term)
        if code is not None:
            self._transfer_results.append(TransferResult(tid, to, self.term, code))
            return tid
        if to == self.config.self_id:  # already there: nothing to move
            self._transfer_results.append(TransferResult(tid, to, self.term, ResponseCode.SUCCESS))
            return tid
        cfg = self.config
        self.transferee = to
        rid = self._rid()
        self._transfer = _Transfer(
            tid,
            to,
            self.term,
            rid,
            self._now + cfg.leadership_transfer_wait_timeout_ms + 2 * cfg.rpc_timeout_ms,
            self._now,
        )
        _log.info("%s: transferring leadership of term %d to %s", cfg.self_id, self.term, to)
        self._send(
            LeadershipTransferRequest(
                cfg.group, cfg.self_id, to, rid, self.term, cfg.self_id, to, self.last_index
            )
        )
        return tid

    def replicate(self, now_ms: int) -> None:
        """Leader: push what can be pushed now (new stored entries, a new commit index).

        Pushes otherwise go out at the next ``tick``. A driver calls this once it has persisted
        a ``Ready`` with new entries (only stored entries are ever pushed), so an append does not
        wait for the tick timer: the single-client latency is then network plus disk, not the
        tick interval.
        """
        self._check_not_in_ready()
        self._now = max(self._now, now_ms)
        if self.role is Role.LEADER:
            self._replicate()

    def propose(self, bodies: Sequence[bytes], entry_type: int = 1, channel: int = 0) -> int:
        """Append ``bodies`` as leader; returns a proposal id reported in ``Ready.completed``.

        ``channel`` goes to every entry's ``channel`` field, for the application.

        Raises:
            NotLeaderError: not the leader (``leader_hint`` names the known leader).
            LeaderTransferringError: a leadership transfer is in progress.
            LeaderPendingFullError: more than ``max_pending_requests_num`` proposals wait.
            ValueError: no bodies, or ``entry_type`` CONFIG_CHANGE (see ``add_learner``).
        """
        self._check_not_in_ready()
        if self.role is not Role.LEADER:
            raise NotLeaderError(f"{self.config.self_id} is not the leader", self.leader_id)
        if self.transferee is not None:  # spec-replication-storage 2.1 #4
            raise LeaderTransferringError(f"leadership is moving to {self.transferee}")
        if len(self._proposals) > self.config.max_pending_requests_num:  # 2.2: strictly >
            raise LeaderPendingFullError(
                f"{len(self._proposals)} appends wait for a quorum on {self.config.self_id}"
            )
        if not bodies:
            raise ValueError("propose() needs at least one body")
        if entry_type == CONFIG_CHANGE_TYPE:
            # Validated before it is appended: a committed entry is applied on every replica.
            raise ValueError(
                "a CONFIG_CHANGE entry is appended only by add_learner, remove_member and "
                "promote_learner, which check the membership and the one-change-at-a-time rule"
            )
        first = self._log.last_index + 1
        entries = [
            NewEntry(first + i, self.term, body, entry_type, channel)
            for i, body in enumerate(bodies)
        ]
        self._log.append(entries)
        pid = self._next_proposal_id
        self._next_proposal_id += 1
        self._proposals[pid] = _Proposal(
            pid, first, entries[-1].index, self.term, self._now + self.config.max_wait_ack_time_ms
        )
        return pid

    # ================================================================== membership
    def add_learner(self, member: str, address: str = "") -> int:
        """Propose adding ``member`` as a learner; a proposal id as ``propose`` returns.

        The learner receives the log but does not vote or count for commit; the leader promotes
        it on its own once it has caught up (``RaftConfig.learner_promote_*``).

        Raises:
            NotLeaderError, LeaderTransferringError: as ``propose``.
            MembershipChangeError: ``member`` is already a member (or a malformed id).
            MembershipChangeBusyError: another change is uncommitted, or this leader has not
                committed an entry of its term yet.
        """
        return self._propose_membership(lambda m: m.with_learner(member, address))

    def remove_member(self, member: str) -> int:
        """Propose removing ``member`` (a voter or a learner; the leader itself too: it keeps
        leading until the change commits, then steps down and never campaigns again)."""
        return self._propose_membership(lambda m: m.without(member))

    def promote_learner(self, member: str) -> int:
        """Propose making the learner ``member`` a voter now, without waiting for it to catch up
        (the leader does this on its own once it has; an operator rarely needs it)."""
        return self._propose_membership(lambda m: m.promoted(member))

    @property
    def membership(self) -> Membership:
        """The configuration in effect: the latest in the log, committed or not."""
        return self._members.effective.membership

    @property
    def membership_state(self) -> MembershipState:
        return MembershipState(self._members.effective, self._members.committed)

    def membership_change_refusal(self) -> str | None:
        """Why a membership change cannot be proposed now (None: it can)."""
        if self.role is not Role.LEADER:
            return f"{self.config.self_id} is not the leader"
        pending = self._members.pending
        if pending is not None:
            return (
                f"the membership change at index {pending.index} is not committed yet; one "
                "change at a time"
            )
        if self.committed_index < self._term_first_index:
            return (
                f"the leader has not committed an entry of its term {self.term} yet (a change "
                "waits for it, Raft's single-server rule)"
            )
        return None

    def _propose_membership(self, change: Callable[[Membership], Membership]) -> int:
        self._check_not_in_ready()
        if self.role is not Role.LEADER:
            raise NotLeaderError(f"{self.config.self_id} is not the leader", self.leader_id)
        try:
            new = change(self.membership)
        except MembershipError as exc:
            raise MembershipChangeError(str(exc)) from exc
        if self.transferee is not None:
            raise LeaderTransferringError(f"leadership is moving to {self.transferee}")
        refusal = self.membership_change_refusal()
        if refusal is not None:
            raise MembershipChangeBusyError(refusal)
        index = self._append_configuration(new)
        pid = self._next_proposal_id
        self._next_proposal_id += 1
        self._proposals[pid] = _Proposal(
            pid, index, index, self.term, self._now + self.config.max_wait_ack_time_ms
        )
        return pid

    def _append_configuration(self, new: Membership) -> int:
        """Leader: append a CONFIG_CHANGE entry; it takes effect here at once (section 4.1)."""
        index = self._log.last_index + 1
        self._log.append([NewEntry(index, self.term, new.encode(), CONFIG_CHANGE_TYPE)])
        self._members.append(index, self.term, new)
        _log.info(
            "%s: membership change at index %d in term %d: %s",
            self.config.self_id, index, self.term, new.describe(),
        )  # fmt: skip
        self._membership_changed()
        return index

    def _may_campaign(self) -> bool:
        """A voter of the configuration in effect, or of the committed one while an uncommitted
        change removes it. The second case is the dissertation's (4.2.2): the node whose log
        holds its own uncommitted removal may be the only one with the longest log (the leader
        that proposed it, then lost its quorum); the others cannot be elected without its vote,
        which it gives only to a log as long as its own, so it campaigns in the new
        configuration (its own vote does not count there), commits the change and steps down
        (simulation seed 466 never elected a leader without this)."""
        me = self.config.self_id
        if self.refused_as_non_member:
            return False
        if self.membership.is_voter(me):
            return True
        return self._members.pending is not None and self._members.committed.membership.is_voter(me)

    def _other_voters(self) -> list[str]:
        return [p for p in self.membership.voters if p != self.config.self_id]

    def _replication_targets(self) -> list[str]:
        """Who a leader sends heartbeats and entries to: every member of the configuration in
        effect and of the committed one, except itself. A member being removed keeps receiving
        until its removal commits, so it usually learns that it was removed (and then never
        campaigns); it does not count for commit meanwhile."""
        members: set[str] = set()
        for record in self._members.configurations():
            members.update(record.membership.members)
        members.discard(self.config.self_id)
        return sorted(members)

    def _scan_configurations(self) -> None:
        """At start: the CONFIG_CHANGE entries after the commit index (the driver persisted the
        committed configuration before it recorded a commit index past it)."""
        log = self._log
        start = max(log.begin_index, self.committed_index + 1, 0)
        while start <= log.stable_end:
            entries = log.stable_entries(start, 1 << 20)
            if not entries:
                break
            self._note_configurations(entries)
            start = entries[-1].index + 1
        self._members.commit(self.committed_index)
        self._membership_dirty = False

    def _note_configurations(self, entries: Sequence[LogEntry | NewEntry]) -> None:
        """Entries just put in the log: a CONFIG_CHANGE among them takes effect at once."""
        for entry in entries:
            if entry.entry_type != CONFIG_CHANGE_TYPE:
                continue
            try:
                membership = Membership.decode(entry.body)
            except MembershipError as exc:
                _log.error(
                    "%s: CONFIG_CHANGE entry %d is unreadable (%s); ignored",
                    self.config.self_id, entry.index, exc,
                )  # fmt: skip
                continue
            if self._members.append(entry.index, entry.term, membership):
                _log.info(
                    "%s: membership from index %d: %s",
                    self.config.self_id, entry.index, membership.describe(),
                )  # fmt: skip
                self._membership_changed()

    def _membership_changed(self) -> None:
        self._membership_dirty = True
        if self.role is not Role.LEADER:
            return
        targets = self._replication_targets()
        end = self._log.last_index
        for peer in targets:
            if peer not in self._dispatchers:
                self._dispatchers[peer] = _Dispatcher(peer, compare_index=end, write_index=end + 1)
        for peer in list(self._dispatchers):
            if peer not in targets:
                # A farewell: the removed member is told the commit index that covers its
                # removal, so it knows it is out for good and does not campaign (_may_campaign).
                self._push(self._dispatchers.pop(peer), PushKind.COMMIT, self.committed_index)
                self.peers_live.pop(peer, None)
        for peer in list(self._learner_rounds):
            if peer not in self.membership.learners:
                del self._learner_rounds[peer]

    def _commit_configurations(self) -> None:
        """The commit index moved: a configuration at or below it is committed. A leader whose
        removal is now committed steps down (dissertation 4.2.2) and, as a non-voter, never
        campaigns again."""
        if not self._members.commit(self.committed_index):
            return
        self._membership_changed()
        cfg = self.config
        if self.role is Role.LEADER and not self._members.committed.membership.is_voter(
            cfg.self_id
        ):
            _log.info(
                "%s: its removal from the group is committed (index %d); stepping down",
                cfg.self_id, self._members.committed.index,
            )  # fmt: skip
            self._change_role_to_candidate(self.term)

    def _check_learners(self) -> None:
        """Leader, after a heartbeat round with a quorum: promote a learner that has been caught
        up (its match index within ``learner_promote_lag_entries`` of our last index, and past
        this term's NOOP) for ``learner_promote_heartbeats`` consecutive rounds."""
        cfg = self.config
        learners = self.membership.learners
        if not learners or not cfg.auto_promote_learners:
            return
        floor = max(self.last_index - cfg.learner_promote_lag_entries, self._term_first_index)
        for learner in learners:
            d = self._dispatchers.get(learner)
            caught_up = d is not None and d.match_index >= floor
            rounds = self._learner_rounds.get(learner, 0) + 1 if caught_up else 0
            self._learner_rounds[learner] = rounds
            if (
                rounds >= cfg.learner_promote_heartbeats
                and self.transferee is None
                and self.membership_change_refusal() is None
            ):
                _log.info(
                    "%s: learner %s caught up (%d rounds); promoting it to voter",
                    cfg.self_id, learner, rounds,
                )  # fmt: skip
                self._append_configuration(self.membership.promoted(learner))
                self._learner_rounds.pop(learner, None)
                return

    # ================================================================== Ready
    def has_ready(self) -> bool:
        return bool(
            self._transfer_results
            or self._hard_state_dirty
            or self._log.truncate_from is not None
            or self._log.unstable
            or self._messages
            or self._messages_after_persist
            or self._role_changes
            or self._completed
            or self._commit_dirty
            or self._membership_dirty
        )

    def ready(self) -> Ready:
        """Everything to persist and send since the last ``ready``; call ``advance`` after it."""
        self._check_not_in_ready()
        truncate_from, restart_from, entries = self._log.take_unstable()
        ready = Ready(
            hard_state=(
                HardState(self.term, self.voted_for, self._rebuilding)
                if self._hard_state_dirty
                else None
            ),
            truncate_from=truncate_from,
            restart_from=restart_from,
            entries=entries,
            messages=self._messages,
            messages_after_persist=self._messages_after_persist,
            committed_index=self.committed_index if self._commit_dirty else None,
            role_changes=self._role_changes,
            completed=self._completed,
            transfers=self._transfer_results,
            membership=(
                MembershipState(self._members.effective, self._members.committed)
                if self._membership_dirty
                else None
            ),
        )
        self._membership_dirty = False
        self._hard_state_dirty = False
        self._commit_dirty = False
        self._messages = []
        self._messages_after_persist = []
        self._role_changes = []
        self._completed = []
        self._transfer_results = []
        self._in_ready = True
        return ready

    def advance(self, ready: Ready, *, entries_durable: bool = True) -> None:
        """The driver has persisted and sent ``ready``.

        ``entries_durable=False``: the entries are written but not yet synced (a group-committing
        driver with ``flush=sync``); the leader then counts its own log in the quorum only when
        the driver reports the sync through ``entries_durable_to``.
        """
        assert self._in_ready, "advance() without ready()"
        self._in_ready = False
        if entries_durable and self.role is Role.LEADER and ready.entries:
            last = ready.entries[-1]
            if last.term == self.term:
                self._self_match_index = max(self._self_match_index, last.index)
                self._maybe_advance_commit()

    def entries_durable_to(self, index: int) -> None:
        """The log is on disk up to ``index`` (flush=sync): a leader may count itself that far."""
        self._check_not_in_ready()
        if self.role is not Role.LEADER:
            return
        durable = min(index, self._log.stable_end)
        if durable > self._self_match_index:
            self._self_match_index = durable
            self._maybe_advance_commit()

    def _check_not_in_ready(self) -> None:
        assert not self._in_ready, "call advance(ready) before giving the core more input"

    # ================================================================== properties
    @property
    def last_index(self) -> int:
        """Index of the last entry, stored or not (``ledgerEndIndex``)."""
        return self._log.last_index

    @property
    def last_term(self) -> int:
        """Term of the last entry (``ledgerEndTerm``)."""
        return self._log.last_term

    @property
    def pending_proposals(self) -> int:
        return len(self._proposals)

    def replication_lags(self) -> dict[str, int]:
        """Leader only: entries each follower has not acknowledged yet (empty otherwise)."""
        if self.role is not Role.LEADER:
            return {}
        end = self._log.last_index
        return {peer: end - d.match_index for peer, d in self._dispatchers.items()}

    # ================================================================== outputs
    def _rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    def _send(self, message: Message, *, after_persist: bool = False) -> None:
        if (
            after_persist
            or self._hard_state_dirty
            or self._log.unstable
            or (self._log.truncate_from is not None)
        ):
            self._messages_after_persist.append(message)
        else:
            self._messages.append(message)

    def _role_event(self, term: int) -> None:
        self._role_changes.append(RoleChange(term, self.role, self.leader_id))
        self._check_take_leadership(term)

    # ================================================================== role changes (section 5)
    def _change_role_to_candidate(self, term: int) -> None:
        """Section 5.2: step down (or stay) to CANDIDATE; the term is adopted later (nextTerm)."""
        if term < self.term:
            _log.debug(
                "%s: skip candidate in term %d, currTerm %d", self.config.self_id, term, self.term
            )
            return
        was_leader = self.role is Role.LEADER
        self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None
        self._vote_round = None
        self._heartbeat_round = None
        if was_leader:
            self._stop_leading()
        self._push_buffer.clear()
        self._verified_end = -1
        self._role_event(term)

    def _adopt_higher_term(self, term: int) -> None:
        """Become CANDIDATE now and take ``term`` on the next tick (``nextTerm`` jumps to it).

        DLedger does this for a higher-term vote request, heartbeat or push (rules 7, 4.4).
        Deviation: it also serves a leader that learns of a higher term from an answer, where
        DLedger only records the term (knownMaxTermInGroup) and, its last round having PASSED,
        campaigns again in its old term; the followers that still follow it re-elect it there
        (a repeat vote, rule 6), the higher-term node makes it step down again, and the group
        flaps (seen in the golden preferred-leader trace). Raft adopts a higher term at once.
        """
        self._change_role_to_candidate(term)
        self._need_increase_term_immediately = True

    def _change_role_to_leader(self, term: int) -> None:
        """Section 5.1: only if still in ``term``."""
        if self.term != term:
            return
        self.role = Role.LEADER
        self.leader_id = self.config.self_id
        self.peers_live.clear()
        self._heard_ms.clear()
        self._last_send_heartbeat_ms = NEVER
        self._vote_round = None
        self._role_event(term)
        self._start_leading()

    def _change_role_to_follower(self, term: int, leader_id: str) -> None:
        """Section 5.3 (only from a same-term heartbeat while no leader is known)."""
        assert self.term == term
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.refused_as_non_member = False  # a leader knows it: added (again), or told the log
        self.transferee = None
        self._vote_round = None
        self._last_leader_heartbeat_ms = self._now
        self._push_buffer.clear()
        self._verified_end = -1
        if (self._blank or self._rebuilding) and self.voted_for is None:
            # It may have voted in this term before it lost its state; following this leader,
            # it will not vote for another candidate of the term. A blank node too: it may
            # follow before it has seen a push (then it is not rebuilding yet), catch up and
            # then vote normally in this term; its forgotten vote for this leader and a peer
            # that had not voted elected a second leader of the term (simulation seed 1010809).
            self._set_vote_for(leader_id)
        self._role_event(term)

    def _next_term(self) -> int:
        """MemberState.nextTerm (section 1.3): +1, or jump to the highest known term."""
        assert self.role is Role.CANDIDATE
        if self.known_max_term_in_group > self.term:
            self.term = self.known_max_term_in_group
        else:
            self.term += 1
        self.voted_for = None
        self._hard_state_dirty = True
        return self.term

    def _set_vote_for(self, candidate: str) -> None:
        self.voted_for = candidate
        self._hard_state_dirty = True

    def _get_next_time_to_request_vote(self) -> int:
        """Section 2.5: now + min + rand[0, max - min) (the take-leadership window if taking)."""
        cfg = self.config
        if self._is_taking_leadership():
            low, high = (
                cfg.min_take_leadership_vote_interval_ms,
                cfg.max_take_leadership_vote_interval_ms,
            )
        else:
            low, high = cfg.min_vote_interval_ms, cfg.max_vote_interval_ms
        return self._now + low + self._rng.randrange(high - low)

    def _is_taking_leadership(self) -> bool:
        """``isTakingLeadership`` (section 2.5), for any transferee.

        Deviation (section 6.6 quirk not kept): DLedger also requires self to be in
        ``preferredLeaderIds``, so a manual transfer to another node campaigns with the normal
        back-off and races the old leader's own campaign. Here every transferee uses the short
        take-leadership back-off and rule 9, so manual transfers succeed as reliably as
        preferred-leader ones. Neither affects safety (rule 9 only refuses votes).
        """
        return self.term_to_take_leadership == self.term

    # ================================================================== maintainer (section 2)
    def _maintain_as_leader(self) -> None:
        """Section 2.3: a heartbeat round when the last one is older than the interval."""
        if self._heartbeat_round is not None:
            return
        if self._now - self._last_send_heartbeat_ms > self.config.heart_beat_time_interval_ms:
            self._last_send_heartbeat_ms = self._now
            self._send_heartbeats()

    def _maintain_as_follower(self) -> None:
        """Section 2.4: no heartbeat for leak x interval makes a follower a candidate."""
        cfg = self.config
        self._check_push_gap()
        timeout = cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
        if self._now - self._last_leader_heartbeat_ms > max(
            timeout, 2 * cfg.heart_beat_time_interval_ms
        ):
            _log.info("%s: heartbeat timeout in term %d", cfg.self_id, self.term)
            self._change_role_to_candidate(self.term)

    def _maintain_as_candidate(self) -> None:
        """Section 2.5: the timer gate, the term choice, then a canvass.

        Only a voter of the configuration in effect campaigns: a learner waits to be promoted,
        and a removed node (its log holds the change that removed it) never starts an election.

        A node campaigns only in a term above that of its configuration's CONFIG_CHANGE entry.
        DLedger lets a candidate campaign again in the term it is in; with membership changes
        that can elect a second leader of a term: the leader of term 3 adds n3, promotes it and
        removes itself, and in term 3 n0 was elected by n0 and n2 of {n0, n1, n2} while n1 and
        n3 of {n1, n2, n3} had not voted (a follower that never voted, a new member), so n3
        won term 3 too (simulation seed 1715). Single-server changes keep adjacent
        configurations overlapping, not configurations several changes apart; a new term for
        every election after a change (as Raft always does) closes it: a candidate without
        that entry has an older log than the voters that hold it.
        """
        if self._vote_round is not None:
            return
        if not self._may_campaign():
            if self._need_increase_term_immediately:  # it heard a higher term: take it, no vote
                self._need_increase_term_immediately = False
                if self.known_max_term_in_group > self.term:
                    self._next_term()
            return
        if (
            self._now < self._next_time_to_request_vote_ms
            and not self._need_increase_term_immediately
        ):
            return
        if (
            self.last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT
            or self._need_increase_term_immediately
            or self.term <= self._members.effective.term
        ):
            term = self._next_term()
            self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        else:
            term = self.term
        if self._need_increase_term_immediately:
            # Step 3: after a forced bump do not vote now; back off randomly.
            self._next_time_to_request_vote_ms = self._get_next_time_to_request_vote()
            self._need_increase_term_immediately = False
            return
        self._start_vote_round(term)

    # ================================================================== voting (section 3)
    def _start_vote_round(self, term: int) -> None:
        cfg = self.config
        round_ = _VoteRound(
            term=term,
            deadline_ms=self._now
            + cfg.vote_wait_ms
            + self._rng.randrange(cfg.max_vote_interval_ms),
            waiting=set(),
            known_max_term=term,
        )
        self._vote_round = round_
        end_index, end_term = self.last_index, self.last_term
        requests = []
        for peer in self._other_voters():
            rid = self._rid()
            round_.waiting.add(rid)
            requests.append(
                VoteRequest(
                    cfg.group, cfg.self_id, peer, rid, term, cfg.self_id, end_index, end_term
                )
            )
        own = self._handle_vote(
            VoteRequest(
                cfg.group, cfg.self_id, cfg.self_id, 0, term, cfg.self_id, end_index, end_term
            ),
            is_self=True,
        )
        for request in requests:  # after the self-vote: it may have changed the hard state
            self._send(request)
        if self.membership.is_voter(cfg.self_id):  # else it campaigns without a vote of its own
            self._tally_vote(round_, own)
        elif not requests:
            self._decide_vote_round(round_)

    def _handle_vote_rpc(self, req: VoteRequest) -> VoteResponse:
        """The server wrapper (section 3.2), then the decision table."""
        cfg = self.config
        code = ResponseCode.SUCCESS
        if req.remote_id != cfg.self_id:
            code = ResponseCode.UNKNOWN_MEMBER
        elif req.group != cfg.group:
            code = ResponseCode.UNKNOWN_GROUP
        if code is not ResponseCode.SUCCESS:
            return VoteResponse(
                cfg.group, cfg.self_id, req.local_id, req.rid, self.term, VoteResult.UNKNOWN, code
            )
        return self._handle_vote(req, is_self=False)

    def _handle_vote(self, req: VoteRequest, *, is_self: bool) -> VoteResponse:
        """handleVote, section 3.3: the first matching rule wins."""
        cfg = self.config

        def reply(result: VoteResult, term: int | None = None) -> VoteResponse:
            return VoteResponse(
                cfg.group,
                cfg.self_id,
                req.local_id,
                req.rid,
                self.term if term is None else term,
                result,
            )

        my_end_index, my_end_term = self.last_index, self.last_term
        if not self.membership.is_member(req.leader_id):  # rule 1, in the configuration in effect
            return reply(VoteResult.REJECT_UNKNOWN_LEADER)
        if not is_self and req.leader_id == cfg.self_id:  # rule 2
            return reply(VoteResult.REJECT_UNEXPECTED_LEADER)
        if req.ledger_end_term < my_end_term:  # rule 3: the candidate's log is older
            return reply(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if req.ledger_end_term == my_end_term and req.ledger_end_index < my_end_index:  # rule 4
            return reply(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if req.term < self.term:  # rule 5
            return reply(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if req.term == self.term:  # rule 6
            if self.voted_for is not None and self.voted_for != req.leader_id:
                if self.leader_id is not None:
                    return reply(VoteResult.REJECT_ALREADY_HAS_LEADER)
                return reply(VoteResult.REJECT_ALREADY_VOTED)
        else:  # rule 7: req.term > currTerm: step down now, adopt the term on the next tick
            old_term = self.term
            self._adopt_higher_term(req.term)
            return reply(VoteResult.REJECT_TERM_NOT_READY, old_term)
        if req.term < my_end_term:  # rule 8
            return reply(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, my_end_term)
        if (  # rule 9: only while this node is taking over leadership (see _is_taking_leadership)
            not is_self
            and self._is_taking_leadership()
            and req.ledger_end_term == my_end_term
            and my_end_index >= req.ledger_end_index
        ):
            return reply(VoteResult.REJECT_TAKING_LEADERSHIP)
        refusal = self._rebuilding_refusal(req) if self._rebuilding else None
        if refusal is not None:
            return reply(refusal)
        self._set_vote_for(req.leader_id)  # rule 10: persisted before the reply leaves
        return reply(VoteResult.ACCEPT)

    def _forget_peers(self) -> None:
        """Reset what a blank or rebuilding node has heard from its peers.

        ``_heard_terms``: the highest term each peer has shown since this node started;
        ``_heard_logs``: each peer's last reported (ledger end term, ledger end index);
        ``_vote_floor``: it votes only in terms above this (set once every peer was heard).
        """
        self._heard_terms: dict[str, int] = {}
        self._heard_logs: dict[str, tuple[int, int]] = {}
        self._vote_floor: int | None = None

    def _note_peer(self, message: Message) -> None:
        """A blank or rebuilding node keeps what peers show of their terms and logs.

        A blank node learns that the group has a log (so it may have been part of it and have
        forgotten votes and entries) from a push, which only a leader with a log sends, or from a
        candidate with entries; from then on it is rebuilding. Peers of a new cluster, all
        empty, show neither, and vote as Raft says.
        """
        peer = message.local_id
        self._heard_terms[peer] = max(self._heard_terms.get(peer, -1), message.term)
        if isinstance(message, VoteRequest):
            self._heard_logs[peer] = (message.ledger_end_term, message.ledger_end_index)
        if not self._rebuilding and (
            isinstance(message, PushEntryRequest)
            or (isinstance(message, VoteRequest) and message.ledger_end_index >= 0)
        ):
            _log.info(
                "%s: started with an empty log in a group that has a log; it votes for "
                "candidates with entries once it has caught up with a leader",
                self.config.self_id,
            )
            self._rebuilding = True
            self._hard_state_dirty = True

    def _rebuilding_refusal(self, req: VoteRequest) -> VoteResult | None:
        """Why a node that may have forgotten its votes and log refuses ``req`` (None: it may vote).

        Not in DLedger, which has no notion of a lost disk. Raft assumes a voter remembers its
        vote in each term and holds every entry it acknowledged; a node started with an empty
        disk may have voted in this term, or held the second copy of a committed entry, before.
        So it votes only once every peer has shown its term and asked for votes with its log:
        for a term above the highest term any peer had shown when the last of them was first
        heard (the vote floor: a vote it forgot was for a term some peer had reached, and
        terms only grow), and for a log at least as up to date as every peer's (a committed entry it
        forgot is on a peer, and the candidate's log then holds it, as Raft's election
        restriction argues for a voter holding it). A new cluster, where every node starts
        empty, elects this way; a rebuilt node votes normally once it has caught up.

        A candidate behind a peer's log is told REJECT_SMALL_LEDGER_END_INDEX, so it backs off
        and lets the longer log win, as DLedger's candidates do; so is a candidate while some
        peer has not been heard yet (a higher term would not change the answer: issue 27, a
        replica restarted with a new peer list ran its term up in a loop because a blank
        member that the old-list replica never spoke to refused it as ALREADY_VOTED, and every
        leader that heard its term stepped down). A term at or below the vote floor is told
        REJECT_ALREADY_VOTED, which sends the candidate on to a higher term.
        """
        peers = self._other_voters()
        if self._vote_floor is None:
            if any(p not in self._heard_terms for p in peers):
                return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
            self._vote_floor = max(self._heard_terms.values(), default=-1)
        if req.term <= self._vote_floor:
            return VoteResult.REJECT_ALREADY_VOTED
        if any(p not in self._heard_logs for p in peers):
            return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
        candidate_log = (req.ledger_end_term, req.ledger_end_index)
        if any(candidate_log < self._heard_logs[p] for p in peers):
            return VoteResult.REJECT_SMALL_LEDGER_END_INDEX
        return None

    def _on_vote_response(self, resp: VoteResponse) -> None:
        round_ = self._vote_round
        if round_ is None or resp.rid not in round_.waiting:
            return  # a late answer to a decided round
        round_.waiting.discard(resp.rid)
        self._tally_vote(round_, resp)

    def _tally_vote(self, round_: _VoteRound, resp: VoteResponse | None) -> None:
        """Section 3.4; ``None`` is a request that failed (timeout or network error)."""
        if resp is not None:
            result = resp.result
            if result is not VoteResult.UNKNOWN:
                round_.valid_num += 1
            if result is VoteResult.ACCEPT:
                round_.accepted_num += 1
            elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
                round_.already_has_leader = True
            elif result in (
                VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
                VoteResult.REJECT_EXPIRED_VOTE_TERM,
            ):
                round_.known_max_term = max(round_.known_max_term, resp.term)
            elif result in (
                VoteResult.REJECT_EXPIRED_LEDGER_TERM,
                VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
            ):
                round_.bigger_ledger_num += 1
            elif result is VoteResult.REJECT_TERM_NOT_READY:
                round_.not_ready_term_num += 1
            elif result is VoteResult.REJECT_UNKNOWN_LEADER:
                round_.unknown_num += 1
        round_.all_num += 1
        members = self.membership
        released = (
            round_.already_has_leader
            or members.is_quorum(round_.accepted_num)
            or members.is_quorum(round_.accepted_num + round_.not_ready_term_num)
            or round_.all_num == len(members.voters)
        )
        if released and self._vote_round is round_:
            self._decide_vote_round(round_)

    def _decide_vote_round(self, round_: _VoteRound) -> None:
        """Section 3.5, in order; the first matching row wins.

        Deviations that keep a candidate that cannot win from raising the group's term in a
        loop (issue 27: a blank replica at a new address took its term from 7 to 359 while the
        other replicas still had the old peer list, and every leader that heard its term
        stepped down; 78 s of livelock):

        - a peer that answers REJECT_UNKNOWN_LEADER does not count this node as a member and
          will refuse it in every term, so it counts as a refusal that a new term cannot change,
          like a bigger ledger (DLedger counts it as a valid vote not given, which moves the
          candidate to the next term every round);
        - a blank or rebuilding candidate that a peer refused because its log is behind
          (``_behind_a_peers_log``) waits in its term instead of moving to the next one.
        """
        self._vote_round = None
        if self.role is not Role.CANDIDATE or self.term != round_.term:
            return  # the node moved on while the round ran
        cfg = self.config
        members = self.membership
        result: ParseResult
        if self._refused_by_a_quorum(round_):
            result = ParseResult.WAIT_TO_REVOTE
        elif round_.known_max_term > round_.term:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self._next_time_to_request_vote_ms = self._get_next_time_to_request_vote()
            self._change_role_to_candidate(round_.known_max_term)
        elif round_.already_has_leader:
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote_ms = (
                self._get_next_time_to_request_vote()
                + cfg.heart_beat_time_interval_ms * cfg.max_heart_beat_leak
            )
        elif not members.is_quorum(round_.valid_num):
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote_ms = self._get_next_time_to_request_vote()
        elif not members.is_quorum(
            round_.valid_num - round_.bigger_ledger_num - round_.unknown_num
        ):
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote_ms = (
                self._get_next_time_to_request_vote() + cfg.max_vote_interval_ms
            )
        elif members.is_quorum(round_.accepted_num):
            result = ParseResult.PASSED
        elif members.is_quorum(round_.accepted_num + round_.not_ready_term_num):
            result = ParseResult.REVOTE_IMMEDIATELY
        elif self._behind_a_peers_log(round_):
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote_ms = (
                self._get_next_time_to_request_vote() + cfg.max_vote_interval_ms
            )
        else:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self._next_time_to_request_vote_ms = self._get_next_time_to_request_vote()
        self.last_parse_result = result
        _log.debug(
            "%s: vote round term %d: accepted %d not-ready %d valid %d bigger %d leader %s -> %s",
            cfg.self_id,
            round_.term,
            round_.accepted_num,
            round_.not_ready_term_num,
            round_.valid_num,
            round_.bigger_ledger_num,
            round_.already_has_leader,
            result.name,
        )
        if result is ParseResult.PASSED:
            self._change_role_to_leader(round_.term)

    def _refused_by_a_quorum(self, round_: _VoteRound) -> bool:
        """So many voters answered REJECT_UNKNOWN_LEADER that the others cannot make a quorum:
        their configuration no longer (or does not yet) count this node, so it stops campaigning.

        A replica removed while it was cut off never receives the entry that removes it (the
        leader no longer sends to it); before this it asked for votes every back-off for ever,
        refused each time (issue 27). Those voters hold a later configuration than this node's
        log, so one of them, not this node, can be elected; this node still votes. It campaigns
        again only after a leader contacts it (``_change_role_to_follower``: it was added again,
        or it is shown the log that removes it) or after a restart, and says so once.
        """
        members = self.membership
        if members.is_quorum(len(members.voters) - round_.unknown_num):
            return False
        self.refused_as_non_member = True
        _log.warning(
            "%s: %d of the voters %s refused it as not a member of the group: it was removed "
            "(and missed its removal) or is not added yet; it stops asking for votes until a "
            "leader contacts it. Stop this replica, or add it with `ledgermq admin replica-add`",
            self.config.self_id, round_.unknown_num, ",".join(members.voters),
        )  # fmt: skip
        return True

    def _behind_a_peers_log(self, round_: _VoteRound) -> bool:
        """A blank or rebuilding candidate has just been shown that the group has a longer log.

        That peer will refuse it in every term (it holds entries this node lacks), so moving to
        a new term cannot help it win; the new terms would only reach the nodes that hear it
        (a leader that hears a higher term steps down). It stays a candidate in its term (its
        rounds may still pass there, as before), with the longer back-off, and learns
        the group's term from the group (a heartbeat, a push, a vote request or a refusal with
        a higher term) until it has caught up with a leader (``_check_rebuilt``). A group of
        replicas that are all blank shows no longer log, so it elects as Raft says: no
        fallback is needed for it.
        """
        return (self._blank or self._rebuilding) and round_.bigger_ledger_num > 0

    # ================================================================== heartbeats (section 4)
    def _send_heartbeats(self) -> None:
        cfg = self.config
        targets = self._replication_targets()
        own = 1 if self.membership.is_voter(cfg.self_id) else 0
        round_ = _HeartbeatRound(
            term=self.term,
            deadline_ms=self._now + cfg.heart_beat_time_interval_ms,
            waiting={},
            size=len(targets) + 1,
            succ_num=own,
        )
        self._heartbeat_round = round_
        for peer in targets:
            rid = self._rid()
            round_.waiting[rid] = peer
            self._send(HeartBeatRequest(cfg.group, cfg.self_id, peer, rid, self.term, cfg.self_id))
        self._maybe_decide_heartbeat_round(round_)

    def _handle_heartbeat_rpc(self, req: HeartBeatRequest) -> HeartBeatResponse:
        """The server wrapper, then handleHeartBeat (section 4.4)."""
        cfg = self.config

        def reply(code: ResponseCode, term: int = -1) -> HeartBeatResponse:
            return HeartBeatResponse(cfg.group, cfg.self_id, req.local_id, req.rid, code, term)

        if req.remote_id != cfg.self_id:
            return reply(ResponseCode.UNKNOWN_MEMBER, self.term)
        if req.group != cfg.group:
            return reply(ResponseCode.UNKNOWN_GROUP, self.term)
        # Deviation: DLedger answers UNKNOWN_MEMBER to a leader missing from its peer list.
        # With membership changes a replica whose log is behind may not know yet a member that
        # was added and then elected; refusing it would keep that replica from ever receiving
        # the entries that make it known (Raft: a server accepts any leader of a term >= its
        # own, without consulting its configuration, dissertation 4.1). Being elected took a
        # majority of a configuration in the log, so following it is safe.
        if req.leader_id == cfg.self_id:
            return reply(ResponseCode.UNEXPECTED_MEMBER, self.term)
        if req.term < self.term:
            return reply(ResponseCode.EXPIRED_TERM, self.term)
        if req.term == self.term:
            if self.leader_id is None:
                self._change_role_to_follower(req.term, req.leader_id)
                return reply(ResponseCode.SUCCESS)
            if req.leader_id == self.leader_id:
                self._last_leader_heartbeat_ms = self._now
                return reply(ResponseCode.SUCCESS)
            _log.warning(
                "%s: [BUG] heartbeat from %s in term %d but the leader is %s",
                cfg.self_id,
                req.leader_id,
                req.term,
                self.leader_id,
            )
            return reply(ResponseCode.INCONSISTENT_LEADER)
        self._adopt_higher_term(req.term)
        return reply(ResponseCode.TERM_NOT_READY)

    def _on_heartbeat_response(self, resp: HeartBeatResponse) -> None:
        if (
            resp.code is ResponseCode.EXPIRED_TERM
            and resp.term > self.term
            and not self.config.legacy_heartbeat_term_check
            and self.role is Role.LEADER
        ):
            # Version B (section 4.2): any higher term makes the leader step down, also when
            # the answer arrives after the round was decided.
            self._adopt_higher_term(resp.term)
            return
        if self.role is Role.LEADER and resp.local_id in self._dispatchers:
            # peersLiveTable is updated by every answer, also one after the round was decided
            # (DLedger's response callbacks run regardless of the latch; the preferred-leader
            # check depends on it).
            self.peers_live[resp.local_id] = resp.code is not ResponseCode.NETWORK_ERROR
            if resp.code is not ResponseCode.NETWORK_ERROR:
                self._heard_ms[resp.local_id] = self._now
            if resp.code is ResponseCode.SUCCESS:
                self._reprobe(resp.local_id)
        round_ = self._heartbeat_round
        if round_ is None or resp.rid not in round_.waiting:
            return
        peer = round_.waiting.pop(resp.rid)
        self._tally_heartbeat(round_, peer, resp.code, resp.term)

    def _tally_heartbeat(
        self, round_: _HeartbeatRound, peer: str, code: ResponseCode, term: int
    ) -> None:
        voter = self.membership.is_voter(peer)  # a learner's answer never counts for the quorum
        if code is ResponseCode.SUCCESS:
            round_.succ_num += voter
        elif code is ResponseCode.EXPIRED_TERM:
            round_.max_term = term  # a plain set, as DLedger (last writer wins)
        elif code is ResponseCode.INCONSISTENT_LEADER:
            round_.inconsistent_leader = round_.inconsistent_leader or voter
        elif code is ResponseCode.TERM_NOT_READY:
            round_.not_ready_num += voter
        self.peers_live[peer] = code is not ResponseCode.NETWORK_ERROR
        round_.all_num += 1
        self._maybe_decide_heartbeat_round(round_)

    def _maybe_decide_heartbeat_round(self, round_: _HeartbeatRound) -> None:
        members = self.membership
        if (
            members.is_quorum(round_.succ_num)
            or members.is_quorum(round_.succ_num + round_.not_ready_num)
            or round_.all_num >= round_.size
        ):
            self._decide_heartbeat_round(round_)

    def _decide_heartbeat_round(self, round_: _HeartbeatRound) -> None:
        """Section 4.2, version B by default (version A with ``legacy_heartbeat_term_check``)."""
        self._heartbeat_round = None
        if self.role is not Role.LEADER or self.term != round_.term:
            return
        cfg = self.config
        lease_ms = cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms
        if not cfg.legacy_heartbeat_term_check and round_.max_term > round_.term:
            self._adopt_higher_term(round_.max_term)
            return
        members = self.membership
        if members.is_quorum(round_.succ_num):
            self._last_succ_heartbeat_ms = self._now
            self._check_learners()
            return
        if members.is_quorum(round_.succ_num + round_.not_ready_num):
            self._last_send_heartbeat_ms = NEVER  # resend on the next tick
        elif round_.max_term > round_.term:
            self._adopt_higher_term(round_.max_term)
        elif round_.inconsistent_leader:
            self._change_role_to_candidate(round_.term)
        elif self._now - self._last_succ_heartbeat_ms > lease_ms:
            _log.info("%s: no quorum for %d ms, stepping down", cfg.self_id, lease_ms)
            self._change_role_to_candidate(round_.term)

    def _expire_rounds(self) -> None:
        """Requests unanswered past their deadline count as failed (the latch timed out)."""
        vote = self._vote_round
        if vote is not None and self._now >= vote.deadline_ms:
            while vote.waiting and self._vote_round is vote:
                vote.waiting.pop()
                self._tally_vote(vote, None)
            if self._vote_round is vote:
                self._decide_vote_round(vote)
        beat = self._heartbeat_round
        if beat is not None and self._now >= beat.deadline_ms:
            self._decide_heartbeat_round(beat)

    # ================================================================== leadership transfer (6)
    def _transfer_refusal(self, to: str, term: int | None) -> ResponseCode | None:
        """The leader's checks of section 6.2, then 6.3's pending-transfer check."""
        cfg = self.config
        if not self.membership.is_voter(to):  # a learner or a non-member cannot lead
            return ResponseCode.UNKNOWN_MEMBER
        if term is not None and term != self.term:
            return ResponseCode.INCONSISTENT_TERM
        if self.role is not Role.LEADER:
            return ResponseCode.NOT_LEADER
        if to != cfg.self_id and self._lag_of(to) >= cfg.max_leadership_transfer_wait_index:
            return ResponseCode.FALL_BEHIND_TOO_MUCH
        if self.transferee is not None:
            return ResponseCode.LEADER_TRANSFERRING
        return None

    def _lag_of(self, peer: str) -> int:
        """``ledgerEndIndex - peerWaterMark`` (section 6.1): entries the peer is missing."""
        return self.last_index - self._dispatchers[peer].match_index

    def set_preferred_leader_ids(self, ids: Sequence[str]) -> None:
        """Change ``preferredLeaderIds`` while running (the broker's live
        ``preferredLeaderId``); the next ``checkPreferredLeader`` uses it. Ids that are not
        members are ignored there, as at start."""
        self._check_not_in_ready()
        self.config = dataclasses.replace(self.config, preferred_leader_ids=tuple(ids))

    @property
    def taking_leadership(self) -> bool:
        """This replica was asked to take the leadership over and has not answered yet."""
        return self._take is not None

    def hears_from(self, peer: str) -> bool:
        """Leader: ``peer`` answered a heartbeat within the lease (``max_heart_beat_leak``
        heartbeat intervals) and its last answer was not a network error.

        DLedger's ``peersLiveTable`` alone turns false only on a NETWORK_ERROR answer; a peer
        that is stopped, frozen or cut off without its connection failing stayed "live" for
        ever, and the preferred-leader check handed the leadership to it: appends were refused
        (LEADER_TRANSFERRING) until the transfer timed out, 2.2 s (issue 27).
        """
        return bool(self.peers_live.get(peer)) and (
            self._now - self._heard_ms.get(peer, NEVER) <= self._lease_ms()
        )

    def _lease_ms(self) -> int:
        cfg = self.config
        return cfg.max_heart_beat_leak * cfg.heart_beat_time_interval_ms

    def _check_preferred_leader(self) -> None:
        """``checkPreferredLeader`` (section 6.1), every ``check_preferred_leader_interval_ms``.

        Deviations, both for availability (appends are refused while a transfer runs): the
        preferred replica must be heard from now (``hears_from``, not only never have failed),
        and one whose last transfer failed (it refused: it is stopping, or it did not answer)
        is not asked again for ``_PREFERRED_RETRY_CHECKS`` checks.
        """
        cfg = self.config
        if self._now < self._next_preferred_check_ms:
            return
        self._next_preferred_check_ms = self._now + cfg.check_preferred_leader_interval_ms
        preferred = cfg.preferred_leader_ids
        if not preferred or self.transferee is not None or cfg.self_id in preferred:
            return
        backoff = _PREFERRED_RETRY_CHECKS * cfg.check_preferred_leader_interval_ms
        live = [
            p
            for p in preferred
            if self.membership.is_voter(p)
            and self.hears_from(p)
            and self._now - self._preferred_refused_ms.get(p, NEVER) >= backoff
        ]
        if live and self._lag_of(live[0]) < cfg.max_leadership_transfer_wait_index:
            self.transfer_leadership(live[0], self.term)

    def _expire_transfer(self) -> None:
        """The leader's transfer RPC timed out: leadership did not move in time.

        A leader whose transferee has gone silent (``hears_from``) ends the transfer at once
        with NETWORK_ERROR instead of refusing appends until the deadline (2.2 s by default):
        a replica that stops or is cut off will not take over.
        """
        transfer = self._transfer
        if transfer is None:
            return
        if self._now >= transfer.deadline_ms:
            self._finish_transfer(ResponseCode.TIMEOUT)
        elif (
            self.role is Role.LEADER
            and self.term == transfer.term
            and self._now - transfer.started_ms > self._lease_ms()
            and not self.hears_from(transfer.transferee)
        ):
            self._finish_transfer(ResponseCode.NETWORK_ERROR)

    def _on_transfer_response(self, resp: LeadershipTransferResponse) -> None:
        transfer = self._transfer
        if transfer is None or resp.rid != transfer.rid or resp.local_id != transfer.transferee:
            return
        self._finish_transfer(resp.code)

    def _finish_transfer(self, code: ResponseCode) -> None:
        """Section 6.3 step 4: clear ``transferee`` if leadership did not move."""
        transfer = self._transfer
        assert transfer is not None
        self._transfer = None
        if self.role is Role.LEADER and self.term == transfer.term:
            self.transferee = None
            if code is not ResponseCode.SUCCESS:
                self._preferred_refused_ms[transfer.transferee] = self._now
        _log.info(
            "%s: leadership transfer to %s in term %d: %s",
            self.config.self_id,
            transfer.transferee,
            transfer.term,
            code.name,
        )
        self._transfer_results.append(
            TransferResult(transfer.transfer_id, transfer.transferee, transfer.term, code)
        )

    def _handle_take_leadership_rpc(self, req: LeadershipTransferRequest) -> None:
        """The transferee branch of section 6.2; the answer waits for the outcome (6.5)."""
        cfg = self.config
        code: ResponseCode | None = None
        if req.remote_id != cfg.self_id:
            code = ResponseCode.UNKNOWN_MEMBER
        elif req.group != cfg.group:
            code = ResponseCode.UNKNOWN_GROUP
        elif req.transferee_id != cfg.self_id:
            code = ResponseCode.UNEXPECTED_ARGUMENT
        elif req.transfer_id != self.leader_id:
            code = ResponseCode.INCONSISTENT_LEADER
        elif self._take is not None:
            if self._take.request == req:
                return  # the network duplicated it; one answer will go out
            code = ResponseCode.LEADER_TRANSFERRING
        if code is not None:
            self._answer_take(req, code)
            return
        self._take = _TakeLeadership(req, self._now + cfg.leadership_transfer_wait_timeout_ms)
        self._poll_take_leadership()

    def _poll_take_leadership(self) -> None:
        """Section 6.2's wait: take over once the log reaches the leader's end, or give up."""
        take = self._take
        if take is None or take.target_term >= 0:
            return
        req = take.request
        if self.term != req.term:
            code = ResponseCode.INCONSISTENT_TERM
        elif self.last_index >= req.take_leadership_ledger_index:
            self._take_leadership(take)
            return
        elif self._now >= take.catch_up_deadline_ms:
            code = ResponseCode.TAKE_LEADERSHIP_FAILED
        else:
            return
        self._take = None
        self._answer_take(req, code)

    def _take_leadership(self, take: _TakeLeadership) -> None:
        """``handleTakeLeadership`` (section 6.4), then the term bump without waiting a tick.

        DLedger bumps the term on the maintainer's next tick; a heartbeat of the old leader that
        arrives first makes the transferee a follower and fails the transfer. Running that
        tick's work now closes the window; it is the same state change, earlier.
        """
        target = take.request.term + 1
        take.target_term = target
        self.term_to_take_leadership = target
        self._adopt_higher_term(target)
        if self.config.enable_leader_elector:
            self._maintain_as_candidate()

    def _check_take_leadership(self, term: int) -> None:
        """``TakeLeadershipTask.check`` (section 6.5), on every role change."""
        take = self._take
        if take is None or take.target_term < 0:
            return
        target = take.target_term
        if term > target:
            code = ResponseCode.EXPIRED_TERM
        elif term == target and self.role is Role.LEADER:
            code = ResponseCode.SUCCESS
        elif term == target and self.role is Role.CANDIDATE:
            return  # still campaigning
        elif self.role is Role.FOLLOWER:
            code = ResponseCode.TAKE_LEADERSHIP_FAILED
        else:
            code = ResponseCode.INTERNAL_ERROR
        self.term_to_take_leadership = -1
        self._take = None
        self._answer_take(take.request, code)

    def _answer_take(self, req: LeadershipTransferRequest, code: ResponseCode) -> None:
        cfg = self.config
        self._send(
            LeadershipTransferResponse(
                cfg.group, cfg.self_id, req.local_id, req.rid, self.term, code
            )
        )

    # ================================================================== leader replication
    def _start_leading(self) -> None:
        """A new leader: fresh dispatchers, and a NOOP of its own term (Raft section 5.4.2)."""
        end = self._log.last_index
        self._dispatchers = {
            peer: _Dispatcher(peer, compare_index=end, write_index=end + 1)
            for peer in self._replication_targets()
        }
        self._learner_rounds.clear()
        self._self_match_index = self._log.stable_end if self._log.last_term == self.term else -1
        self._term_first_index = end + 1
        self._log.append([NewEntry(end + 1, self.term, b"", NOOP_TYPE)])
        self._maybe_advance_commit()

    def _stop_leading(self) -> None:
        """Fail every waiting proposal: their outcome is unknown (section 9 #8)."""
        self._finish_proposals(list(self._proposals.values()), ResponseCode.TERM_CHANGED)
        self._dispatchers.clear()

    def _expire_proposals(self) -> None:
        expired = [p for p in self._proposals.values() if self._now >= p.deadline_ms]
        self._finish_proposals(expired, ResponseCode.WAIT_QUORUM_ACK_TIMEOUT)

    def _finish_proposals(self, proposals: list[_Proposal], code: ResponseCode) -> None:
        for proposal in proposals:
            del self._proposals[proposal.proposal_id]
            self._completed.append(
                ProposalResult(
                    proposal.proposal_id,
                    proposal.first_index,
                    proposal.last_index,
                    proposal.term,
                    code,
                )
            )

    def _replicate(self) -> None:
        for dispatcher in self._dispatchers.values():
            self._dispatch(dispatcher)

    def _push(
        self,
        d: _Dispatcher,
        kind: PushKind,
        index: int,
        *,
        compare_term: int = -1,
        entries: Sequence[LogEntry] = (),
        membership: MembershipRecord | None = None,
    ) -> int:
        cfg = self.config
        rid = self._rid()
        self._send(
            PushEntryRequest(
                cfg.group,
                cfg.self_id,
                d.peer,
                rid,
                self.term,
                cfg.self_id,
                kind,
                index,
                self.committed_index,
                compare_term,
                entries,
                membership,
            )
        )
        return rid

    def _dispatch(self, d: _Dispatcher) -> None:
        """One ``doWork`` of an EntryDispatcher (spec-replication-storage section 3.5)."""
        cfg = self.config
        now = self._now
        begin = self._log.begin_index
        if d.state is PushKind.APPEND and begin > 0 and d.write_index < begin:
            # The entries this follower needs next were deleted by retention here.
            d.state = PushKind.COMPARE
            d.compare_index = -1
            d.in_flight.clear()
            d.control_rid = None
        if d.state is not PushKind.APPEND:
            if d.control_rid is not None and now - d.control_sent_ms < cfg.max_push_timeout_ms:
                return
            if now < d.retry_at_ms:
                return
            d.compare_index = min(d.compare_index, self._log.stable_end)
            if d.state is PushKind.COMPARE and begin > 0 and d.compare_index < begin:
                # Nothing below our begin can be compared: rebuild the follower from our oldest
                # entry (DLedger: truncateIndex = ledgerBeginIndex, the entry goes in the push).
                d.state = PushKind.TRUNCATE
                d.match_index = min(d.match_index, begin - 1)
            d.restarting = False
            if d.state is PushKind.COMPARE:
                term = self._log.term_at(d.compare_index)
                d.control_rid = self._push(d, PushKind.COMPARE, d.compare_index, compare_term=term)
            elif begin > 0 and d.match_index + 1 < begin:
                first = self._log.stable_entries(begin, 1)[:1]
                d.restarting = True
                d.control_rid = self._push(
                    d,
                    PushKind.TRUNCATE,
                    begin,
                    entries=tuple(first),
                    membership=self._members.committed,
                )
            else:
                d.control_rid = self._push(d, PushKind.TRUNCATE, d.match_index + 1)
            d.control_sent_ms = now
            return
        if d.in_flight:
            oldest = min(sent for _, _, sent in d.in_flight.values())
            if now - oldest >= cfg.max_push_timeout_ms:
                # Section 3.10, G2 go-back-N: resend from the first unacknowledged entry.
                d.in_flight.clear()
                d.write_index = d.match_index + 1
                if begin > 0 and d.write_index < begin:
                    self._dispatch(d)  # what it needs was deleted meanwhile: rebuild it
                    return
        sent_any = False
        while len(d.in_flight) < cfg.max_pending_pushes and d.write_index <= self._log.stable_end:
            entries = self._log.stable_entries(d.write_index, cfg.max_push_batch_bytes)
            if not entries:
                break
            rid = self._push(d, PushKind.APPEND, d.write_index, entries=tuple(entries))
            d.in_flight[rid] = (d.write_index, len(entries), now)
            d.write_index += len(entries)
            d.last_pushed_commit = self.committed_index
            d.last_commit_push_ms = now
            d.commit_behind_since_ms = None
            sent_any = True
        if not sent_any:
            self._maybe_push_commit(d)

    def _maybe_push_commit(self, d: _Dispatcher) -> None:
        """A COMMIT push when the follower's commit index has waited ``commit_push_delay_ms``
        for an APPEND to carry it, or none went for ``commit_push_interval_ms``."""
        cfg = self.config
        now = self._now
        commit_due = False
        if d.last_pushed_commit < self.committed_index:
            if d.commit_behind_since_ms is None:
                d.commit_behind_since_ms = now
            commit_due = now - d.commit_behind_since_ms >= cfg.commit_push_delay_ms
        if commit_due or now - d.last_commit_push_ms >= cfg.commit_push_interval_ms:
            self._push(d, PushKind.COMMIT, self.committed_index)
            d.last_pushed_commit = self.committed_index
            d.last_commit_push_ms = now
            d.commit_behind_since_ms = None

    def _reprobe(self, peer: str) -> None:
        """The peer answers heartbeats but not our COMPARE / TRUNCATE: it was lost, ask again.

        Without this a follower that was down when a new leader sent its COMPARE waits a whole
        ``max_push_timeout_ms`` to be caught up. Only the single small control request is
        resent early, never a window of APPEND pushes (those may just be queued behind data).
        """
        d = self._dispatchers.get(peer)
        if (
            d is not None
            and d.state is not PushKind.APPEND
            and d.control_rid is not None
            and self._now - d.control_sent_ms >= self.config.heart_beat_time_interval_ms
        ):
            d.control_rid = None
            self._dispatch(d)

    def _on_push_response(self, resp: PushEntryResponse) -> None:
        if resp.code is ResponseCode.EXPIRED_TERM and resp.term > self.term:
            if self.role is Role.LEADER:
                self._adopt_higher_term(resp.term)
            return
        if self.role is not Role.LEADER:
            return
        d = self._dispatchers.get(resp.local_id)
        if d is None:
            return
        if resp.kind is PushKind.APPEND:
            owned = d.in_flight.pop(resp.rid, None)
            if resp.code is ResponseCode.SUCCESS and resp.term == self.term:
                if d.state is PushKind.APPEND:
                    d.match_index = max(d.match_index, resp.index + resp.count - 1)
                    d.match_rid = max(d.match_rid, resp.rid)
                    self._maybe_advance_commit()
            elif owned is not None and d.state is PushKind.APPEND:
                # The follower could not take it: find the common prefix again.
                d.state = PushKind.COMPARE
                d.compare_index = min(self._log.stable_end, max(resp.end_index, d.match_index))
                d.in_flight.clear()
                d.control_rid = None
            return
        if resp.kind is PushKind.COMMIT:
            self._on_commit_push_response(d, resp)
            return
        if resp.rid != d.control_rid:
            return
        d.control_rid = None
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.INCONSISTENT_STATE):
            # Not following us yet (NOT_FOLLOWER, TERM_NOT_READY, ...): retry a little later
            # rather than at once, which ping-ponged a request per round trip.
            d.retry_at_ms = self._now + max(1, self.config.heart_beat_time_interval_ms // 4)
            return
        if resp.kind is PushKind.COMPARE:
            if resp.code is ResponseCode.SUCCESS:
                d.match_index = d.compare_index
                d.match_rid = resp.rid
                d.state = PushKind.TRUNCATE
            elif resp.code is ResponseCode.INCONSISTENT_STATE:
                self._note_lost_entries(d, resp.end_index)
                # Section 3.6 (G2): jump to the follower's end, else skip its conflicting term.
                if resp.end_index < d.compare_index:
                    d.compare_index = resp.end_index
                elif resp.x_index >= 0:
                    d.compare_index = min(d.compare_index - 1, resp.x_index - 1)
                else:
                    d.compare_index -= 1
                d.compare_index = max(d.compare_index, -1)
            self._dispatch(d)
        elif resp.kind is PushKind.TRUNCATE:
            self._on_truncate_response(d, resp)

    def _on_truncate_response(self, d: _Dispatcher, resp: PushEntryResponse) -> None:
        if resp.code is ResponseCode.SUCCESS:
            if d.restarting:
                d.match_index = resp.index  # it holds our oldest entry now, and nothing after
                d.match_rid = resp.rid
            d.state = PushKind.APPEND
            d.write_index = d.match_index + 1
            d.in_flight.clear()
            self._maybe_advance_commit()
        else:
            # Its log ends before what we took as matched (it lost entries), or it began after
            # our oldest entry: compare again from its end.
            d.compare_index = resp.end_index
            d.match_index = min(d.match_index, resp.end_index)
            d.state = PushKind.COMPARE
        d.restarting = False
        self._dispatch(d)

    def _on_commit_push_response(self, d: _Dispatcher, resp: PushEntryResponse) -> None:
        """A follower answers a COMMIT push only when its log ends before the commit index."""
        if (
            resp.code is ResponseCode.INCONSISTENT_STATE
            and resp.term == self.term
            and resp.rid > d.match_rid
            and resp.end_index < d.match_index
        ):
            # Its log ends before what it acknowledged: it lost entries. Compare again.
            self._note_lost_entries(d, resp.end_index)
            d.state = PushKind.COMPARE
            d.compare_index = resp.end_index
            d.in_flight.clear()
            d.control_rid = None
            self._dispatch(d)

    def _note_lost_entries(self, d: _Dispatcher, end_index: int) -> None:
        """A follower's log ends before entries it acknowledged: say so once, then rebuild it."""
        if end_index >= d.match_index:
            return
        _log.warning(
            "%s: follower %s acknowledged entries up to %d but its log ends at %d (a replaced "
            "disk, a moved-aside ledger directory, or a late duplicate TRUNCATE of entries of an "
            "older term); rebuilding it from index %d",
            self.config.self_id, d.peer, d.match_index, end_index, end_index + 1,
        )  # fmt: skip
        d.match_index = end_index

    def _maybe_advance_commit(self) -> None:
        """The quorum index of the watermarks, counted only for this term's entries (5.4.2)."""
        if self.role is not Role.LEADER:
            return
        members = self.membership
        marks = []
        for voter in members.voters:  # a learner, or a leader being removed, never counts
            if voter == self.config.self_id:
                marks.append(self._self_match_index)
            elif (d := self._dispatchers.get(voter)) is not None:
                marks.append(d.match_index)
        if len(marks) < members.quorum:
            return
        candidate = quorum_index(marks, members.quorum)
        if candidate <= self.committed_index or candidate > self._log.stable_end:
            return
        if self._log.term_at(candidate) != self.term:
            return  # Raft 5.4.2: never commit an older term's entry by counting replicas
        self.committed_index = candidate
        self._commit_dirty = True
        self._check_rebuilt()
        done = [p for p in self._proposals.values() if p.last_index <= candidate]
        self._finish_proposals(done, ResponseCode.SUCCESS)
        self._commit_configurations()

    # ================================================================== follower replication
    def _handle_push(self, req: PushEntryRequest) -> None:
        """EntryHandler (spec-replication-storage section 4), with the term/leader checks."""
        cfg = self.config

        def reply(code: ResponseCode, **extra: int) -> None:
            self._respond_push(req, code, False, **extra)

        if req.remote_id != cfg.self_id:
            reply(ResponseCode.UNKNOWN_MEMBER)
            return
        if req.group != cfg.group:
            reply(ResponseCode.UNKNOWN_GROUP)
            return
        if req.term < self.term:
            reply(ResponseCode.EXPIRED_TERM)
            return
        if req.term > self.term:
            self._adopt_higher_term(req.term)  # as a higher-term heartbeat does
            reply(ResponseCode.TERM_NOT_READY)
            return
        if self.role is not Role.FOLLOWER:
            reply(ResponseCode.NOT_FOLLOWER)
            return
        if req.leader_id != self.leader_id:
            reply(ResponseCode.INCONSISTENT_LEADER)
            return
        if req.kind is PushKind.COMPARE:
            self._handle_compare(req, reply)
        elif req.kind is PushKind.TRUNCATE and req.entries:
            self._handle_restart(req, reply)
        elif req.kind is PushKind.TRUNCATE:
            self._push_buffer.clear()
            if req.index > self.last_index + 1:
                # The leader believes this log is longer than it is (it lost entries it had
                # acknowledged: a replaced disk). Nothing before req.index is verified.
                reply(ResponseCode.INCONSISTENT_STATE, end_index=self.last_index)
            else:
                self._truncate_for_leader(req.index)
                reply(ResponseCode.SUCCESS, end_index=self.last_index)
        elif req.kind is PushKind.APPEND:
            entries = req.entries
            if (
                not entries
                or entries[0].index != req.index
                or entries[-1].index != req.index + len(entries) - 1
                or entries[-1].term > req.term
            ):
                _log.warning("%s: malformed APPEND push from %s", cfg.self_id, req.leader_id)
                reply(ResponseCode.UNEXPECTED_ARGUMENT)
                return
            self._push_buffer[req.index] = req
            self._drain_push_buffer()
            self._check_push_gap()
            if len(self._push_buffer) > cfg.max_pending_pushes:
                # Too far ahead: drop the newest; the leader resends after its timeout.
                self._push_buffer.pop(max(self._push_buffer))
        self._follow_commit(req.commit_index)
        if req.kind is PushKind.COMMIT and req.commit_index > self.last_index:
            # Not in DLedger. With no traffic the leader only sends COMMIT pushes, so a follower
            # that lost entries it had acknowledged (a replaced disk) would wait for the next
            # append to be noticed; it says where its log ends and the leader decides.
            reply(ResponseCode.INCONSISTENT_STATE, end_index=self.last_index)

    def _truncate_for_leader(self, index: int) -> None:
        """Cut the log from ``index``: the leader verified everything before it."""
        # Committed entries are in every later leader's log (leader completeness), so they
        # equal this leader's: keep them when the leader, which does not know how far this
        # follower committed, asks to cut below (its xIndex skip can go that far). Refusing
        # instead sent the leader back to the same COMPARE forever (simulation seed 1414).
        cut = max(index, self.committed_index + 1)
        # Entries of the current term can only have come from this leader, after it had
        # verified everything before them: if the log ends in this term, nothing at or after
        # index diverges and the TRUNCATE is a stale or duplicated one. Truncating would
        # erase acknowledged entries (simulation seed 173: a duplicated TRUNCATE delivered
        # after the APPEND that followed it).
        if cut <= self.last_index and self.last_term != self.term:
            self._log.truncate(cut)
            if self._members.truncate(cut):
                _log.info(
                    "%s: a membership change at or after %d was truncated; in effect again: %s",
                    self.config.self_id, cut, self.membership.describe(),
                )  # fmt: skip
                self._membership_changed()
        self._verified_end = max(self._verified_end, index - 1)

    def _handle_restart(self, req: PushEntryRequest, reply: _Reply) -> None:
        """A TRUNCATE carrying the leader's oldest entry: begin the log again from it.

        DLedger's leader sends its ``ledgerBeginIndex`` entry in the TRUNCATE when the follower's
        log ends before it (its older entries were deleted by retention) and the follower rebuilds
        its files from that entry's position (``rebuildWithPos``). That entry is committed: the
        leader deletes only committed entries and keeps the newest committed one.
        """
        self._push_buffer.clear()
        first = req.entries[0]
        if len(req.entries) != 1 or first.index != req.index or first.term > req.term:
            _log.warning("%s: malformed TRUNCATE push from %s", self.config.self_id, req.leader_id)
            reply(ResponseCode.UNEXPECTED_ARGUMENT)
            return
        log = self._log
        if log.begin_index <= first.index <= self.last_index and (
            log.term_at(first.index) == first.term
        ):
            self._truncate_for_leader(first.index + 1)  # the log already holds it
        elif first.index <= self.committed_index:
            # This log began after the leader's oldest entry (its own retention went further):
            # everything it holds is committed, so the leader should compare at its end.
            reply(ResponseCode.INCONSISTENT_STATE, end_index=self.last_index)
            return
        else:
            _log.warning(
                "%s: the log [%d, %d] does not reach the leader's oldest entry %d; discarding it "
                "and beginning again from %d",
                self.config.self_id, log.begin_index, self.last_index, first.index, first.index,
            )  # fmt: skip
            log.restart(first)
            # The entries before ``first`` are gone with the configurations they made: the
            # leader sends its committed one. It is exactly the configuration at ``first`` when
            # it is older than ``first``; when it is newer, this log takes it as its base from
            # ``first`` on (a committed configuration of the group, while this log is behind
            # it), and the CONFIG_CHANGE entries after ``first`` take effect as they arrive.
            base = req.membership or self._members.committed
            self._members.reset(
                MembershipRecord(min(base.index, first.index), base.membership, base.term)
            )
            self._note_configurations([first])
            self._membership_changed()
        self._verified_end = max(self._verified_end, first.index)
        if first.index > self.committed_index:
            self.committed_index = first.index
            self._commit_dirty = True
            self._commit_configurations()
        self._respond_push(req, ResponseCode.SUCCESS, True, end_index=self.last_index)

    def _handle_compare(self, req: PushEntryRequest, reply: _Reply) -> None:
        self._push_buffer.clear()
        index = req.index
        last = self.last_index
        if index < 0:
            self._verified_end = -1
            reply(ResponseCode.SUCCESS, end_index=last)
        elif index > last:
            reply(ResponseCode.INCONSISTENT_STATE, end_index=last)
        elif index < self._log.begin_index:
            # Deleted here by retention, so committed, so equal to the leader's entry (leader
            # completeness): the logs match up to it.
            self._verified_end = index
            reply(ResponseCode.SUCCESS, end_index=last)
        elif self._log.term_at(index) == req.compare_term:
            self._verified_end = index
            reply(ResponseCode.SUCCESS, end_index=last)
        else:
            x_term = self._log.term_at(index)
            reply(
                ResponseCode.INCONSISTENT_STATE,
                end_index=last,
                x_term=x_term,
                x_index=self._log.first_index_of_term(index),
            )

    def _check_push_gap(self) -> None:
        """Answer INCONSISTENT_STATE to pushes that have not continued the log for too long.

        DLedger's EntryHandler does this (``checkAbnormalFuture``): a push ahead of the log end
        waits for the pushes before it, which may only be reordered; but when none comes within
        ``max_push_timeout_ms`` the leader believes this log is longer than it is (the follower
        restarted with an empty or shorter log: a replaced disk, a torn tail), so it is told where
        the log really ends and falls back to COMPARE. Without this the leader resent the same
        window forever and the replica stayed empty (outside testing, issue 13 item 1).
        """
        if not self._push_buffer:
            self._push_gap_since_ms = NEVER
            return
        first = min(self._push_buffer)
        if first <= self.last_index + 1:
            return
        if self._push_gap_since_ms == NEVER:
            self._push_gap_since_ms = self._now
            return
        if self._now - self._push_gap_since_ms < self.config.max_push_timeout_ms:
            return
        _log.warning(
            "%s: pushes from %s start at %d but the log ends at %d; asking the leader to compare",
            self.config.self_id, self.leader_id, first, self.last_index,
        )  # fmt: skip
        req = self._push_buffer.pop(first)
        self._push_buffer.clear()
        self._push_gap_since_ms = NEVER
        self._respond_push(req, ResponseCode.INCONSISTENT_STATE, end_index=self.last_index)

    def _drain_push_buffer(self) -> None:
        while self._push_buffer:
            first = min(self._push_buffer)
            last = self.last_index
            if first > last + 1:
                return  # wait for the entries before it
            req = self._push_buffer.pop(first)
            entries: Sequence[LogEntry] = req.entries
            # Skip what is already here, if it matches; a mismatch means COMPARE again.
            skip = 0
            begin = self._log.begin_index
            while skip < len(entries) and entries[skip].index < begin:
                skip += 1  # deleted here by retention: committed, so equal to these
            while skip < len(entries) and entries[skip].index <= last:
                if self._log.term_at(entries[skip].index) != entries[skip].term:
                    self._respond_push(req, ResponseCode.INCONSISTENT_STATE, end_index=last)
                    return
                skip += 1
            if skip < len(entries):
                self._log.append(entries[skip:])
                self._note_configurations(entries[skip:])
            self._verified_end = max(self._verified_end, entries[-1].index)
            self._respond_push(
                req, ResponseCode.SUCCESS, True, count=len(entries), end_index=self.last_index
            )

    def _respond_push(
        self,
        req: PushEntryRequest,
        code: ResponseCode,
        after_persist: bool = False,  # positional, so callers can pass **extra (all ints)
        **extra: int,
    ) -> None:
        cfg = self.config
        self._send(
            PushEntryResponse(
                cfg.group,
                cfg.self_id,
                req.local_id,
                req.rid,
                self.term,
                code,
                req.kind,
                req.index,
                **extra,
            ),
            after_persist=after_persist,
        )

    def _follow_commit(self, leader_commit: int) -> None:
        """Raft: commit = min(leaderCommit, last entry verified against this leader)."""
        candidate = min(leader_commit, self._verified_end)
        if candidate > self.committed_index:
            self.committed_index = candidate
            self._commit_dirty = True
            self._check_rebuilt()
            self._commit_configurations()

    def _check_rebuilt(self) -> None:
        """A rebuilding node that commits an entry of the current term holds every committed one.

        The leader committed that entry, so its log holds everything committed in earlier terms
        before it (leader completeness), and this log equals the leader's up to it.
        """
        if (
            (self._blank or self._rebuilding)
            and self.committed_index >= self._log.begin_index
            and self.committed_index >= 0
            and self._log.term_at(self.committed_index) == self.term
        ):
            self._blank = False
            if not self._rebuilding:
                return
            self._rebuilding = False
            self._forget_peers()
            self._hard_state_dirty = True
            _log.info("%s: caught up with the group in term %d", self.config.self_id, self.term)


class _Reply(Protocol):
    """Type of the local ``reply`` closures in ``_handle_push``."""

    def __call__(self, code: ResponseCode, **extra: int) -> None: ...
