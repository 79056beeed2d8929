"""Route and registration data shapes, as JSON with RocketMQ's field names.

The NameServer, the broker and the clients all exchange these bodies
(protocol-remoting-and-grpc.md sections 2.5 and 2.6); the classes mirror RocketMQ's
``TopicConfig``, ``QueueData``, ``BrokerData``, ``TopicRouteData``, ``DataVersion``,
``RegisterBrokerBody``, ``ClusterInfo`` and ``TopicList``. Python attributes are snake_case;
the JSON keys are Java's camelCase field names.

What we write is standard JSON. What we read is what Java and C++ send: fastjson's numeric
object keys (``"brokerAddrs":{0:"addr"}`` from old Java NameServers) are accepted, fields that
fastjson leaves out when null take Java's defaults, and fields we do not know are ignored
(``json_fields`` module). Anything else that is wrong (not JSON, wrong types, numbers out of
Java's range, a bad checksum, a body that does not inflate) raises ``BadRequestError`` and
nothing else, so a server answers it and a client catches one class.

Broker ids are ints here (``brokerAddrs`` keys are Java ``Long``\\ s written as strings).
Objects are frozen; their maps are plain dicts that must not be mutated (frozen dataclasses
holding dicts are not hashable, and nothing here needs them to be).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.wire.json_fields import (
    INT64,
    JsonObject,
    as_integer,
    as_text,
    as_text_array,
    bad_json,
    dump_json,
    load_json,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MASTER_ID",
    "MAX_REGISTER_BODY_BYTES",
    "MAX_REGISTER_VALUES",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicList",
    "TopicRouteData",
    "body_crc32",
    "is_readable",
    "is_writable",
]

# ``PermName.java``: bits of ``perm``; 6 = read + write.
PERM_PRIORITY: Final = 8
PERM_READ: Final = 4
PERM_WRITE: Final = 2
PERM_INHERIT: Final = 1

MASTER_ID: Final = 0
"""``MixAll.MASTER_ID``: the broker id of a group's master (in DLedger mode, the Raft leader)."""

