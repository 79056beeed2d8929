"""The broker's metadata as a replicated state machine: topics, subscription groups, offsets,
POP queues and transactions.

RocketMQ keeps topic configs, subscription groups, consumer offsets and delay offsets in JSON
files on the master and copies them to slaves every 10 s (spec-broker.md section 6), so a
failover loses up to 10 s of offset commits and consumers re-read what they had acknowledged.
Here every change is a ledger entry on the METADATA channel (the seeds' embedded-KV use of
DLedger): it is committed by a majority before it is acknowledged, and every replica applies the
same changes in log order. A new master therefore has every acknowledged commit.

A change is a small JSON object with an ``op``; ``apply`` is deterministic and never fails on a
well-formed op (an op it does not know is logged and skipped, so an older broker can follow a
newer one). The state is snapshotted to ``metadata.json`` with the ledger index it covers, so a
restart replays only the entries after it.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.state.pop_table import PopTable
from ledgermq.broker.state.timer_table import TimerTable
from ledgermq.broker.state.transactions import TransactionTable
from ledgermq.errors import ConfigError, StoreError
from ledgermq.store.segment import replace_file_durably
from ledgermq.wire.route import DataVersion, TopicConfig

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "SNAPSHOT_FILE",
    "BrokerMetadata",
    "MetadataOpError",
    "SubscriptionGroupConfig",
    "commit_offsets_op",
    "decode_op",
    "delay_offsets_op",
    "delete_group_op",
    "delete_topic_op",
    "encode_op",
    "put_group_op",
    "put_topic_op",
]

_log = logging.getLogger(__name__)

SNAPSHOT_FILE: Final = "metadata.json"
_SNAPSHOT_VERSION: Final = 1


class MetadataOpError(ValueError):
    """A metadata op that does not apply (malformed, or of a newer format): the same on every
    replica, so the dispatcher quarantines its entry (``storage.dispatcher``)."""


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """RocketMQ's ``SubscriptionGroupConfig`` (the fields clients and tools look at)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1

    def to_object(self) -> dict[str, object]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_object(cls, value: Mapping[str, Any]) -> SubscriptionGroupConfig:
        name = value.get("groupName")
        if not isinstance(name, str) or not name:
            raise ValueError("a subscription group needs a groupName")
        return cls(
            group_name=name,
            consume_enable=bool(value.get("consumeEnable", True)),
            consume_from_min_enable=bool(value.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(value.get("consumeBroadcastEnable", True)),
            consume_message_orderly=bool(value.get("consumeMessageOrderly", False)),
            retry_queue_nums=int(value.get("retryQueueNums", 1)),
            retry_max_times=int(value.get("retryMaxTimes", 16)),
            broker_id=int(value.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(value.get("whichBrokerWhenConsumeSlowly", 1)),
        )


# ---------------------------------------------------------------------- the ops
def encode_op(op: Mapping[str, object]) -> bytes:
    return json.dumps(op, separators=(",", ":"), sort_keys=True).encode()


def decode_op(body: bytes) -> dict[str, Any]:
    value = json.loads(body)
    if not isinstance(value, dict) or not isinstance(value.get("op"), str):
        raise ValueError("a metadata entry must be a JSON object with an op")  # noqa: TRY004
    return value


def put_topic_op(config: TopicConfig) -> dict[str, object]:
    return {"op": "put_topic", "topic": config.to_object()}


def delete_topic_op(topic: str) -> dict[str, object]:
    return {"op": "delete_topic", "topic": topic}


def put_group_op(config: SubscriptionGroupConfig) -> dict[str, object]:
    return {"op": "put_group", "group": config.to_object()}


def delete_group_op(group: str) -> dict[str, object]:
    return {"op": "delete_group", "group": group}


def commit_offsets_op(offsets: Iterable[tuple[str, str, int, int]]) -> dict[str, object]:
    """Consumer offsets: (group, topic, queue id, next offset to consume) each."""
    return {"op": "commit_offsets", "offsets": [list(item) for item in offsets]}


def delay_offsets_op(offsets: Mapping[int, int]) -> dict[str, object]:
    """Progress of the delay-level queues (level -> next queue offset to deliver)."""
    return {"op": "delay_offsets", "offsets": {str(k): v for k, v in offsets.items()}}


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
    def apply(self, index: int, op: Mapping[str, Any], now_ms: int) -> None:
        """Apply the op of ledger entry ``index`` (entries at or below ``applied_index`` are
        skipped: a restart replays from an older point than the snapshot)."""
        if index <= self.applied_index:
            return
        self.applied_index = index
        kind = op.get("op")
        try:
            if kind == "put_topic":
                config = TopicConfig.from_object(op["topic"], "topic")
                self.topics[config.topic_name] = config
                self.topic_version = _next_version(self.topic_version, now_ms)
            elif kind == "delete_topic":
                topic = str(op["topic"])
                self.topics.pop(topic, None)
                for key in [k for k in self.offsets if k[0] == topic]:
                    del self.offsets[key]
                self.pop.drop(topic=topic)
                self.topic_version = _next_version(self.topic_version, now_ms)
            elif kind == "put_group":
                group = SubscriptionGroupConfig.from_object(op["group"])
                self.groups[group.group_name] = group
                self.group_version = _next_version(self.group_version, now_ms)
            elif kind == "delete_group":
                name = str(op["group"])
                self.groups.pop(name, None)
                for key in [k for k in self.offsets if k[1] == name]:
                    del self.offsets[key]
                self.pop.drop(group=name)
                self.group_version = _next_version(self.group_version, now_ms)
            elif kind == "commit_offsets":
                for group, topic, queue_id, offset in op["offsets"]:
                    self.offsets.setdefault((str(topic), str(group)), {})[int(queue_id)] = int(
                        offset
                    )
            elif kind == "pop":
                self.pop.apply(op)
            elif kind == "txn":
                self.transactions.apply(op)
            elif kind == "timer":
                self.timers.apply_op(index, op)
            elif kind == "delay_offsets":
                for level, offset in op["offsets"].items():
                    self.delay_offsets[int(level)] = int(offset)
            else:
                _log.warning("metadata entry %d has an unknown op %r; skipped", index, kind)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # Written by a broker, so this is a bug or a newer format; every replica fails on
            # it the same way, and the dispatcher quarantines it alike on each (it stays
            # skipped: ``applied_index`` is already past it).
            raise MetadataOpError(f"metadata entry {index} ({kind!r}) is malformed: {exc}") from exc

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
