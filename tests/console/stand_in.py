"""A stand-in cluster for the console's in-process tests: an ``Admin`` look-alike that answers
from Python data (one broker group, ``broker-a``), and a client for the app on it.

The pages' logic (paging, reserved names, the subscriptions offered, masking, the history) is
tested through Starlette's TestClient against it in milliseconds; the same pages are checked
against real processes and a real browser in test_browser_pages.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from starlette.testclient import TestClient

from ledgermq.client import ConsumerConnection, ConsumerProgress, QueueStats
from ledgermq.client.admin import ProducerConnection
from ledgermq.console.access import AclMode
from ledgermq.console.app import create_app
from ledgermq.console.link import ClusterLink
from ledgermq.errors import MQResponseError, TopicNotFoundError
from ledgermq.wire import MessageExt, MQResponseCode
from ledgermq.wire.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from tests.console.test_rates import FakeClock

if TYPE_CHECKING:
    from ledgermq.client import Admin
    from ledgermq.client.trace import TraceEvent

BROKER = "127.0.0.1:10911"


def message(topic: str, n: int, *, keys: str = "", store_ms: int = 1_764_000_000_000) -> MessageExt:
    """Message ``n`` of ``topic``, stored ``n`` ms after ``store_ms``."""
    return MessageExt(
        topic=topic,
        queue_id=0,
        flag=0,
        queue_offset=n,
        commit_log_offset=1000 + n * 100,
        sys_flag=0,
        born_timestamp=store_ms + n,
        born_host="127.0.0.1:50000",
        store_timestamp=store_ms + n,
        store_host=BROKER,
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"body %d" % n,
        properties={"KEYS": keys} if keys else {},
        body_crc=0,
        store_size=100,
    )


@dataclass
class StandInAdmin:
    """The Admin calls the console's pages make, answered from these fields."""

    topics: dict[str, list[MessageExt]] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    progress: dict[str, list[ConsumerProgress]] = field(default_factory=dict)
    connections: dict[str, list[ConsumerConnection]] = field(default_factory=dict)
    producers: dict[str, list[ProducerConnection]] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    traces: dict[str, list[TraceEvent]] = field(default_factory=dict)
    runtime: dict[str, str] = field(default_factory=lambda: {"brokerRole": "SYNC_MASTER"})
    key_batch: int = 64
    """Most messages one QUERY_MESSAGE answers with (the broker clamps maxNum to 64)."""
    calls: list[str] = field(default_factory=list)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: BROKER})},
            {"DefaultCluster": ("broker-a",)},
        )

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        return dict(self.runtime)

    async def broker_config(self, address: str) -> dict[str, str]:
        self.calls.append(f"broker_config {address}")
        return dict(self.config)

    async def topic_list(self) -> list[str]:
        return sorted(self.topics)

    async def topic_route(self, topic: str) -> TopicRouteData:
        if topic not in self.topics:
            raise TopicNotFoundError(f"no route for topic {topic}")
        return TopicRouteData(
            (QueueData("broker-a", 1, 1, 6),),
            (BrokerData("DefaultCluster", "broker-a", {0: BROKER}),),
        )

    async def topic_stats(self, topic: str) -> list[QueueStats]:
        await self.topic_route(topic)
        return [QueueStats(topic, "broker-a", 0, 0, len(self.topics[topic]))]

    async def create_topic(self, topic: str, queue_nums: int, **_: Any) -> list[str]:
        self.calls.append(f"create_topic {topic}")
        self.topics.setdefault(topic, [])
        return ["broker-a"]

    async def consumer_groups(self, **_: Any) -> dict[str, dict[str, dict[str, Any]]]:
        return {g: {"broker-a": c} for g, c in sorted(self.groups.items())}

    async def update_group(self, group: str, **settings: Any) -> list[str]:
        self.calls.append(f"update_group {group}")
        self.groups.setdefault(group, {}).update(settings)
        return ["broker-a"]

    async def consumer_progress(
        self, group: str, topic: str | None = None
    ) -> list[ConsumerProgress]:
        rows = self.progress.get(group, [])
        return [r for r in rows if topic is None or r.topic == topic]

    async def consumer_lags(self) -> dict[str, list[ConsumerProgress]]:
        return {g: self.progress.get(g, []) for g in sorted(set(self.groups) | set(self.progress))}

    async def consumer_connections(self, group: str) -> list[ConsumerConnection]:
        return list(self.connections.get(group, []))

    async def producer_connections(self, group: str) -> list[ProducerConnection]:
        self.calls.append(f"producer_connections {group}")
        return list(self.producers.get(group, []))

    async def query_message(
        self, topic: str, key: str, *, max_num: int = 32, begin_ms: int = 0, end_ms: int = 1 << 62
    ) -> list[MessageExt]:
        """As a broker answers: the newest ``min(max_num, key_batch)`` in the time range."""
        await self.topic_route(topic)
        self.calls.append(f"query_message {topic} {key} <= {end_ms}")
        hits = [
            m
            for m in self.topics[topic]
            if key in m.keys and begin_ms <= m.store_timestamp <= end_ms
        ]
        hits.sort(key=lambda m: m.store_timestamp, reverse=True)
        found = hits[: min(max_num, self.key_batch)]
        return sorted(found, key=lambda m: (m.store_timestamp, m.commit_log_offset))

    async def messages_between(
        self, topic: str, begin_ms: int, end_ms: int, *, max_messages: int = 100
    ) -> list[MessageExt]:
        await self.topic_route(topic)
        self.calls.append(f"messages_between {topic} max {max_messages}")
        inside = [m for m in self.topics[topic] if begin_ms <= m.store_timestamp <= end_ms]
        return inside[:max_messages]

    async def find_message(self, msg_id: str, **_: Any) -> list[MessageExt]:
        for messages in self.topics.values():
            for m in messages:
                if msg_id in (m.msg_id, m.offset_msg_id):
                    return [m]
        raise MQResponseError(f"no message {msg_id}", MQResponseCode.QUERY_NOT_FOUND)

    async def message_trace(self, msg_id: str, **_: Any) -> list[TraceEvent]:
        return list(self.traces.get(msg_id, []))


class StandInLink(ClusterLink):
    """A ClusterLink whose Admin is the stand-in."""

    def __init__(self, admin: StandInAdmin) -> None:
        super().__init__("127.0.0.1:9876")
        self.admin = cast("Admin", admin)

    async def close(self) -> None:
        return None


def client(admin: StandInAdmin, clock: FakeClock | None = None) -> TestClient:
    """The console on ``admin``, nobody signing in (ACL off), redirects not followed."""
    app = create_app(StandInLink(admin), clock=clock or FakeClock(), acl=AclMode.OFF)
    return TestClient(app, follow_redirects=False)


def token(page: str) -> str:
    """The form token in a page."""
    marker = 'name="token" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]