MAX_REGISTER_BODY_BYTES: Final = 64 * 1024 * 1024
"""Most bytes a compressed registration may inflate to; a bigger one is refused, not buffered."""
MAX_REGISTER_VALUES: Final = 1_000_000
"""Most JSON values (separators, ``json_fields.check_json_budget``) a registration may hold:
about 60,000 topics, each about 16. A 14 MiB registration of tiny values held a NameServer's
loop for 1.4 s before it was parsed (issue 25 item 6); at this bound the parse takes tens of
milliseconds at worst."""


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def body_crc32(body: bytes) -> int:
    """RocketMQ's ``UtilAll.crc32``: zlib's CRC-32 with the sign bit cleared (fits a Java int)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def _load_object(raw: bytes, what: str, max_values: int | None = None) -> JsonObject:
    return JsonObject(load_json(raw, what, max_values), what)


# ---------------------------------------------------------------------------------- topics
@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's queues and permissions on one broker group (``TopicConfig.java``).

    Defaults are Java's: 16 read and 16 write queues, read + write permission.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_object(self) -> dict[str, object]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_object(cls, value: object, path: str) -> TopicConfig:
        obj = JsonObject(value, path)
        return cls(
            topic_name=obj.text("topicName"),
            read_queue_nums=obj.integer("readQueueNums", 16),
            write_queue_nums=obj.integer("writeQueueNums", 16),
            perm=obj.integer("perm", PERM_READ | PERM_WRITE),
            topic_filter_type=obj.optional_text("topicFilterType") or "SINGLE_TAG",
            topic_sys_flag=obj.integer("topicSysFlag", 0),
            order=obj.boolean("order", default=False),
            attributes=obj.text_map("attributes"),
        )

    def to_json(self) -> bytes:
        return dump_json(self.to_object())

    @classmethod
    def from_json(cls, raw: bytes) -> TopicConfig:
        return cls.from_object(load_json(raw, "TopicConfig"), "TopicConfig")


# ---------------------------------------------------------------------------------- routes
@dataclass(frozen=True, slots=True)
class QueueData:
    """A topic's queues on one broker group, as a route lists them (``QueueData.java``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_object(self) -> dict[str, object]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }

    @classmethod
    def from_object(cls, value: object, path: str) -> QueueData:
        obj = JsonObject(value, path)
        return cls(
            broker_name=obj.text("brokerName"),
            read_queue_nums=obj.integer("readQueueNums"),
            write_queue_nums=obj.integer("writeQueueNums"),
            perm=obj.integer("perm"),
            topic_sys_flag=obj.integer("topicSysFlag", 0),
        )

    @classmethod
    def of_topic(cls, broker_name: str, config: TopicConfig) -> QueueData:
        """The queue data a master's topic config gives its group (``createAndUpdateQueueData``)."""
        return cls(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker group: its members by broker id (``BrokerData.java``); id 0 is the master."""

    cluster: str
    broker_name: str
    broker_addrs: Mapping[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    @property
    def master_addr(self) -> str | None:
        """The master's address, or None while the group has no master registered."""
        return self.broker_addrs.get(MASTER_ID)

    def to_object(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "enableActingMaster": self.enable_acting_master,
            "zoneName": self.zone_name,
        }

    @classmethod
    def from_object(cls, value: object, path: str) -> BrokerData:
        obj = JsonObject(value, path)
        addrs: dict[int, str] = {}
        for key, addr, where in obj.entries("brokerAddrs"):
            if not (key.isascii() and key.removeprefix("-").isdigit()):
                raise bad_json(f"{where}: broker id {key!r:.30} is not an integer")
            addrs[as_integer(int(key), where, INT64)] = as_text(addr, where)
        return cls(
            cluster=obj.text("cluster"),
            broker_name=obj.text("brokerName"),
            broker_addrs=addrs,
            enable_acting_master=obj.boolean("enableActingMaster", default=False),
            zone_name=obj.optional_text("zoneName"),
        )


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Where a topic lives (``TopicRouteData.java``): the answer to GET_ROUTEINFO_BY_TOPIC.

    ``queue_datas`` says how many queues each group holds; ``broker_datas`` says who is in each
    of those groups. ``filter_server_table`` maps a broker address to its filter servers
    (unused by us, kept for the shape).
    """

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None
    filter_server_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_object(self) -> dict[str, object]:
        return {
            "orderTopicConf": self.order_topic_conf,
            "queueDatas": [q.to_object() for q in self.queue_datas],
            "brokerDatas": [b.to_object() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
        }

    def to_json(self) -> bytes:
        return dump_json(self.to_object())

    @classmethod
    def from_json(cls, raw: bytes) -> TopicRouteData:
        obj = _load_object(raw, "TopicRouteData")
        filters = {
            addr: as_text_array(servers, where)
            for addr, servers, where in obj.entries("filterServerTable")
        }
        return cls(
            queue_datas=tuple(
                QueueData.from_object(q, f"TopicRouteData.queueDatas[{i}]")
                for i, q in enumerate(obj.array("queueDatas"))
            ),
            broker_datas=tuple(
                BrokerData.from_object(b, f"TopicRouteData.brokerDatas[{i}]")
                for i, b in enumerate(obj.array("brokerDatas"))
            ),
            order_topic_conf=obj.optional_text("orderTopicConf"),
            filter_server_table=filters,
        )


# ---------------------------------------------------------------------------------- registration
@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version stamp of a broker's topic table (``DataVersion.java``; Java ``long`` fields).

    ``stateVersion`` is new in RocketMQ 5; older senders leave it out and it reads as 0.
    """

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def to_object(self) -> dict[str, object]:
        return {
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
            "counter": self.counter,
        }

    @classmethod
    def from_object(cls, value: object, path: str) -> DataVersion:
        obj = JsonObject(value, path)
        return cls(
            state_version=obj.integer("stateVersion", 0, INT64),
            timestamp=obj.integer("timestamp", 0, INT64),
            counter=obj.integer("counter", 0, INT64),
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """The body of REGISTER_BROKER (``RegisterBrokerBody.java``): the sender's topic table.

    JSON shape: ``{"topicConfigSerializeWrapper": {"topicConfigTable": {name: TopicConfig},
    "dataVersion": DataVersion}, "filterServerList": []}``.

    Compression: when the request says ``compressed=true`` the JSON is zlib-deflated. That is
    our convention (both ends are ours, section 2.6). A Java broker's compressed form is a
    different binary layout and is refused as malformed; Java brokers send uncompressed JSON
    unless ``compressedRegister`` is set.
    """

    topic_configs: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()
    filter_server_list: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        return dump_json(
            {
                "topicConfigSerializeWrapper": {
                    "topicConfigTable": {
                        name: config.to_object() for name, config in self.topic_configs.items()
                    },
                    "dataVersion": self.data_version.to_object(),
                },
                "filterServerList": list(self.filter_server_list),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> RegisterBrokerBody:
        """Raises ``BadRequestError`` for a body over ``MAX_REGISTER_VALUES`` before parsing it."""
        obj = _load_object(raw, "RegisterBrokerBody", MAX_REGISTER_VALUES)
        wrapper = obj.child("topicConfigSerializeWrapper")
        configs: dict[str, TopicConfig] = {}
        version = DataVersion()
        if wrapper is not None:
            for name, value, where in wrapper.entries("topicConfigTable"):
                configs[name] = TopicConfig.from_object(value, where)
            if wrapper.get("dataVersion") is not None:
                version = DataVersion.from_object(
                    wrapper.get("dataVersion"), f"{wrapper.path}.dataVersion"
                )
        return cls(
            topic_configs=configs,
            data_version=version,
            filter_server_list=as_text_array(
                obj.get("filterServerList"), "RegisterBrokerBody.filterServerList"
            ),
        )

    def encode(self, *, compressed: bool) -> tuple[bytes, int]:
        """The request body and its ``bodyCrc32`` (``UtilAll.crc32`` of the bytes sent)."""
        raw = self.to_json()
        body = zlib.compress(raw) if compressed else raw
        return body, body_crc32(body)

    @classmethod
    def decode(
        cls, body: bytes, *, compressed: bool, expected_crc32: int | None
    ) -> RegisterBrokerBody:
        """The body of a registration, after checking its CRC against ``bodyCrc32``.

        The CRC covers the bytes as sent (compressed, if they are). Java sends
        ``UtilAll.crc32`` (sign bit cleared); the full unsigned or signed 32-bit value is
        accepted too. ``expected_crc32`` None or 0 means "not sent": the NameServer skips the
        check then, as RocketMQ's does (``checksum`` only runs for a non-zero header).
        """
        if expected_crc32:
            actual = zlib.crc32(body)
            if expected_crc32 & 0xFFFFFFFF != actual and expected_crc32 != actual & 0x7FFFFFFF:
                raise bad_json(
                    f"the registration body's CRC32 is {actual & 0x7FFFFFFF}, but the header "
                    f"says {expected_crc32}: the body was damaged in transit"
                )
        raw = _inflate(body) if compressed else body
        return cls.from_json(raw)


def _inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, MAX_REGISTER_BODY_BYTES)
    except zlib.error as exc:
        raise bad_json(f"the compressed registration body does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise bad_json(
            f"the compressed registration body inflates past {MAX_REGISTER_BODY_BYTES} bytes"
        )
    if not inflater.eof:
        raise bad_json("the compressed registration body is truncated")
    return raw


# ---------------------------------------------------------------------------------- admin views
@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Every broker group and which cluster holds it (``ClusterInfo.java``), for admin tools."""

    broker_addr_table: Mapping[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return dump_json(
            {
                "brokerAddrTable": {k: v.to_object() for k, v in self.broker_addr_table.items()},
                "clusterAddrTable": {k: list(v) for k, v in self.cluster_addr_table.items()},
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> ClusterInfo:
        obj = _load_object(raw, "ClusterInfo")
        brokers = {
            name: BrokerData.from_object(value, where)
            for name, value, where in obj.entries("brokerAddrTable")
        }
        clusters = {
            name: as_text_array(value, where)
            for name, value, where in obj.entries("clusterAddrTable")
        }
        return cls(brokers, clusters)


@dataclass(frozen=True, slots=True)
class TopicList:
    """Names of topics (``TopicList.java``); ``broker_addr`` is set only by some Java answers."""

    topics: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> bytes:
        return dump_json({"topicList": list(self.topics), "brokerAddr": self.broker_addr})

    @classmethod
    def from_json(cls, raw: bytes) -> TopicList:
        obj = _load_object(raw, "TopicList")
        topics = as_text_array(obj.get("topicList"), "TopicList.topicList")
        return cls(topics, obj.optional_text("brokerAddr"))
