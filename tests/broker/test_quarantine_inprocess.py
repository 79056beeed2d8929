"""A poison entry committed in a running group (issue 25 item 1): the group keeps serving,
every replica quarantines the same record, a restarted replica starts, and the admin request
lists it."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.broker.storage.commitlog import CHANNEL_MESSAGES
from ledgermq.wire import MQRequestCode
from ledgermq.wire.message import decode_records, encode_properties, encode_record

from .harness import Cluster

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)

POISON_TOPIC = "%DLQ%orders.v1"


def _poison() -> bytes:
    """A record no replica can index: its topic cannot be a queue directory. The doors refuse
    such names now, so it goes straight into the ledger, as a broker without that check did."""
    return encode_record(
        topic=POISON_TOPIC, queue_id=0, body=b"poison", properties=encode_properties({}),
        born_timestamp=1, born_host=("10.0.0.1", 5), store_timestamp=7,
        store_host=("10.0.0.2", 6), queue_offset=0,
    )  # fmt: skip


async def _quarantined(cluster: Cluster, address: str) -> dict[str, Any]:
    answer = await cluster.request(address, MQRequestCode.GET_QUARANTINED_ENTRIES)
    assert answer.code == 0, answer.remark
    body: dict[str, Any] = json.loads(answer.body)
    return body


def test_a_poison_entry_is_quarantined_on_every_replica_and_the_group_keeps_serving(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            master = await cluster.master()
            first = await cluster.send(master.address, "TopicA", b"before")
            assert first.code == 0, first.remark
            result = await master.ledger.append([_poison()], channel=CHANNEL_MESSAGES)
            poison_index = result.first_index
            after = await cluster.send(master.address, "TopicA", b"after")
            assert after.code == 0, after.remark
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while loop.time() < deadline:
                states = [b.state for b in cluster.brokers.values()]
                if all(
                    s is not None and s.dispatcher.dispatched_index > poison_index for s in states
                ):
                    break
                await asyncio.sleep(0.02)
            for node, broker in cluster.brokers.items():
                assert broker.failure is None, node
                body = await _quarantined(cluster, broker.address)
                assert body["total"] == 1, (node, body)
                (entry,) = body["entries"]
                assert (entry["index"], entry["record"], entry["topic"]) == (
                    poison_index, 0, POISON_TOPIC
                ), node  # fmt: skip
                assert "may contain only the characters" in entry["reason"]
                pulled = await cluster.pull(broker.address, "TopicA", 0, 0)
                assert pulled.code == 0, (node, pulled.remark)
                assert [m.body for m in decode_records(pulled.body)] == [b"before", b"after"]
            # Every replica restarts from its files, and starts (it used to refuse, for good).
            for node in list(cluster.brokers):
                await cluster.stop_broker(node)
                restarted = await cluster.start_broker(node)
                assert restarted.failure is None
                body = await _quarantined(cluster, restarted.address)
                assert body["total"] == 1, (node, body)
            master = await cluster.master()
            again = await cluster.send(master.address, "TopicA", b"again")
            assert again.code == 0, again.remark
            info = await cluster.request(master.address, MQRequestCode.GET_BROKER_RUNTIME_INFO)
            assert json.loads(info.body)["table"]["quarantinedEntries"] == "1"
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 80))
