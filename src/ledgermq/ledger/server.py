"""The ledger replica: one asyncio task owns the Raft core and drives it with the real world.

Theory of operation
-------------------
Everything that touches the core runs on the event loop, so the core needs no locks: frames
from peers and clients are decoded and stepped in as they arrive, a timer ticks the core every
``tick_interval_ms``, and after any input one drain per loop pass turns the core's ``Ready``
batches into effects, in the contract's order (``raft.ready``):

1. the hard state (term, vote) is written and fsynced on the spot: it changes only in elections;
2. truncations and entries go to the store (one ``append_batch`` per run of proposals: every
   client request proposed in one loop pass becomes one write);
3. ``messages`` go out at once (heartbeats and votes are never queued behind data);
4. ``messages_after_persist`` (a follower's acknowledgements, vote grants) go out once what they
   acknowledge is persistent: at once with ``flush=async`` (DLedger: the page cache write is
   the acknowledgement, a background flush runs every ``flushFileInterval``), after the next
   group-commit fsync with ``flush=sync``;
5. the commit index goes to the store, finished proposals and transfers answer their callers,
   role changes reach the listeners.

Group commit (``flush=sync``): the fsync runs in a worker thread while the loop keeps going;
whatever was written while one sync ran is covered by the next one, so one fsync acknowledges
every entry written before it started, and a slow disk never delays a heartbeat. A leader counts
its own log in the quorum only up to what its last sync covered (``entries_durable_to``), so an
acknowledged entry is on disk on a majority.

A failed store write is fatal for the replica: the core already believes the entries are in its
log, and going on would make the replica lie to its peers. The server stops, says why, and a
restart recovers the log from disk.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.clock import SystemClock
from ledgermq.errors import (
    LedgerDiskFullError,
    LedgerMQError,
    LedgerRequestError,
    NetworkError,
    NotLeaderError,
    ProtocolError,
    RaftError,
    StoreError,
)
from ledgermq.ledger.codec import PEER_REQUEST_CODES, decode_message, encode_entries, encode_message
from ledgermq.ledger.hard_state import read_hard_state, write_hard_state
from ledgermq.ledger.log_writer import apply_log_changes
from ledgermq.ledger.membership import ReplicaMembership
from ledgermq.ledger.metrics import LedgerMetrics
from ledgermq.ledger.peer_auth import PeerAuthenticator, authenticate
from ledgermq.ledger.requests import Metadata, decode_bodies, error_for
from ledgermq.net import Connection, PeerLink, TcpNetwork
from ledgermq.raft import (
    HardState,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    PushEntryResponse,
    RaftCore,
    ResponseCode,
    Role,
    RoleChange,
    VoteRequest,
    VoteResponse,
)
from ledgermq.store import LedgerStore
from ledgermq.store.entry_format import INDEX_UNIT_SIZE
from ledgermq.wire import LedgerRequestCode, RemotingCommand

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from ledgermq.clock import Clock
    from ledgermq.ledger.config import LedgerConfig
    from ledgermq.net import Listener, Network
    from ledgermq.raft import Message, ProposalResult, Ready, TransferResult
    from ledgermq.store import LogStore, RetentionConfig

__all__ = ["HAND_OVER_TIMEOUT_S", "AppendResult", "LedgerServer"]

_log = logging.getLogger(__name__)

_STEP_ASIDE_INTERVAL_MS: Final = 5000
"""A leader with a full disk tries to hand over its leadership at most this often."""
HAND_OVER_TIMEOUT_S: Final = 2.0
"""How long a stopping leader waits for its hand-over (``hand_over_leadership``)."""

_TRY_NEXT: Final = frozenset({ResponseCode.TAKE_LEADERSHIP_FAILED, ResponseCode.NETWORK_ERROR})
"""Transfer outcomes after which a stopping leader asks its next follower: that one refused
(it is stopping too) or could not be reached."""
_RESPONSES: Final = (VoteResponse, HeartBeatResponse, PushEntryResponse, LeadershipTransferResponse)
_GAUGE_INTERVAL_MS: Final = 1000
_MAX_REPLY_ROUTES: Final = 100_000
"""Peer requests awaiting the core's answer; the oldest are forgotten beyond this (the peer has
long since timed out and retried)."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an append landed: ``first_index`` .. ``last_index`` in ``term``.

    ``positions`` are the entries' data-log positions, filled for local appends (the broker's
    physical offsets are ``pos + 48``); empty for appends answered over the network.
    """

    first_index: int
    last_index: int
    term: int
    positions: Sequence[int] = ()


class _PendingAppend:
    __slots__ = ("conn", "future", "opaque", "started")

    def __init__(
        self,
        conn: Connection | None,
        opaque: int,
        future: asyncio.Future[AppendResult] | None,
        started: float,
    ) -> None:
        self.conn = conn
        self.opaque = opaque
        self.future = future
        self.started = started


class LedgerServer:
    """One replica of a ledger group: ``await start()``, then serve until ``close()``."""

    def __init__(
        self,
        config: LedgerConfig,
        *,
        network: Network | None = None,
        store: LogStore | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        metrics: LedgerMetrics | None = None,
    ) -> None:
        self.config = config
        self._network: Network = network or TcpNetwork(
            tls_server=config.tls_server, tls_client=config.tls_client
        )
        self._given_store = store
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()  # noqa: S311 - election jitter, not cryptography
        self._raft_config = config.raft_config()
        self.metrics = metrics or LedgerMetrics("", config.group, config.self_id)
        """This replica's series; a broker hands in one labelled with its cluster and name."""
        self._role_listeners: list[Callable[[RoleChange], None]] = []
        self._commit_listeners: list[Callable[[int], None]] = []
        self._store: LogStore | None = None
        self._core: RaftCore | None = None
        self._listener: Listener | None = None
        self._links: dict[str, PeerLink] = {}
        self._on_connect: Callable[[Connection], Awaitable[None]] | None = None
        self.membership: ReplicaMembership | None = None
        """Persisted membership and peer addresses (``ledger.membership``), once started."""
        self._last_contact: dict[str, int] = {}
        """Peer id -> monotonic ms of the last message from it (``replica-list``)."""
        self._counted_change = -1
        """Index of the committed configuration ``ledgermq_raft_membership_changes`` last
        counted (at start: the one the replica started with, which is not a change)."""
        self.peer_auth: PeerAuthenticator | None = None
        """The ledger port's gate when ``peer_secret`` is set (its ``refused`` counts)."""
        self._reply_routes: collections.OrderedDict[tuple[str, int], tuple[Connection, int]] = (
            collections.OrderedDict()
        )
        self._appends: dict[int, _PendingAppend] = {}
        self._transfers: dict[int, tuple[Connection | None, int, asyncio.Future[int] | None]] = {}
        self._stepped_aside_ms = -_STEP_ASIDE_INTERVAL_MS
        """When a full disk last made this leader hand its leadership over (``_step_aside``)."""
        self._drain_scheduled = False
        self._tick_handle: asyncio.TimerHandle | None = None
        self._next_gauges_ms = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = asyncio.Event()
        self._closing = False
        self._stopping = False
        """A planned stop has begun (``hand_over_leadership``): take no leadership over."""
        self.failure: BaseException | None = None
        """Why the server stopped on its own (a store failure), if it did."""
        # Group commit (flush=sync).
        self._sync_mode = config.flush == "sync"
        self._unsynced = False
        self._after_next_sync: list[Message] = []
        self._after_this_sync: list[Message] = []
        self._sync_task: asyncio.Task[None] | None = None
        self._flusher: concurrent.futures.ThreadPoolExecutor | None = None
        self.metrics_port: int | None = None
        self.memory_hard_state = HardState()
        """With a store handed in (tests), the term and vote live here instead of on disk."""

    # ================================================================== life cycle
    async def start(self) -> None:
        """Open (recover) the store, listen, connect to the peers and start the core."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        if self._given_store is not None:
            self._store = self._given_store
            hard_state = self.memory_hard_state
        else:
            store = await asyncio.to_thread(
                LedgerStore.open,
                cfg.store_dir,
                flush="async",  # the server syncs itself (group commit) when flush=sync
                flush_interval_ms=cfg.flush_interval_ms,
                data_segment_bytes=cfg.data_segment_bytes,
                index_segment_entries=cfg.index_segment_bytes // INDEX_UNIT_SIZE,
                max_body_bytes=cfg.max_body_bytes,
                retention=cfg.retention,
            )
            self._store = store
            hard_state = read_hard_state(cfg.store_dir)
        store_ = self._store
        members = ReplicaMembership(
            cfg.group,
            cfg.self_id,
            cfg.peers,
            cfg.store_dir if self._given_store is None else None,
        )
        members.warn_if_config_differs()
        self.membership = members
        self._core = RaftCore(
            self._raft_config,
            hard_state,
            store_,
            self._rng,
            self._clock.monotonic_ms(),
            committed_index=store_.committed_index,
            membership=members.record,
        )
        self._counted_change = self._core.membership_state.committed.index
        if self._sync_mode:
            self._flusher = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"ledgermq-sync-{cfg.self_id}"
            )
        host, port = cfg.address
        on_connect = None
        serve = self._on_frame
        if cfg.peer_secret:
            secret = cfg.peer_secret.encode()
            self.peer_auth = PeerAuthenticator(secret, cfg.group)
            on_connect = functools.partial(
                authenticate, secret=secret, group=cfg.group, who=cfg.self_id
            )
            serve = self._on_incoming_frame
        self._listener = await self._network.serve(host, port, serve)
        self._on_connect = on_connect
        self._link_members()
        if cfg.metrics_port is not None:
            self.metrics_port = self.metrics.serve(cfg.metrics_host, cfg.metrics_port)
        self.metrics.term.set(self._core.term)
        self.metrics.set_role(self._core.role.value)
        _log.info(
            "replica %s of group %s listening on %s:%d (term %d, log %d..%d, committed %d, "
            "flush=%s)",
            cfg.self_id, cfg.group, host, self._listener.port, self._core.term,
            store_.begin_index, store_.end_index, store_.committed_index, cfg.flush,
        )  # fmt: skip
        self._schedule_tick()

    async def close(self) -> None:
        """Stop serving, answer what is pending with an error, flush and close the store.

        It always ends closed, whatever fails on the way (``wait_closed`` returns): a replica
        that stops because its disk is full cannot write its last checkpoint either, and a
        close that raised there left the process idle for ever, neither serving nor exiting
        (found by the chaos suite's disk-full fault). The next start recovers from the log.
        """
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        try:
            await self._close()
        finally:
            self._closed.set()

    async def _close(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
        for link in self._links.values():
            link.close()
        for link in self._links.values():
            await link.wait_closed()
        if self._sync_task is not None:
            with contextlib.suppress(Exception):  # it reported its own failure already
                await self._sync_task
        self._fail_pending("the replica is shutting down")
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)
        if self._store is not None and self._given_store is None:
            try:
                await asyncio.to_thread(self._store.close)
            except (StoreError, OSError) as exc:
                _log.error(
                    "replica %s: closing its store failed (%s); the next start recovers the "
                    "log from disk",
                    self.config.self_id, exc,
                )  # fmt: skip
        self.metrics.close()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def add_role_listener(self, listener: Callable[[RoleChange], None]) -> None:
        """Call ``listener`` (on the loop) for every role change, as the broker needs."""
        self._role_listeners.append(listener)

    def add_commit_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(committed_index)`` (on the loop) whenever the commit index advances.

        The broker's dispatcher reads committed entries from the store when told; the entries
        up to the index are stored locally by then.
        """
        self._commit_listeners.append(listener)

    # ================================================================== state
    @property
    def core(self) -> RaftCore:
        assert self._core is not None, "start() first"
        return self._core

    @property
    def store(self) -> LogStore:
        assert self._store is not None, "start() first"
        return self._store

    def set_retention(self, retention: RetentionConfig) -> bool:
        """Apply new retention settings to this replica's store now; False when the store is
        not a ``LedgerStore`` (a test's in-memory store keeps everything anyway)."""
        store = self.store
        if not isinstance(store, LedgerStore):
            return False
        store.set_retention(retention)
        return True

    @property
    def port(self) -> int:
        assert self._listener is not None, "start() first"
        return self._listener.port

    def metadata(self) -> Metadata:
        core, store = self.core, self.store
        return Metadata(
            self.config.group,
            self.config.self_id,
            core.leader_id if core.role is not Role.CANDIDATE else None,
            core.term,
            core.role.value,
            self._member_addresses(),
            store.begin_index,
            store.end_index,
            store.committed_index,
        )

    # ================================================================== local API
    async def append(self, bodies: Sequence[bytes], channel: int = 0) -> AppendResult:
        """Append ``bodies`` as leader; returns once they are committed.

        ``channel`` is stored in every entry's ``channel`` field, for the application.

        Raises NotLeaderError / LeaderTransferringError / LeaderPendingFullError at once, or an
        error for the DLedger code the proposal ended with.
        """
        return await self.submit(bodies, channel)

    def submit(self, bodies: Sequence[bytes], channel: int = 0) -> asyncio.Future[AppendResult]:
        """``append`` in two steps: propose now, and a future that completes on commit.

        A refusal (not the leader, transfer in progress, too many pending, bad entry) raises
        here, before anything reached the log; once this returns the entries are in the
        leader's log, and a failed future means "outcome unknown" (they may still commit).
        The broker needs the difference: it gives back the queue offsets of refused sends.
        """
        self._check_bodies(bodies)
        pid = self.core.propose(bodies, channel=channel)
        assert self._loop is not None
        future: asyncio.Future[AppendResult] = self._loop.create_future()
        self._appends[pid] = _PendingAppend(None, 0, future, time.perf_counter())
        self._kick()
        return future

    async def change_membership(self, action: str, member: str, address: str = "") -> int:
        """On the leader: ``add`` ``member`` as a learner (reached at ``address``, "host:port"),
        ``remove`` it, or ``promote`` a learner; returns the change's log index once committed.

        Raises:
            NotLeaderError, LeaderTransferringError, MembershipChangeError (the request breaks
            a rule), MembershipChangeBusyError (retry shortly), OutcomeUnknownError (as an
            append: the change may still commit).
        """
        core = self.core
        if action == "add":
            pid = core.add_learner(member, address)
        elif action == "remove":
            pid = core.remove_member(member)
        elif action == "promote":
            pid = core.promote_learner(member)
        else:
            raise ValueError(f"unknown membership action {action!r}: add, remove or promote")
        assert self._loop is not None
        future: asyncio.Future[AppendResult] = self._loop.create_future()
        self._appends[pid] = _PendingAppend(None, 0, future, time.perf_counter())
        self._kick()
        return (await future).first_index

    def member_rows(self) -> list[dict[str, object]]:
        """``replica-list``: every member as this replica sees it (the leader knows lags)."""
        assert self.membership is not None
        return self.membership.rows(
            self.core, self.config.self_id, self._last_contact, self._clock.monotonic_ms()
        )

    async def transfer_leadership(self, to: str) -> int:
        """Hand the leadership of this group to ``to`` (this replica must lead); the DLedger
        response code the transfer ended with (``ResponseCode.SUCCESS``, 200, when ``to`` leads)."""
        tid = self.core.transfer_leadership(to)
        assert self._loop is not None
        future: asyncio.Future[int] = self._loop.create_future()
        self._transfers[tid] = (None, 0, future)
        self._kick()
        return await future

    async def hand_over_leadership(self, timeout_s: float = HAND_OVER_TIMEOUT_S) -> str | None:
        """Before a planned stop (SIGTERM): a leader hands the group to its most caught-up live
        follower and waits, at most ``timeout_s``, until that one leads; the new leader's id, or
        None (not a leader, a group of one, a refusal or no success in time: the stop goes on,
        and the followers elect as after any leader's loss). Without it a stopping leader costs
        its group an election timeout (1,404 ms without an acknowledged send in
        tests/broker/test_graceful_stop_processes.py before the hand-over, 2026-11-29;
        a rolling restart pays it once per group), with it the time of one transfer.

        From this call on the replica refuses to take the leadership over (a preferred replica
        being restarted was handed the group while it stopped, and the group took no writes
        for 2.2 s: issue 27); a take-over asked of it just before is waited for, and if it
        made this replica the leader, the leadership is handed on.
        """
        core = self.core
        self._stopping = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        # Asked to take over just before: see how that ends (the core has no event to await).
        while core.taking_leadership and loop.time() < deadline and not self._closing:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if self._closing or self.failure is not None or core.role is not Role.LEADER:
            return None
        for to, behind in self._transfer_targets():
            left = deadline - loop.time()
            if left <= 0 or core.role is not Role.LEADER:
                break
            _log.info(
                "replica %s of group %s stops: it hands the leadership to %s (%d entries "
                "behind)",
                self.config.self_id, self.config.group, to, behind,
            )  # fmt: skip
            try:
                code = await asyncio.wait_for(self.transfer_leadership(to), left)
            except (TimeoutError, LedgerMQError) as exc:
                _log.warning(
                    "replica %s: the hand-over to %s did not finish: %s",
                    self.config.self_id, to, exc,
                )  # fmt: skip
                return None
            if code == ResponseCode.SUCCESS:
                return to
            _log.warning(
                "replica %s: the hand-over to %s ended with %s",
                self.config.self_id, to, ResponseCode(code).name,
            )  # fmt: skip
            if code not in _TRY_NEXT:
                break
        _log.warning("replica %s stops without handing its leadership over", self.config.self_id)
        return None

    def _transfer_target(self) -> tuple[str, int] | None:
        """The follower a leader hands over to, and how many entries behind it is: the most
        caught-up of those it hears from (of all, when it hears from none); None in a group
        of one. Shared by the planned stop and the step aside of a full disk. "Hears from":
        answered a heartbeat within the lease (``RaftCore.hears_from``), so a follower that
        has stopped is not chosen."""
        targets = self._transfer_targets()
        return targets[0] if targets else None

    def _transfer_targets(self) -> list[tuple[str, int]]:
        """The voting followers (a learner cannot lead) in the order ``_transfer_target``
        prefers them: those it hears from, most caught-up first (every one, when it hears from
        none). The planned stop tries
        the next one when one refuses (it is stopping too) or cannot be reached."""
        core = self.core
        voters = core.membership
        lags = {p: lag for p, lag in core.replication_lags().items() if voters.is_voter(p)}
        heard = [p for p in sorted(lags) if core.hears_from(p)]
        others = [p for p in sorted(lags) if p not in heard]
        ordered = sorted(heard, key=lags.__getitem__) or sorted(others, key=lags.__getitem__)
        return [(p, lags[p]) for p in ordered]

    def set_preferred_leaders(self, ids: Sequence[str]) -> None:
        """Change this replica's ``preferredLeaderIds`` now (the broker's live
        ``preferredLeaderId``): as leader it hands over to the first of them that is caught up
        within a second, as DLedger does."""
        self.core.set_preferred_leader_ids(ids)
        self._kick()

    def _check_bodies(self, bodies: Sequence[bytes]) -> None:
        if not bodies:
            raise LedgerRequestError("an append needs at least one entry", 420)
        limit = self.store.max_body_bytes
        for body in bodies:
            if len(body) > limit:
                raise LedgerRequestError(
                    f"entry of {len(body)} bytes exceeds maxBodyBytes ({limit})",
                    ResponseCode.UNEXPECTED_ARGUMENT,
                )
        if self.store.disk_full:
            self._step_aside()
            raise LedgerDiskFullError(
                f"the disk of replica {self.config.self_id} is full", ResponseCode.DISK_FULL
            )

    def _step_aside(self) -> None:
        """A leader whose disk is full refuses every append, so its whole group cannot be
        written while it leads: hand the leadership to the follower furthest along
        (``_transfer_target``; at most once every ``_STEP_ASIDE_INTERVAL_MS``). A follower with
        room takes over and the group is writable again; if every disk is full the groups'
        replicas only take turns refusing. Found by the chaos suite (disk-full on the master:
        5.4 s without an acknowledgement, the master staying master)."""
        core = self.core
        now = self._clock.monotonic_ms()
        if core.role is not Role.LEADER or now - self._stepped_aside_ms < _STEP_ASIDE_INTERVAL_MS:
            return
        target = self._transfer_target()
        if target is None:
            return  # a group of one: nobody to hand over to
        self._stepped_aside_ms = now
        to, _behind = target
        _log.warning(
            "replica %s of group %s: its disk is full, so it hands the leadership to %s",
            self.config.self_id, self.config.group, to,
        )  # fmt: skip
        tid = core.transfer_leadership(to)
        self._transfers[tid] = (None, 0, None)
        self._kick()

    # ================================================================== the drive loop
    def _schedule_tick(self) -> None:
        assert self._loop is not None
        self._tick_handle = self._loop.call_later(self.config.tick_interval_ms / 1000, self._tick)

    def _tick(self) -> None:
        if self._closing:
            return
        try:
            now = self._clock.monotonic_ms()
            self.core.tick(now)
            self._drain()
            if now >= self._next_gauges_ms:
                self._next_gauges_ms = now + _GAUGE_INTERVAL_MS
                self._update_gauges()
        except Exception as exc:  # noqa: BLE001 - a bug must stop the replica, not its clock
            _log.exception("replica %s: internal error", self.config.self_id)
            self._stop_on_failure(exc)
            return
        self._schedule_tick()

    def _update_gauges(self) -> None:
        """Gauges that change with every entry are sampled, not set on the hot path."""
        core = self.core
        members = core.membership
        self.metrics.set_members(len(members.voters), len(members.learners))
        leading = core.role is Role.LEADER
        lags = core.replication_lags() if leading else {}
        self.metrics.set_replication_lags(lags, members.learners if leading else ())
        self.metrics.end_index.set(self.store.end_index)

    def _kick(self) -> None:
        """Process the core's output once this loop pass has taken in all it can."""
        if not self._drain_scheduled:
            self._drain_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if self._closing:
            return
        try:
            self._drain_ready()
        except Exception as exc:  # noqa: BLE001 - fail stop: the core's state is unknown now
            _log.exception("replica %s: internal error", self.config.self_id)
            self._stop_on_failure(exc)

    def _drain_ready(self) -> None:
        core = self.core
        replicate = False
        while True:
            if not core.has_ready():
                if not replicate:
                    break
                replicate = False
                core.replicate(self._clock.monotonic_ms())
                continue
            ready = core.ready()
            replicate = replicate or bool(ready.entries) or ready.committed_index is not None
            try:
                wrote = self._persist(ready)
            except (StoreError, OSError) as exc:
                core.advance(ready)
                self._stop_on_failure(exc)
                return
            self._send(ready.messages)
            durable = not (wrote and self._sync_mode)
            if ready.messages_after_persist:
                if self._sync_mode and self._unsynced:
                    self._after_next_sync.extend(ready.messages_after_persist)
                elif self._sync_mode and self._sync_task is not None:
                    self._after_this_sync.extend(ready.messages_after_persist)
                else:
                    self._send(ready.messages_after_persist)
            self._report(ready)
            core.advance(ready, entries_durable=durable)
        if (
            self._sync_mode
            and (self._unsynced or self._after_next_sync)
            and self._sync_task is None
        ):
            assert self._loop is not None
            self._sync_task = self._loop.create_task(self._group_commit())

    def _link_members(self) -> None:
        """A link to every member of the configuration in effect (and every configured peer)
        this replica can reach; a member added later gets one when its entry arrives."""
        members = self.membership
        assert members is not None
        wanted = set(self._raft_config.others) | set(self.core.membership.members)
        wanted.discard(self.config.self_id)
        for peer in sorted(wanted - set(self._links)):
            address = members.addresses.get(peer)
            if address is None:
                _log.warning(
                    "group %s: member %s has no known address; add it with its host:port",
                    self.config.group, peer,
                )  # fmt: skip
                continue
            self._links[peer] = PeerLink(
                self._network,
                address[0],
                address[1],
                self._on_frame,
                rng=self._rng,
                on_connect=self._on_connect,
            )

    def _persist(self, ready: Ready) -> bool:
        """Steps 1 and 2 of the contract; returns whether the log changed."""
        if ready.hard_state is not None:
            if self._given_store is None:
                write_hard_state(self.config.store_dir, ready.hard_state)
            else:
                self.memory_hard_state = ready.hard_state
        wrote = (
            ready.truncate_from is not None or ready.restart_from is not None or bool(ready.entries)
        )
        if wrote:
            apply_log_changes(self.store, ready)
            self._unsynced = True
        if ready.membership is not None:  # before a commit index past its entry
            assert self.membership is not None
            if ready.membership.committed.index > self._counted_change:
                self.metrics.membership_changes.inc()
                self._counted_change = ready.membership.committed.index
            self.membership.persist(ready.membership)
            self._link_members()
        if ready.committed_index is not None:
            self.store.set_committed_index(ready.committed_index)
        return wrote

    async def _group_commit(self) -> None:
        """flush=sync: fsync in a thread until nothing written is unsynced, releasing acks."""
        assert self._loop is not None
        store = self.store
        try:
            while (self._unsynced or self._after_next_sync) and not self._closing:
                self._unsynced = False
                self._after_this_sync = self._after_next_sync
                self._after_next_sync = []
                complete = await self._loop.run_in_executor(self._flusher, store.sync_written)
                self.metrics.syncs.inc()
                if not complete:  # a truncation raced the sync: sync again before acking
                    self._unsynced = True
                    self._after_next_sync[:0] = self._after_this_sync
                    self._after_this_sync = []
                    continue
                released, self._after_this_sync = self._after_this_sync, []
                self._send(released)
                self.core.entries_durable_to(store.flushed_index)
                self._drain()
        except (StoreError, OSError) as exc:
            self._stop_on_failure(exc)
        finally:
            self._sync_task = None
        if (self._unsynced or self._after_next_sync) and not self._closing:
            self._sync_task = self._loop.create_task(self._group_commit())

    def _stop_on_failure(self, exc: BaseException) -> None:
        if self._closing:
            return
        _log.critical(
            "replica %s stops: %s; restart it to recover from disk",
            self.config.self_id,
            exc,
        )
        self.failure = exc
        assert self._loop is not None
        self._loop.create_task(self.close())

    # ================================================================== outputs
    def _send(self, messages: Sequence[Message]) -> None:
        routes = self._reply_routes
        for m in messages:
            if isinstance(m, _RESPONSES):
                route = routes.pop((m.remote_id, m.rid), None)
                if route is None:
                    continue  # the request came from a connection that is gone
                conn, opaque = route
                if not conn.closed:
                    with contextlib.suppress(NetworkError):
                        conn.send(encode_message(m, opaque))
                continue
            link = self._links.get(m.remote_id)
            if link is not None and not link.send(encode_message(m)):
                self._unsent(m)

    def _unsent(self, m: Message) -> None:
        """A heartbeat or a take-over request that could not go out (no connection to the
        peer) is answered NETWORK_ERROR at once, as DLedger's failed RPC future is: the
        leader learns that the peer is not live (``peers_live``) and a transfer to a peer it
        cannot reach ends now instead of refusing appends until its deadline."""
        group = self.config.group
        if isinstance(m, HeartBeatRequest):
            answer: Message = HeartBeatResponse(
                group, m.remote_id, m.local_id, m.rid, ResponseCode.NETWORK_ERROR, -1
            )
        elif isinstance(m, LeadershipTransferRequest):
            answer = LeadershipTransferResponse(
                group, m.remote_id, m.local_id, m.rid, m.term, ResponseCode.NETWORK_ERROR
            )
        else:
            return
        assert self._loop is not None
        self._loop.call_soon(self._step_answer, answer)

    def _step_answer(self, answer: Message) -> None:
        if self._closing or self._core is None:
            return
        self._core.step(answer)
        self._kick()

    def _report(self, ready: Ready) -> None:
        """Step 5: answer callers, tell listeners, update metrics."""
        if ready.completed:
            self._complete_appends(ready.completed)
        if ready.transfers:
            self._complete_transfers(ready.transfers)
        core = self.core
        if ready.role_changes:
            for change in ready.role_changes:
                _log.info(
                    "replica %s is %s in term %d (leader %s)",
                    self.config.self_id, change.role.value, change.term, change.leader_id,
                )  # fmt: skip
                for listener in self._role_listeners:
                    try:
                        listener(change)
                    except Exception:  # noqa: BLE001 - a listener's bug must not stop Raft
                        _log.exception("role-change listener failed")
            self.metrics.set_role(core.role.value)
        if ready.hard_state is not None:
            self.metrics.term.set(core.term)
        if ready.committed_index is not None:
            self.metrics.commit_index.set(ready.committed_index)
            for commit_listener in self._commit_listeners:
                try:
                    commit_listener(ready.committed_index)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop Raft
                    _log.exception("commit listener failed")

    def _complete_appends(self, results: Sequence[ProposalResult]) -> None:
        now = time.perf_counter()
        metrics = self.metrics
        for r in results:
            pending = self._appends.pop(r.proposal_id, None)
            if pending is None:
                continue
            metrics.append_latency.observe(now - pending.started)
            if r.code == ResponseCode.SUCCESS:
                metrics.appended_entries.inc(r.last_index - r.first_index + 1)
            else:
                metrics.append_error(r.code.name)
            if pending.future is not None:
                if pending.future.done():
                    continue
                if r.code == ResponseCode.SUCCESS:
                    positions = self.store.positions(r.first_index, r.last_index)
                    pending.future.set_result(
                        AppendResult(r.first_index, r.last_index, r.term, positions)
                    )
                else:
                    pending.future.set_exception(_proposal_error(r.code))
                continue
            assert pending.conn is not None
            if r.code == ResponseCode.SUCCESS:
                ext = {"index": str(r.first_index), "lastIndex": str(r.last_index),
                       "term": str(r.term)}  # fmt: skip
                self._respond(pending.conn, pending.opaque, ResponseCode.SUCCESS, None, ext)
            else:
                self._respond(
                    pending.conn, pending.opaque, r.code,
                    f"append of entries {r.first_index}..{r.last_index} ended with {r.code.name}",
                    self._leader_ext(),
                )  # fmt: skip

    def _complete_transfers(self, results: Sequence[TransferResult]) -> None:
        for r in results:
            entry = self._transfers.pop(r.transfer_id, None)
            if entry is None:
                continue
            conn, opaque, future = entry
            _log.info("leadership transfer to %s in term %d: %s", r.transferee, r.term, r.code.name)
            if future is not None and not future.done():
                future.set_result(int(r.code))
            if conn is not None:
                remark = None if r.code == ResponseCode.SUCCESS else f"transfer: {r.code.name}"
                self._respond(conn, opaque, r.code, remark, {})

    def _fail_pending(self, reason: str) -> None:
        for pending in self._appends.values():
            if pending.future is not None and not pending.future.done():
                pending.future.set_exception(NotLeaderError(reason))
            elif pending.conn is not None:
                self._respond(pending.conn, pending.opaque, ResponseCode.TERM_CHANGED, reason, {})
        self._appends.clear()
        for conn, opaque, future in self._transfers.values():
            if future is not None and not future.done():
                future.set_result(int(ResponseCode.TIMEOUT))
            if conn is not None:
                self._respond(conn, opaque, ResponseCode.TIMEOUT, reason, {})
        self._transfers.clear()

    # ================================================================== inputs
    def _on_incoming_frame(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A frame on a connection made to this replica, when peers must authenticate: only
        what ``peer_auth`` admits reaches ``_on_frame``. Our own links to the peers proved the
        peer when they connected, so their frames go to ``_on_frame`` directly."""
        auth = self.peer_auth
        if auth is not None and not auth.admit(conn, cmd):
            return
        self._on_frame(conn, cmd)

    def _on_frame(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Every frame from any connection, in arrival order."""
        if self._closing or self._core is None:
            return
        try:
            if cmd.code == LedgerRequestCode.LEADERSHIP_TRANSFER and not cmd.is_response:
                self._on_transfer_request(conn, cmd)
            elif cmd.is_response or cmd.code in PEER_REQUEST_CODES:
                self._on_peer_message(conn, cmd)
            elif cmd.code == LedgerRequestCode.APPEND:
                self._on_append(conn, cmd)
            elif cmd.code == LedgerRequestCode.GET:
                self._on_get(conn, cmd)
            elif cmd.code == LedgerRequestCode.METADATA:
                self._respond(conn, cmd.opaque, ResponseCode.SUCCESS, None, {},
                              self.metadata().to_json())  # fmt: skip
            else:
                self._respond(
                    conn, cmd.opaque, ResponseCode.UNSUPPORTED,
                    f"request code {cmd.code} is not supported by a ledger replica", {},
                )  # fmt: skip
        except ProtocolError as exc:
            _log.warning("closing connection from %s: %s", conn.address, exc)
            conn.close()

    def _on_peer_message(self, conn: Connection, cmd: RemotingCommand) -> None:
        message = decode_message(cmd)
        self._last_contact[message.local_id] = self._clock.monotonic_ms()
        if isinstance(message, (VoteRequest, VoteResponse)) and self.membership is not None:
            self.membership.note_message(message, self.core.membership)
        if not cmd.is_response:
            routes = self._reply_routes
            routes[(message.local_id, message.rid)] = (conn, cmd.opaque)
            if len(routes) > _MAX_REPLY_ROUTES:
                routes.popitem(last=False)
        self.core.step(message)
        self._kick()

    def _on_append(self, conn: Connection, cmd: RemotingCommand) -> None:
        if self._wrong_group(conn, cmd):
            return
        try:
            bodies = decode_bodies(cmd.body)
        except ProtocolError as exc:
            self._respond(conn, cmd.opaque, ResponseCode.UNEXPECTED_ARGUMENT, str(exc), {})
            return
        try:
            self._check_bodies(bodies)
            pid = self.core.propose(bodies)
        except RaftError as exc:
            self._refuse(conn, cmd.opaque, exc)
            return
        self._appends[pid] = _PendingAppend(conn, cmd.opaque, None, time.perf_counter())
        self._kick()

    def _on_get(self, conn: Connection, cmd: RemotingCommand) -> None:
        if self._wrong_group(conn, cmd):
            return
        raw = cmd.ext_fields.get("index", "")
        if not raw.lstrip("-").isdigit():
            self._respond(conn, cmd.opaque, ResponseCode.UNEXPECTED_ARGUMENT,
                          f"GET needs an integer index, got {raw!r:.30}", {})  # fmt: skip
            return
        index = int(raw)
        store = self.store
        if index > store.committed_index and self.core.role is not Role.LEADER:
            # The leader may have committed it already: send the reader there.
            self._refuse(conn, cmd.opaque, NotLeaderError(
                f"index {index} is not committed on {self.config.self_id}", self.core.leader_id
            ))  # fmt: skip
            return
        if index > store.committed_index or index < 0:
            self._respond(
                conn, cmd.opaque, ResponseCode.INDEX_OUT_OF_RANGE,
                f"index {index} is not committed on {self.config.self_id} "
                f"(committed up to {store.committed_index})", self._leader_ext(),
            )  # fmt: skip
            return
        if index < store.begin_index:
            self._respond(
                conn, cmd.opaque, ResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN,
                f"index {index} was deleted by retention (log starts at {store.begin_index})", {},
            )  # fmt: skip
            return
        try:
            entry = store.get(index)
        except StoreError as exc:
            self._respond(conn, cmd.opaque, ResponseCode.DISK_ERROR, str(exc), {})
            return
        self._respond(conn, cmd.opaque, ResponseCode.SUCCESS, None, {}, encode_entries([entry]))

    def _on_transfer_request(self, conn: Connection, cmd: RemotingCommand) -> None:
        """DLedger uses one code for an admin's "transfer to X" and the leader's "take over":
        only the leader's request names ``takeLeadershipLedgerIndex``."""
        try:
            body = json.loads(cmd.body)
        except ValueError:
            body = None
        if isinstance(body, dict) and "takeLeadershipLedgerIndex" in body:
            if self._stopping:
                self._refuse_take_over(conn, cmd)
            else:
                self._on_peer_message(conn, cmd)
            return
        try:
            assert isinstance(body, dict)
            transferee = str(body["transfereeId"])
            term = body.get("term")
            term = None if term is None else int(term)
            group = str(body.get("group", self.config.group))
        except (AssertionError, ValueError, KeyError, TypeError) as exc:
            self._respond(conn, cmd.opaque, ResponseCode.UNEXPECTED_ARGUMENT,
                          f"malformed transfer request: {exc!r}", {})  # fmt: skip
            return
        if group != self.config.group:
            self._respond(conn, cmd.opaque, ResponseCode.UNKNOWN_GROUP,
                          f"this replica serves group {self.config.group!r}", {})  # fmt: skip
            return
        tid = self.core.transfer_leadership(transferee, term)
        self._transfers[tid] = (conn, cmd.opaque, None)
        self._kick()

    def _refuse_take_over(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A replica that is stopping does not take the leadership over: the leader's transfer
        ends at once (TAKE_LEADERSHIP_FAILED) and the leader keeps the group."""
        req = decode_message(cmd)
        assert isinstance(req, LeadershipTransferRequest)
        _log.info(
            "replica %s is stopping: it refuses to take over the leadership from %s",
            self.config.self_id, req.local_id,
        )  # fmt: skip
        answer = LeadershipTransferResponse(
            self.config.group, self.config.self_id, req.local_id, req.rid, self.core.term,
            ResponseCode.TAKE_LEADERSHIP_FAILED,
        )  # fmt: skip
        if not conn.closed:
            with contextlib.suppress(NetworkError):
                conn.send(encode_message(answer, cmd.opaque))

    # ================================================================== answers
    def _wrong_group(self, conn: Connection, cmd: RemotingCommand) -> bool:
        group = cmd.ext_fields.get("group")
        if group is not None and group != self.config.group:
            self._respond(conn, cmd.opaque, ResponseCode.UNKNOWN_GROUP,
                          f"this replica serves group {self.config.group!r}, not {group!r}",
                          {})  # fmt: skip
            return True
        return False

    def _leader_ext(self) -> dict[str, str]:
        leader = self.core.leader_id
        if leader is None or self.core.role is Role.CANDIDATE:
            return {}
        address = self.membership.addresses.get(leader) if self.membership else None
        if address is None:
            return {"leaderId": leader}
        return {"leaderId": leader, "leaderAddr": f"{address[0]}:{address[1]}"}

    def _member_addresses(self) -> dict[str, str]:
        """id -> "host:port" of the members in effect (the configured peers before start)."""
        if self.membership is None:
            return {peer: f"{h}:{p}" for peer, (h, p) in sorted(self.config.peers.items())}
        addresses = self.membership.addresses
        return {
            m: f"{addresses[m][0]}:{addresses[m][1]}"
            for m in self.core.membership.members
            if m in addresses
        }

    def _refuse(self, conn: Connection, opaque: int, exc: RaftError) -> None:
        """Answer with the DLedger code the error carries (errors.py keeps the one mapping)."""
        self._respond(conn, opaque, exc.code, str(exc), self._leader_ext())

    @staticmethod
    def _respond(
        conn: Connection,
        opaque: int,
        code: int,
        remark: str | None,
        ext: dict[str, str],
        body: bytes = b"",
    ) -> None:
        if conn.closed:
            return
        with contextlib.suppress(NetworkError):
            conn.send(
                RemotingCommand(int(code), opaque, 1, remark=remark, ext_fields=ext, body=body)
            )


def _proposal_error(code: ResponseCode) -> LedgerMQError:
    return error_for(int(code), f"append ended with {code.name}", {})
