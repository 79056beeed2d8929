"""Today's on-disk data opens with the current code (issue 27 item 6, upgrades).

``tests/fixtures/store_v1.tar.gz`` is a 3-replica group's data as the release that introduced
it wrote them (``tests/fixtures/make_store_v1.py``: a topic, subscription groups, 20 messages,
an offset reset, a POP checkpoint, a pending timer, a committed and a prepared transaction).
The compatibility rule of docs/operations/upgrades.md is that every later release reads it: the
ledger entry by entry (CRCs and chain checked), the metadata snapshot (format version 1) with
every table, the records with RocketMQ's message codec, and the three replicas started as a
group again, serving every message. A change that breaks one of these must version the format
and keep reading this one; regenerating the fixture to make this test pass defeats it.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.broker.state.metadata import BrokerMetadata
from ledgermq.broker.state.ops import PopOp, TxnOp, decode_op
from ledgermq.broker.storage.commitlog import CHANNEL_MESSAGES, CHANNEL_METADATA
from ledgermq.broker.storage.consume_queue_store import ConsumeQueueStore
from ledgermq.broker.storage.dispatcher import Dispatcher
from ledgermq.broker.storage.key_index import KeyIndex
from ledgermq.broker.storage.quarantine import QuarantineLog
from ledgermq.client import SyncAdmin, SyncPullConsumer
from ledgermq.clock import SystemClock
from ledgermq.ledger.hard_state import read_hard_state
from ledgermq.store import LedgerStore
from ledgermq.store.backup import detect_segment_sizes
from ledgermq.store.memory_store import MemoryLedgerStore
from ledgermq.testing.broker_cluster import BrokerCluster
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from ledgermq.store.entry_format import Entry

FIXTURES = Path(__file__).parent.parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "store_v1.json").read_text("utf-8"))


def _unpack(target: Path) -> Path:
    with tarfile.open(FIXTURES / "store_v1.tar.gz") as tar:
        tar.extractall(target, filter="data")
    return target


def _entries(ledger: Path) -> list[Entry]:
    data_bytes, index_entries = detect_segment_sizes(str(ledger))
    with LedgerStore.open(
        ledger, background=False, data_segment_bytes=data_bytes, index_segment_entries=index_entries
    ) as store:
        assert not store.recovery.repairs  # written by a clean stop: nothing to repair
        entries = []
        index = store.begin_index
        while index <= store.end_index:
            batch = store.read_range(index, 1 << 20)
            entries += batch
            index = batch[-1].index + 1
        return entries


def test_the_v1_ledgers_read_back_entry_by_entry_and_agree(tmp_path: Path) -> None:
    root = _unpack(tmp_path)
    logs = {node: _entries(root / node / f"dledger-{node}") for node in EXPECTED["replicas"]}
    reference = logs[EXPECTED["master"]]
    for node, entries in logs.items():
        assert [(e.index, e.term, e.body) for e in entries] == [
            (e.index, e.term, e.body) for e in reference
        ], node
        assert read_hard_state(str(root / node / f"dledger-{node}")).term >= 1
    ops = [json.loads(e.body)["op"] for e in reference if e.channel == CHANNEL_METADATA]
    assert {"put_topic", "commit_offsets", "pop", "txn"} <= set(ops)
    topics: dict[str, list[str]] = {}
    for entry in reference:
        if entry.channel == CHANNEL_MESSAGES:
            for message in decode_records(entry.body, check_crc=True):
                topics.setdefault(message.topic, []).append(message.body.decode())
    assert topics[EXPECTED["topic"]] == EXPECTED["bodies"]
    assert EXPECTED["preparedTransaction"] in topics["RMQ_SYS_TRANS_HALF_TOPIC"]


def test_the_v1_metadata_snapshot_restores_every_table(tmp_path: Path) -> None:
    root = _unpack(tmp_path)
    metadata = BrokerMetadata()
    assert metadata.load(str(root / EXPECTED["master"] / "config"))
    assert metadata.applied_index > 0
    assert metadata.topics[EXPECTED["topic"]].read_queue_nums == EXPECTED["queues"]
    group = metadata.groups[EXPECTED["consumerGroup"]]
    assert group.to_object()["retryMaxTimes"] == EXPECTED["retryMaxTimes"]
    assert metadata.offsets[(EXPECTED["topic"], EXPECTED["consumerGroup"])] == {0: 10, 1: 10}
    assert len(metadata.pop.queues) == 1
    assert len(metadata.timers) == 1


def test_the_v1_metadata_ops_decode_and_replay_to_the_snapshot(tmp_path: Path) -> None:
    """Issue 26 item 6: the metadata ops in the release's log (format version 0: no ``v``)
    decode to the typed ops, and dispatching the whole log from its start rebuilds the state
    the snapshot holds, table by table; nothing is quarantined. Only the data versions'
    timestamps differ: they are the applying replica's clock."""
    root = _unpack(tmp_path / "fixture")
    entries = _entries(root / EXPECTED["master"] / f"dledger-{EXPECTED['master']}")
    ops = [decode_op(bytes(e.body)) for e in entries if e.channel == CHANNEL_METADATA]
    assert {PopOp, TxnOp} <= {type(op) for op in ops}
    store = MemoryLedgerStore()
    for entry in entries:
        store.append(entry.term, bytes(entry.body), entry.channel)
    store.set_committed_index(entries[-1].index)
    replayed = BrokerMetadata()
    quarantine = QuarantineLog()
    keys = KeyIndex(str(tmp_path))
    dispatcher = Dispatcher(
        store, ConsumeQueueStore(str(tmp_path)), keys, replayed, SystemClock(),
        start_index=entries[0].index, quarantine=quarantine,
    )  # fmt: skip
    assert dispatcher.catch_up() == len(entries)
    keys.close()
    assert dispatcher.failure is None
    assert len(quarantine) == 0
    snapshot = BrokerMetadata()
    assert snapshot.load(str(root / EXPECTED["master"] / "config"))
    tables: list[dict[str, Any]] = [json.loads(m.snapshot()) for m in (replayed, snapshot)]
    for table in tables:
        for version in ("topicDataVersion", "groupDataVersion"):
            table[version]["timestamp"] = 0
    assert tables[0] == tables[1]


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_the_v1_group_starts_and_serves_every_message(tmp_path: Path) -> None:
    root = _unpack(tmp_path / "fixture")
    with BrokerCluster(tmp_path / "cluster", replicas=3, start=False) as cluster:
        for node in cluster.nodes:
            cluster.store_dir("broker-a", node).parent.mkdir(parents=True)
            (root / node).rename(cluster.store_dir("broker-a", node))
        cluster.start()
        cluster.wait_master("broker-a")
        cluster.wait_routable(EXPECTED["topic"])
        with SyncAdmin(cluster.namesrv_addr) as admin:
            stats = admin.topic_stats(EXPECTED["topic"])
        assert sum(s.max_offset for s in stats) >= len(EXPECTED["bodies"])
        bodies = []
        with SyncPullConsumer("fixture-reader", cluster.namesrv_addr) as consumer:
            for mq in sorted(consumer.fetch_queues(EXPECTED["topic"]), key=lambda q: q.queue_id):
                offset = 0
                while (found := consumer.pull(mq, offset, 64)).messages:
                    bodies += [m.body.decode() for m in found.messages]
                    offset = found.next_begin_offset
        timer = "fixture timer"  # delivered into the topic once due: two days after the fixture
        assert sorted(b for b in bodies if b != timer) == sorted(EXPECTED["bodies"])
