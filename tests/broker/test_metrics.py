"""The broker's figures on a replica's /metrics (issue 18 section 2): traffic per topic,
request counts and latencies, consumer lag per group, dispatch lag, disk, connections."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledgermq.broker.service.message_writer import MessageWriter
from ledgermq.broker.state.topics import SCHEDULE_TOPIC
from ledgermq.broker.storage.commitlog import CHANNEL_MESSAGES
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.message import encode_properties, encode_record

from .harness import Cluster

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.broker.server import BrokerServer

    Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]

pytestmark = pytest.mark.timeout(90)


def _scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name -> sorted labels -> value, of every sample on ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


async def _scrape_when(port: int, check: Callable[[Samples], None]) -> Samples:
    """Scrape until ``check`` (the test's assertions) passes, 10 s at most (then its failure
    is raised): the housekeeping pass folds the counters into the snapshot once a second, so
    the figures come within a second or two, and the test waits for them, not a fixed time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    while True:
        samples = await asyncio.to_thread(_scrape, port)
        try:
            check(samples)
        except AssertionError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)
        else:
            return samples


def _value(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str,
           **labels: str) -> float:  # fmt: skip
    matches = [v for k, v in samples.get(name, {}).items() if set(labels.items()) <= set(k)]
    assert len(matches) == 1, (name, labels, samples.get(name))
    return matches[0]


def test_the_master_shows_its_traffic_lag_and_requests(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, metrics_port=0)
        try:
            await cluster.start()
            master = await cluster.master()
            address = master.address
            for i in range(7):
                answer = await cluster.send(address, "Metered", f"m{i}".encode(), queue_id=0)
                assert answer.code == MQResponseCode.SUCCESS, answer.remark
            pulled = await cluster.pull(address, "Metered", 0, 0, group="meter-group")
            assert pulled.code == MQResponseCode.SUCCESS
            fields = {"consumerGroup": "meter-group", "topic": "Metered", "queueId": "0",
                      "commitOffset": "3"}  # fmt: skip
            commit = await cluster.request(address, MQRequestCode.UPDATE_CONSUMER_OFFSET, fields)
            assert commit.code == MQResponseCode.SUCCESS
            port = master.ledger.metrics_port
            assert port is not None
            await _scrape_when(port, lambda samples: _check_traffic(samples, master))
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 80))


def _check_traffic(samples: Samples, master: BrokerServer) -> None:
    """What ``test_the_master_shows_its_traffic_lag_and_requests`` must see on /metrics."""
    base = {"broker": "broker-a", "cluster": "DefaultCluster"}
    assert _value(samples, "ledgermq_broker_messages_in_total", topic="Metered", **base) == 7
    assert _value(samples, "ledgermq_broker_bytes_in_total", topic="Metered", **base) > 7
    assert _value(samples, "ledgermq_broker_messages_out_total", topic="Metered") == 7
    assert _value(samples, "rocketmq_group_diff", group="meter-group", topic="Metered") == 4
    sends = _value(samples, "ledgermq_broker_requests_total", code="SEND_MESSAGE",
                   response="0")  # fmt: skip
    assert sends == 7
    latency = _value(samples, "ledgermq_broker_request_latency_seconds_count",
                     request="send", topic="Metered")  # fmt: skip
    assert latency == 7
    assert _value(samples, "ledgermq_broker_master") == 1
    assert _value(samples, "ledgermq_broker_dispatch_lag_entries") == 0
    assert _value(samples, "ledgermq_broker_connections") >= 1
    assert _value(samples, "ledgermq_broker_disk_bytes", kind="commitlog") > 0
    assert "rocketmq_producer_tps" in samples
    # the ledger's series stay beside them, labelled as the broker's (issue 28 item 3)
    replica = {**base, "replica": master.config.dleger_self_id}
    assert _value(samples, "ledgermq_commit_index", **replica) > 0
    assert _value(samples, "ledgermq_append_latency_seconds_count", **replica) >= 7
    # and the process figures (issue 28 item 2)
    assert _value(samples, "process_resident_memory_bytes") > 0
    assert _value(samples, "process_open_fds") > 0


def test_quarantined_entries_and_dropped_heads_are_counted(tmp_path: Path) -> None:
    """Issue 25: an entry no replica can apply, and a delay head that can never be delivered,
    are skipped; each is counted where an operator's alert can see it."""

    async def main() -> None:
        cluster = Cluster(tmp_path, metrics_port=0)
        try:
            await cluster.start()
            master = await cluster.master()
            state = master.state
            assert state is not None
            poison = encode_record(
                topic="%DLQ%orders.v1", queue_id=0, body=b"poison", born_timestamp=1,
                born_host=("10.0.0.1", 5), store_timestamp=7, store_host=("10.0.0.2", 6),
            )  # fmt: skip
            await master.ledger.append([poison], channel=CHANNEL_MESSAGES)
            delayed = {"REAL_TOPIC": "%RETRY%" + "g" * 125, "REAL_QID": "0", "DELAY": "1"}
            await MessageWriter(state).put(
                SCHEDULE_TOPIC, 0, [(b"never", 0, encode_properties(delayed))]
            )
            port = master.ledger.metrics_port
            assert port is not None
            await _scrape_when(port, _check_skips_counted)  # due after 1 s, then folded
        finally:
            await cluster.close()

    asyncio.run(asyncio.wait_for(main(), 80))


def _check_skips_counted(samples: Samples) -> None:
    assert _value(samples, "ledgermq_broker_quarantined_entries_total") == 1
    assert _value(samples, "ledgermq_broker_scheduler_dropped_total", scheduler="delay") == 1
