"""``ConsumerRunningInfo``: a consumer client's own account of itself (GET_CONSUMER_RUNNING_INFO).

``mqadmin consumerStatus`` asks a broker (request code 307, header ``consumerGroup``,
``clientId``, ``jstackEnable``); the broker asks the client on the connection its heartbeats came
in on, and hands the client's answer back unchanged. The body is RocketMQ's
``ConsumerRunningInfo`` as fastjson writes it:

- ``properties``: string settings, among them ``PROP_CONSUME_TYPE`` (``CONSUME_PASSIVELY`` for a
  push consumer), ``PROP_CONSUMEORDERLY``, ``PROP_CLIENT_VERSION``,
  ``PROP_CONSUMER_START_TIMESTAMP`` (epoch ms), ``PROP_NAMESERVER_ADDR``,
  ``PROP_THREADPOOL_CORE_SIZE``, and the consumer's settings by their Java names;
- ``subscriptionSet``: ``SubscriptionData`` objects (``topic``, ``subString``,
  ``expressionType``, ...);
- ``mqTable``: a map *keyed by* ``MessageQueue`` objects to ``ProcessQueueInfo``
  (``commitOffset``, ``cachedMsgCount``, ``locked``, ``lastPullTimestamp``, ...). fastjson
  writes such a map with JSON objects as keys (``{{"brokerName":..,"queueId":0,"topic":..}:{..}}``),
  which no standard JSON parser reads: ``decode`` has its own object parser for it, and
  ``encode`` writes the same form so a Java ``mqadmin`` can read our clients' answers;
- ``statusTable``: topic -> ``ConsumeStatus`` (pull and consume RT / TPS), ``jstack``.

Fields missing take Java's defaults and unknown ones are ignored, as everywhere in ``wire``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from json.scanner import py_make_scanner  # type: ignore[attr-defined]
from typing import Final

from ledgermq.errors import BadRequestError

__all__ = [
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ConsumerRunningInfo",
    "QueueRunningInfo",
    "SubscriptionInfo",
    "TopicConsumeStatus",
]

PROP_NAMESERVER_ADDR: Final = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE: Final = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY: Final = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE: Final = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION: Final = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP: Final = "PROP_CONSUMER_START_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """One ``SubscriptionData`` of ``subscriptionSet``."""

    topic: str
    expression: str
    expression_type: str = "TAG"


@dataclass(frozen=True, slots=True)
class QueueRunningInfo:
    """One queue the client holds (an ``mqTable`` entry): where it is and what it has cached."""

    topic: str
    broker_name: str
    queue_id: int
    commit_offset: int
    """The client's offset of the queue (next to consume), possibly not committed yet."""
    cached_count: int = 0
    cached_min_offset: int = 0
    cached_max_offset: int = 0
    locked: bool = False
    dropped: bool = False
    last_lock_ms: int = 0
    last_pull_ms: int = 0
    last_consume_ms: int = 0


