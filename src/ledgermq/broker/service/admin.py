"""Administration: topics, subscription groups, offsets, statistics, messages, leadership.

Changes go through the master and the ledger; reads are served by any replica from its applied
state. Results are typed; the remoting door (``broker.remoting.admin``) writes them as
RocketMQ's JSON bodies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.broker.backup import backup_replica
from ledgermq.broker.errors import (
    BusyError,
    InvalidArgumentError,
    InvalidMembershipChangeError,
    NoSuchTopicError,
    NotFoundError,
    TransferRefusedError,
    UnavailableError,
)
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.service.access import record_topic
from ledgermq.broker.service.queue_counts import queue_count_problem
from ledgermq.broker.state.ops import DeleteGroupOp, DeleteTopicOp
from ledgermq.errors import (
    ConfigError,
    IndexCompactedError,
    IndexOutOfRangeError,
    LeaderTransferringError,
    LedgerMQError,
    MembershipChangeBusyError,
    MembershipChangeError,
    MessageFormatError,
    NotLeaderError,
)
from ledgermq.ledger.replica_view import replication_fields
from ledgermq.raft import ResponseCode
from ledgermq.security.acl import Perm, record_needs
from ledgermq.wire.message import decode_records
from ledgermq.wire.topic_attributes import apply_changes

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.broker.backup import BackupManifest
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.broker.state.metadata import SubscriptionGroupConfig
    from ledgermq.broker.storage.quarantine import QuarantinedEntry
    from ledgermq.ledger.server import LedgerServer
    from ledgermq.wire.route import DataVersion, TopicConfig

__all__ = ["AdminService", "ConsumeQueueStats", "QueueStats"]


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a topic on this broker (``TopicOffset``)."""

    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class ConsumeQueueStats:
    """One queue as a group consumes it: lag = ``broker_offset - consumer_offset``."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    """-1: the group has committed none."""


class AdminService:
    def __init__(self, state: BrokerState, ledger: LedgerServer) -> None:
        self._state = state
        self._ledger = ledger
        self._backing_up = False
        """A REPLICA_BACKUP is copying this replica's files (one at a time)."""

    # ------------------------------------------------------------------ topics and groups
    async def create_topic(
        self, config: TopicConfig, attribute_changes: Mapping[str, str | None] | None = None
    ) -> None:
        """Create or update a topic through the ledger. ``attribute_changes`` (``+key=value`` /
        ``-key``, ``wire.topic_attributes``) apply to the attributes the topic has, which an
        update without changes keeps; ``config.attributes`` is ignored. Raises
        ``InvalidArgumentError`` (name: ``InvalidTopicError``, queue counts, attributes, a
        shrink that would strand messages: ``service.queue_counts``) and ``NotMasterError``."""
        require_topic_name(config.topic_name)
        if not (1 <= config.read_queue_nums <= 1024 and 1 <= config.write_queue_nums <= 1024):
            raise InvalidArgumentError(
                "readQueueNums and writeQueueNums must be between 1 and 1024"
            )
        state = self._state
        state.require_master("creating a topic")
        existing = state.topics.find(config.topic_name)
        problem = queue_count_problem(
            existing, config, self._queue_bounds(config.topic_name), self._committed(config)
        )
        if problem is not None:
            raise InvalidArgumentError(problem)
        try:
            attributes = apply_changes(
                existing.attributes if existing is not None else {},
                attribute_changes or {},
                creating=existing is None,
            )
        except ValueError as exc:
            raise InvalidArgumentError(f"topic {config.topic_name}: {exc}") from None
        await state.topics.create(dataclasses.replace(config, attributes=attributes))

    def _queue_bounds(self, topic: str) -> Callable[[int], tuple[int, int]]:
        queues = self._state.queues

        def bounds(queue_id: int) -> tuple[int, int]:
            queue = queues.find(topic, queue_id)
            return (queue.min_offset, queue.max_offset) if queue is not None else (0, 0)

        return bounds

    def _committed(self, config: TopicConfig) -> dict[str, Callable[[int], int | None]]:
        """Each consumer group with offsets in the topic: its committed offset per queue (the
        newest this master knows, staged commits included)."""
        topic, writer = config.topic_name, self._state.writer
        groups = sorted({g for (t, g) in self._state.metadata.offsets if t == topic})
        return {g: functools.partial(writer.offset, g, topic) for g in groups}

    async def delete_topic(self, topic: str) -> None:
        state = self._state
        state.require_master("deleting a topic")
        await state.writer.submit(DeleteTopicOp(topic))
        # The queue offsets carry on: the ConsumeQueues keep their units (on every replica; a new
        # master rebuilds its offsets from them), so a topic made again under the same name must
        # not hand out offsets that already name the old messages, or its new ones are unreachable.
        if state.topics.on_topics_changed is not None:
            await state.topics.on_topics_changed()

    async def put_group(self, config: SubscriptionGroupConfig) -> None:
        require_group_name(config.group_name)
        state = self._state
        state.require_master("creating a subscription group")
        await state.topics.put_group(config)

    async def delete_group(self, group: str) -> None:
        state = self._state
        state.require_master("deleting a subscription group")
        await state.writer.submit(DeleteGroupOp(group))

    def topics(self) -> tuple[dict[str, TopicConfig], DataVersion]:
        """Every topic by name, sorted, and the version of the topic table."""
        metadata = self._state.metadata
        return dict(sorted(metadata.topics.items())), metadata.topic_version

    def groups(self) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
        """Every subscription group by name, sorted, and the version of the group table."""
        metadata = self._state.metadata
        return dict(sorted(metadata.groups.items())), metadata.group_version

    def consumer_offsets(self) -> dict[tuple[str, str], dict[int, int]]:
        """Committed offsets: (topic, group) -> queue id -> offset, sorted."""
        return {
            key: dict(sorted(queues.items()))
            for key, queues in sorted(self._state.metadata.offsets.items())
        }

    # ------------------------------------------------------------------ statistics
    def topic_stats(self, topic: str) -> list[QueueStats]:
        state = self._state
        config = state.topics.find(topic)
        if config is None:
            raise NoSuchTopicError(f"topic[{topic}] not exist")
        rows = []  # every queue a consumer reads, a draining one (above the write count) too
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
            queue = state.queues.find(topic, queue_id)
            rows.append(
                QueueStats(
                    topic,
                    state.config.broker_name,
                    queue_id,
                    queue.min_offset if queue else 0,
                    queue.max_offset if queue else 0,
                )
            )
        return rows

    def consume_stats(self, group: str, topic: str | None = None) -> list[ConsumeQueueStats]:
        """Per queue of ``topic`` (None: every topic the group has offsets in): the broker's
        max offset and the group's committed offset."""
        state = self._state
        topics = [topic] if topic else state.metadata.topics_of_group(group)
        rows = []
        for name in topics:
            config = state.topics.find(name)
            if config is None:
                continue
            for queue_id in range(config.read_queue_nums):
                queue = state.queues.find(name, queue_id)
                consumer = state.writer.offset(group, name, queue_id)
                rows.append(
                    ConsumeQueueStats(
                        name,
                        state.config.broker_name,
                        queue_id,
                        queue.max_offset if queue else 0,
                        -1 if consumer is None else consumer,
                    )
                )
        return rows

    def runtime_info(self) -> dict[str, str]:
        """The replica's role, ledger indexes and counters (``GET_BROKER_RUNTIME_INFO``)."""
        state = self._state
        core, store = self._ledger.core, self._ledger.store
        return {
            "brokerName": state.config.broker_name,
            "brokerId": str(state.broker_id),
            "brokerRole": state.role.value,
            "dLegerSelfId": state.config.dleger_self_id,
            "dLegerRole": core.role.value,
            "dLegerTerm": str(core.term),
            "dLegerLeader": core.leader_id or "",
            "dLegerPeers": ";".join(
                f"{peer}-{address}" for peer, address in self._ledger.metadata().peers.items()
            ),
            "preferredLeaderId": ";".join(core.config.preferred_leader_ids),
            "ledgerBeginIndex": str(store.begin_index),
            "ledgerEndIndex": str(store.end_index),
            "committedIndex": str(store.committed_index),
            "dispatchedIndex": str(state.dispatcher.dispatched_index),
            "putMessages": str(sum(state.stats.put_messages.values())),
            "getMessages": str(sum(state.stats.get_messages.values())),
            "quarantinedEntries": str(state.dispatcher.quarantine.total),
            **replication_fields(core),  # what admin replica-status --ready judges
        }

    def quarantined_entries(self, since_index: int, limit: int) -> list[QuarantinedEntry]:
        """What the dispatcher skipped because no replica can apply it
        (``storage.dispatcher``), from ledger index ``since_index`` on, oldest first."""
        return self._state.dispatcher.quarantine.items(since_index, limit)

    def quarantined_total(self) -> int:
        """How many records or entries this replica has quarantined, ever."""
        return self._state.dispatcher.quarantine.total

    # ------------------------------------------------------------------ messages
    def view_message(self, offset: int, access: Access) -> bytes:
        """The record at commit-log ``offset``; ``NotFoundError`` if none starts there,
        ``ForbiddenError`` unless ``access`` has SUB on its topic (``record_topic``): offsets
        are predictable, so without the check any account could walk the log."""
        try:
            record = self._state.commitlog.read_record_at(offset)
            messages = decode_records(record)  # it must be one whole, valid record
        except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError) as exc:
            raise NotFoundError(f"no message at commit-log offset {offset}: {exc}") from None
        for message in messages:
            access.require(
                record_needs(record_topic(message), Perm.SUB),
                "viewing a message needs SUB on its topic",
            )
        return record

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> list[bytes]:
        """Records of ``topic`` with ``key`` among their KEYS or as UNIQ_KEY, stored between
        ``begin_ms`` and ``end_ms``, newest first, at most ``max_num`` (clamped to 1..64)."""
        state = self._state
        max_num = max(1, min(max_num, 64))
        records = []
        for offset in state.keys.query(topic, key, max_num * 4, begin_ms, end_ms):
            try:
                record = state.commitlog.read_record_at(offset)
                (message,) = decode_records(record)
            except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError, ValueError):
                continue
            if message.topic != topic:
                continue
            if key not in message.keys and message.properties.get("UNIQ_KEY") != key:
                continue  # a hash collision
            records.append(record)
            if len(records) >= max_num:
                break
        return records

    # ------------------------------------------------------------------ membership
    def replica_list(self) -> list[dict[str, object]]:
        """``replica-list``: the group's members as this replica sees them (the master knows
        every follower's lag): id, address, role, logEnd, lag, lastContactMs."""
        return self._ledger.member_rows()

    async def replica_add(self, peer: str) -> int:
        """``replica-add --peer nX-HOST:PORT``: propose ``nX`` as a learner reached at the
        ledger address HOST:PORT; returns the change's log index once committed."""
        member, sep, address = peer.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not member or not colon or not host or not port.isdigit():
            raise InvalidMembershipChangeError(
                f"--peer must be nX-HOST:PORT (a dLegerPeers entry), got {peer!r}"
            )
        return await self._change_membership("add", member, address)

    async def replica_remove(self, member: str) -> int:
        """``replica-remove --id nX``: propose removing ``nX``; the change's log index."""
        return await self._change_membership("remove", member, "")

    async def _change_membership(self, action: str, member: str, address: str) -> int:
        try:
            return await self._ledger.change_membership(action, member, address)
        except MembershipChangeError as exc:
            raise InvalidMembershipChangeError(str(exc)) from None
        except MembershipChangeBusyError as exc:
            raise BusyError(f"{exc}; retry shortly") from None
        except (NotLeaderError, LeaderTransferringError) as exc:
            raise UnavailableError(f"{exc}; send it to the group's master") from None

    # ------------------------------------------------------------------ backup
    async def backup(self, destination: str) -> BackupManifest:
        """``admin backup --to DIR``: this replica copies its data into ``destination`` on its
        own host while it serves (``broker.backup.backup_replica``: the metadata snapshot, then
        the live ledger, recovered as after a crash), in a thread so the loop keeps serving;
        one backup at a time. The path must be absolute and new or empty: an admin request
        never overwrites files, and a relative path would depend on the broker's working
        directory."""
        if not os.path.isabs(destination):
            raise InvalidArgumentError(
                f"the backup directory must be an absolute path on the replica's host, got "
                f"{destination!r}"
            )
        if self._backing_up:
            raise BusyError("a backup of this replica is already running; retry when it is done")
        config = self._state.config
        self._backing_up = True
        try:
            return await asyncio.to_thread(
                backup_replica,
                config.store_path_root_dir,
                destination,
                self_id=config.dleger_self_id,
                committed_at_start=self._ledger.store.committed_index,
            )
        except ConfigError as exc:  # the directory exists and is not empty
            raise InvalidArgumentError(str(exc)) from None
        except OSError as exc:
            raise InvalidArgumentError(
                f"the backup could not be written to {destination}: {exc.strerror or exc}"
            ) from None
        finally:
            self._backing_up = False

    # ------------------------------------------------------------------ leadership
    async def transfer_leadership(self, target: str) -> None:
        """Move the group's leadership to replica ``target``; returns once it moved. Raises
        ``InvalidArgumentError`` (not a replica of the group) or ``TransferRefusedError``."""
        state = self._state
        voters = self._ledger.core.membership.voters  # the group's, not broker.conf's
        if target not in voters:
            raise InvalidArgumentError(
                f"{target!r} is not a replica of group {state.config.group} (its voters: "
                f"{', '.join(voters)})"
            )
        try:
            code = await self._ledger.transfer_leadership(target)
        except LedgerMQError as exc:
            raise TransferRefusedError(
                f"transfer to {target} refused: {exc}", retriable=True
            ) from None
        if code != ResponseCode.SUCCESS:  # DLedger's SUCCESS is 200, not 0
            raise TransferRefusedError(
                _transfer_failure(state, target, code),
                retriable=code in (ResponseCode.NOT_LEADER, ResponseCode.LEADER_TRANSFERRING),
            )


_TRANSFER_HINTS: Final[dict[int, str]] = {
    ResponseCode.NOT_LEADER: "this replica no longer leads the group; ask again",
    ResponseCode.LEADER_TRANSFERRING: "a transfer is already under way; wait for it",
    ResponseCode.FALL_BEHIND_TOO_MUCH: "it is too far behind the leader; wait until it catches up",
    ResponseCode.TAKE_LEADERSHIP_FAILED: "it did not take over in time (is it running?)",
    ResponseCode.TIMEOUT: "it did not answer in time (is it running?)",
    ResponseCode.NETWORK_ERROR: "it could not be reached (is it running?)",
}
"""What a refused or failed transfer means for the operator, by DLedger code."""


def _transfer_failure(state: BrokerState, target: str, code: int) -> str:
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = "UNKNOWN"
    hint = _TRANSFER_HINTS.get(code, "the leader is unchanged")
    return (
        f"leadership of broker group {state.config.group} was not moved to {target}: "
        f"{hint} (DLedger code {code} {name})"
    )
