"""The sink and topics that do not exist yet: it follows the cluster's ``autoCreateTopicEnable``
as a producer does (issue 13 item 19), as Kafka's sink follows ``auto.create.topics.enable``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')")

from ledgermq.client import SyncAdmin, SyncProducer, SyncPullConsumer
from ledgermq.errors import ConfigError, TopicNotFoundError
from ledgermq.spark._sink_io import OutRow, write_partition
from ledgermq.spark.planning import parse_sink_options
from ledgermq.testing.broker_cluster import BrokerCluster

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.wire import MessageExt

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(240)]


def _consume_all(namesrv: str, topic: str) -> list[MessageExt]:
    messages: list[MessageExt] = []
    with SyncPullConsumer("auto-create-check", namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset = 0
            while offset < consumer.max_offset(mq):
                result = consumer.pull(mq, offset, 256)
                messages.extend(result.messages)
                offset = result.next_begin_offset
    return messages


def _queue_count(namesrv: str, topic: str) -> int:
    with SyncAdmin(namesrv) as admin:
        return sum(q.write_queue_nums for q in admin.topic_route(topic).queue_datas)


def test_batch_write_creates_a_new_topic_when_the_cluster_auto_creates(
    spark: Any, cluster: BrokerCluster
) -> None:
    namesrv = cluster.namesrv_addr
    rows = [(f"new-{i}", f"t{i % 2}") for i in range(50)]
    df = spark.createDataFrame(rows, "body STRING, tags STRING").repartition(2)
    df.write.format("ledgermq").option("namesrvAddr", namesrv).option(
        "topic", "SparkAutoCreated"
    ).mode("append").save()
    got = sorted(m.body.decode() for m in _consume_all(namesrv, "SparkAutoCreated"))
    assert got == sorted(body for body, _ in rows)
    # the queues a producer's first send would have created: min(4, TBW102's 8)
    with SyncProducer("auto-create-producer", namesrv) as producer:
        assert producer.send("ProducerAutoCreated", b"x").ok
    assert _queue_count(namesrv, "SparkAutoCreated") == _queue_count(namesrv, "ProducerAutoCreated")


def test_exactly_once_write_to_a_new_topic(cluster: BrokerCluster) -> None:
    """The executor-side function on a topic with no route: created, written once."""
    namesrv = cluster.namesrv_addr
    options = parse_sink_options({"namesrvAddr": namesrv})
    rows: list[OutRow] = [("SparkAutoOnce", b"r%d" % i, None, None, None) for i in range(30)]
    assert write_partition(options, rows, sink_id="auto1", batch=0, part=1, attempt=0) == (30, 0)
    assert write_partition(options, rows, sink_id="auto1", batch=0, part=1, attempt=1) == (0, 30)
    assert sorted(m.body for m in _consume_all(namesrv, "SparkAutoOnce")) == sorted(
        r[1] for r in rows
    )


def test_write_to_an_unknown_topic_fails_clearly_without_auto_create(tmp_path: Path) -> None:
    off = BrokerCluster(tmp_path, replicas=3, extra_settings={"autoCreateTopicEnable": "false"})
    try:
        # no TBW102 without auto-creation: wait for the route of the master's delay-level topic
        off.wait_routable("SCHEDULE_TOPIC_XXXX", timeout_s=30.0)
        namesrv = off.namesrv_addr
        options = parse_sink_options({"namesrvAddr": namesrv})
        rows: list[OutRow] = [("SparkNoAuto", b"x", None, None, None)]
        for sink_id in ("noauto", None):
            with pytest.raises(ConfigError) as info:
                write_partition(options, rows, sink_id=sink_id, batch=0, part=0, attempt=0)
            assert str(info.value) == (
                f"unknown topic 'SparkNoAuto': the NameServer {namesrv} has no route for it, "
                "and the cluster does not create topics on first send "
                "(autoCreateTopicEnable=false); create it first (ledgermq admin topic-create)"
            )
        with SyncAdmin(namesrv) as admin, pytest.raises(TopicNotFoundError):
            admin.topic_route("SparkNoAuto")
    finally:
        off.close()