@dataclass(frozen=True, slots=True)
class TopicConsumeStatus:
    """One ``statusTable`` entry (``ConsumeStatus``): a topic's recent pull and consume rates."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo:
    """A client's answer to GET_CONSUMER_RUNNING_INFO (see the module docstring)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscriptions: tuple[SubscriptionInfo, ...] = ()
    queues: tuple[QueueRunningInfo, ...] = ()
    status: dict[str, TopicConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    @property
    def consume_type(self) -> str:
        """``CONSUME_PASSIVELY`` (push), ``CONSUME_ACTIVELY`` (pull), ``CONSUME_POP``, or ''."""
        return self.properties.get(PROP_CONSUME_TYPE, "")

    def encode(self) -> bytes:
        """fastjson's layout, ``mqTable`` keyed by ``MessageQueue`` objects (Java reads it)."""
        queues = sorted(self.queues, key=lambda q: (q.topic, q.broker_name, q.queue_id))
        mq_table = ",".join(
            _dumps({"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic})
            + ":"
            + _dumps(_queue_object(q))
            for q in queues
        )
        head = {
            "properties": dict(sorted(self.properties.items())),
            "subscriptionSet": [
                {
                    "classFilterMode": False,
                    "codeSet": [],
                    "expressionType": s.expression_type,
                    "subString": s.expression,
                    "subVersion": 0,
                    "tagsSet": [],
                    "topic": s.topic,
                }
                for s in sorted(self.subscriptions, key=lambda s: s.topic)
            ],
            "statusTable": {t: _status_object(s) for t, s in sorted(self.status.items())},
        }
        if self.jstack is not None:
            head["jstack"] = self.jstack
        return (_dumps(head)[:-1] + ',"mqTable":{' + mq_table + "}}").encode("ascii")

    @classmethod
    def decode(cls, body: bytes) -> ConsumerRunningInfo:
        """Parse a client's answer (fastjson's object keys allowed).

        Raises:
            BadRequestError: the body is not such an object.
        """
        try:
            data = _loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, StopIteration, RecursionError) as exc:
            raise BadRequestError(f"the consumer's running info is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise BadRequestError("the consumer's running info is not a JSON object")
        try:
            return cls(
                properties={str(k): _text(v) for k, v in (data.get("properties") or {}).items()},
                subscriptions=tuple(
                    SubscriptionInfo(
                        str(s.get("topic", "")),
                        str(s.get("subString", "*") or "*"),
                        str(s.get("expressionType", "TAG") or "TAG"),
                    )
                    for s in data.get("subscriptionSet") or ()
                    if isinstance(s, dict)
                ),
                queues=tuple(_queues(data.get("mqTable"))),
                status={
                    str(topic): _status(value)
                    for topic, value in _pairs(data.get("statusTable"))
                    if isinstance(value, dict)
                },
                jstack=str(data["jstack"]) if data.get("jstack") is not None else None,
            )
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise BadRequestError(f"the consumer's running info is malformed: {exc}") from None


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _queue_object(q: QueueRunningInfo) -> dict[str, object]:
    return {
        "cachedMsgCount": q.cached_count,
        "cachedMsgMaxOffset": q.cached_max_offset,
        "cachedMsgMinOffset": q.cached_min_offset,
        "cachedMsgSizeInMiB": 0,
        "commitOffset": q.commit_offset,
        "dropped": q.dropped,
        "lastConsumeTimestamp": q.last_consume_ms,
        "lastLockTimestamp": q.last_lock_ms,
        "lastPullTimestamp": q.last_pull_ms,
        "locked": q.locked,
        "transactionMsgCount": 0,
        "transactionMsgMaxOffset": 0,
        "transactionMsgMinOffset": 0,
        "tryUnlockTimes": 0,
    }


def _status_object(s: TopicConsumeStatus) -> dict[str, object]:
    return {
        "consumeFailedMsgs": s.consume_failed_msgs,
        "consumeFailedTPS": s.consume_failed_tps,
        "consumeOKTPS": s.consume_ok_tps,
        "consumeRT": s.consume_rt,
        "pullRT": s.pull_rt,
        "pullTPS": s.pull_tps,
    }


def _int(value: object) -> int:
    """A JSON number (or numeric text) as an int; a missing one is 0, as Java's default."""
    if value is None:
        return 0
    if isinstance(value, bool | int | float | str):
        return int(value)
    raise TypeError(f"expected a number, got {value!r}")


def _float(value: object) -> float:
    if value is None:
        return 0.0
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"expected a number, got {value!r}")


def _status(value: Mapping[str, object]) -> TopicConsumeStatus:
    return TopicConsumeStatus(
        pull_rt=_float(value.get("pullRT")),
        pull_tps=_float(value.get("pullTPS")),
        consume_rt=_float(value.get("consumeRT")),
        consume_ok_tps=_float(value.get("consumeOKTPS")),
        consume_failed_tps=_float(value.get("consumeFailedTPS")),
        consume_failed_msgs=_int(value.get("consumeFailedMsgs")),
    )


def _queues(table: object) -> list[QueueRunningInfo]:
    out = []
    for key, value in _pairs(table):
        if not isinstance(key, dict) or not isinstance(value, dict):
            continue
        out.append(
            QueueRunningInfo(
                topic=str(key["topic"]),
                broker_name=str(key["brokerName"]),
                queue_id=_int(key["queueId"]),
                commit_offset=_int(value.get("commitOffset")),
                cached_count=_int(value.get("cachedMsgCount")),
                cached_min_offset=_int(value.get("cachedMsgMinOffset")),
                cached_max_offset=_int(value.get("cachedMsgMaxOffset")),
                locked=value.get("locked") is True,
                # "droped" is RocketMQ 4's spelling of the field
                dropped=value.get("dropped", value.get("droped")) is True,
                last_lock_ms=_int(value.get("lastLockTimestamp")),
                last_pull_ms=_int(value.get("lastPullTimestamp")),
                last_consume_ms=_int(value.get("lastConsumeTimestamp")),
            )
        )
    return sorted(out, key=lambda q: (q.topic, q.broker_name, q.queue_id))


# ---------------------------------------------------------------------- fastjson maps
class _Pairs(list[tuple[object, object]]):
    """A JSON object with a key no ``dict`` can hold (an object): its (key, value) pairs."""


def _pairs(value: object) -> list[tuple[object, object]]:
    if isinstance(value, _Pairs):
        return list(value)
    if isinstance(value, dict):
        return list(value.items())
    return []


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_Scan = Callable[[str, int], tuple[object, int]]


def _parse_object(
    s_and_end: tuple[str, int],
    strict: bool,
    scan_once: _Scan,
    object_hook: object,
    object_pairs_hook: object,
    memo: object = None,
) -> tuple[object, int]:
    """``json``'s object parser, but a key may be any JSON value (fastjson's map keys)."""
    s, end = s_and_end
    pairs = _Pairs()
    end = _WHITESPACE.match(s, end).end()  # type: ignore[union-attr]
    if s[end : end + 1] == "}":
        return {}, end + 1
    while True:
        key, end = _value(s, end, scan_once)
        end = _WHITESPACE.match(s, end).end()  # type: ignore[union-attr]
        if s[end : end + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", s, end)
        value, end = _value(s, _WHITESPACE.match(s, end + 1).end(), scan_once)  # type: ignore[union-attr]
        pairs.append((key, value))
        end = _WHITESPACE.match(s, end).end()  # type: ignore[union-attr]
        delimiter = s[end : end + 1]
        end += 1
        if delimiter == "}":
            break
        if delimiter != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", s, end - 1)
        end = _WHITESPACE.match(s, end).end()  # type: ignore[union-attr]
    if all(isinstance(k, str | int | float | bool) or k is None for k, _ in pairs):
        return {str(k) if not isinstance(k, str) else k: v for k, v in pairs}, end
    return pairs, end


def _value(s: str, end: int, scan_once: _Scan) -> tuple[object, int]:
    try:
        result: tuple[object, int] = scan_once(s, end)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", s, stop.value) from None
    return result


class _FastjsonDecoder(json.JSONDecoder):
    def __init__(self) -> None:
        super().__init__()
        self.parse_object = _parse_object
        self.scan_once = py_make_scanner(self)


def _loads(text: str) -> object:
    return _FastjsonDecoder().decode(text)
