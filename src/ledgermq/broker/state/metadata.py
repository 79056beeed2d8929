"""The broker's metadata as a replicated state machine: topics, subscription groups, offsets,
POP queues and transactions.

RocketMQ keeps topic configs, subscription groups, consumer offsets and delay offsets in JSON
files on the master and copies them to slaves every 10 s (spec-broker.md section 6), so a
failover loses up to 10 s of offset commits and consumers re-read what they had acknowledged.
Here every change is a ledger entry on the METADATA channel (the seeds' embedded-KV use of
DLedger): it is committed by a majority before it is acknowledged, and every replica applies the
same changes in log order. A new master therefore has every acknowledged commit.

A change is one of the typed, versioned ops of ``ops`` (their on-disk format is there);
``apply`` is deterministic and never fails on an op ``ops.decode_op`` made (an entry that does
not decode, say of a newer release's format, is quarantined by the dispatcher instead). The
state is snapshotted to ``metadata.json`` with the ledger index it covers, so a restart replays
only the entries after it.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace
from typing import Final, assert_never

from ledgermq.broker.state.group_config import SubscriptionGroupConfig
from ledgermq.broker.state.ops import (
    CommitOffsetsOp,
    DelayOffsetsOp,
    DeleteGroupOp,
    DeleteTopicOp,
    MetadataOp,
    MetadataOpError,
    PopOp,
    PutGroupOp,
    PutTopicOp,
    TimerOp,
    TxnOp,
)
from ledgermq.broker.state.pop_table import PopTable
from ledgermq.broker.state.timer_table import TimerTable
from ledgermq.broker.state.transactions import TransactionTable
from ledgermq.errors import ConfigError, StoreError
from ledgermq.store.segment import replace_file_durably
from ledgermq.wire.route import DataVersion, TopicConfig

__all__ = [
    "SNAPSHOT_FILE",
    "BrokerMetadata",
    "MetadataOpError",
    "SubscriptionGroupConfig",
]

_log = logging.getLogger(__name__)

SNAPSHOT_FILE: Final = "metadata.json"
_SNAPSHOT_VERSION: Final = 1


# ---------------------------------------------------------------------- the state
class BrokerMetadata:
    """The applied state. Mutated only by ``apply`` (and ``restore`` on start)."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self.offsets: dict[tuple[str, str], dict[int, int]] = {}
        """(topic, group) -> queue id -> committed offset (the next message to consume)."""
        self.delay_offsets: dict[int, int] = {}
        self.pop = PopTable()
        """POP queues (``pop`` ops), in the snapshot as ``popTable``."""
        self.transactions = TransactionTable()
        """Settled half messages and check counts (``txn`` ops), as ``transactionTable``."""
        self.timers = TimerTable()
        """Timer messages (``timer`` ops and the timer topic's records; ``timer_table``), in the
        snapshot as ``timerTable``."""
        self.applied_index = -1
        """The last ledger index whose op is in this state."""
        self.topic_version = DataVersion()
        self.group_version = DataVersion()

    # ------------------------------------------------------------------ queries
    def offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.offsets.get((topic, group), {}).get(queue_id)

    def topics_of_group(self, group: str) -> list[str]:
        return sorted(t for (t, g) in self.offsets if g == group)

    # ------------------------------------------------------------------ changes
    def apply(self, index: int, op: MetadataOp, now_ms: int) -> None:
        """Apply the op of ledger entry ``index`` (entries at or below ``applied_index`` are
        skipped: a restart replays from an older point than the snapshot)."""
        if index <= self.applied_index:
            return
        self.applied_index = index
        try:
            match op:  # the commonest first: each case is one isinstance test
                case CommitOffsetsOp(offsets=offsets):
                    for group, topic, queue_id, offset in offsets:
                        self.offsets.setdefault((topic, group), {})[queue_id] = offset
                case PopOp():
                    self.pop.apply(op)
                case TxnOp():
                    self.transactions.apply(op)
                case TimerOp():
                    self.timers.apply_op(index, op)
                case DelayOffsetsOp(offsets=delay_offsets):
                    self.delay_offsets.update(delay_offsets)
                case PutTopicOp(config=config):
                    self.topics[config.topic_name] = config
                    self.topic_version = _next_version(self.topic_version, now_ms)
                case DeleteTopicOp(topic=topic):
                    self.topics.pop(topic, None)
                    for key in [k for k in self.offsets if k[0] == topic]:
                        del self.offsets[key]
                    self.pop.drop(topic=topic)
                    self.topic_version = _next_version(self.topic_version, now_ms)
                case PutGroupOp(config=group):
                    self.groups[group.group_name] = group
                    self.group_version = _next_version(self.group_version, now_ms)
                case DeleteGroupOp(group=name):
                    self.groups.pop(name, None)
                    for key in [k for k in self.offsets if k[1] == name]:
                        del self.offsets[key]
                    self.pop.drop(group=name)
                    self.group_version = _next_version(self.group_version, now_ms)
                case _:
                    assert_never(op)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # ``decode_op`` checked what these rely on, so this is a bug; every replica fails
            # on it the same way, and the dispatcher quarantines it alike on each (it stays
            # skipped: ``applied_index`` is already past it).
            raise MetadataOpError(
                f"metadata entry {index} ({type(op).NAME}) does not apply: {exc}"
            ) from exc

    # ------------------------------------------------------------------ snapshot
    def snapshot(self) -> bytes:
        return json.dumps(
            {
                "version": _SNAPSHOT_VERSION,
                "appliedIndex": self.applied_index,
                "topicConfigTable": {n: c.to_object() for n, c in sorted(self.topics.items())},
                "topicDataVersion": self.topic_version.to_object(),
                "subscriptionGroupTable": {
                    n: g.to_object() for n, g in sorted(self.groups.items())
                },
                "groupDataVersion": self.group_version.to_object(),
                "offsetTable": {
                    f"{topic}@{group}": {str(q): o for q, o in sorted(queues.items())}
                    for (topic, group), queues in sorted(self.offsets.items())
                },
                "delayOffsetTable": {str(k): v for k, v in sorted(self.delay_offsets.items())},
                "popTable": self.pop.snapshot(),
                "transactionTable": self.transactions.snapshot(),
                "timerTable": self.timers.snapshot(),
            },
            separators=(",", ":"),
        ).encode()

    def restore(self, raw: bytes, path: str) -> None:
        try:
            data = json.loads(raw)
            if data.get("version") != _SNAPSHOT_VERSION:
                raise ValueError(f"unknown snapshot version {data.get('version')!r}")  # noqa: TRY301
            topics = {
                name: TopicConfig.from_object(value, f"topicConfigTable.{name}")
                for name, value in data["topicConfigTable"].items()
            }
            groups = {
                name: SubscriptionGroupConfig.from_object(value)
                for name, value in data["subscriptionGroupTable"].items()
            }
            offsets: dict[tuple[str, str], dict[int, int]] = {}
            for key, queues in data["offsetTable"].items():
                topic, _, group = key.rpartition("@")
                offsets[(topic, group)] = {int(q): int(o) for q, o in queues.items()}
            self.topic_version = DataVersion.from_object(data["topicDataVersion"], "topic")
            self.group_version = DataVersion.from_object(data["groupDataVersion"], "group")
            self.delay_offsets = {int(k): int(v) for k, v in data["delayOffsetTable"].items()}
            # absent in snapshots written before POP existed: no POP state then
            self.pop = PopTable.restore(data.get("popTable", []))
            # absent in snapshots written before transactions existed
            self.transactions = TransactionTable.restore(data.get("transactionTable"))
            # absent in snapshots written before timers existed: none pending then
            timer_table = data.get("timerTable")
            self.timers = TimerTable() if timer_table is None else TimerTable.restore(timer_table)
            self.applied_index = int(data["appliedIndex"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(
                f"metadata snapshot {path} is damaged ({exc}); delete it and the broker rebuilds "
                "the metadata from its ledger"
            ) from None
        self.topics = topics
        self.groups = groups
        self.offsets = offsets

    def save(self, directory: str) -> None:
        replace_file_durably(directory, SNAPSHOT_FILE, self.snapshot())

    def load(self, directory: str) -> bool:
        """Restore the snapshot in ``directory`` if there is one."""
        path = os.path.join(directory, SNAPSHOT_FILE)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
        self.restore(raw, path)
        return True


def _next_version(version: DataVersion, now_ms: int) -> DataVersion:
    return replace(version, timestamp=now_ms, counter=version.counter + 1)
