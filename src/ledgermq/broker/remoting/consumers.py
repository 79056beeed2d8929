"""The remoting bodies of client management, parsed: HEART_BEAT's ``HeartbeatData``, the lock
requests' ``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` and CHECK_CLIENT_CONFIG's
``CheckClientRequestBody`` (JSON), and the queue objects a lock answer names.

HEART_BEAT (34) tells the broker which producer and consumer groups a client belongs to and what
its consumers subscribe to; LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (41 / 42) lock the queues an orderly
consumer consumes. What they mean is the broker's registry of clients
(``broker.service.client_registry``, fed by both doors), checked by
``broker.service.clients.ClientService``; this module only reads and writes the remoting JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ledgermq.broker.service.client_registry import QueueId
from ledgermq.errors import BadRequestError
from ledgermq.messaging.sessions import ConsumerData, Heartbeat
from ledgermq.wire.json_fields import check_json_budget

if TYPE_CHECKING:
    from ledgermq.broker.service.client_registry import ConsumerManager
    from ledgermq.net import Connection

__all__ = [
    "ClientCheck",
    "Heartbeat",
    "LockRequest",
    "Registry",
    "parse_check_client_body",
    "parse_heartbeat",
    "parse_lock_body",
    "queue_object",
]

Registry: TypeAlias = "ConsumerManager[Connection]"
"""The broker's client registry as this door fills it: its members' channels are connections."""

_CONSUME_TYPES: Final = {0: "CONSUME_ACTIVELY", 1: "CONSUME_PASSIVELY", 2: "CONSUME_POP"}
_MESSAGE_MODELS: Final = {0: "BROADCASTING", 1: "CLUSTERING"}
_CONSUME_FROM: Final = {
    0: "CONSUME_FROM_LAST_OFFSET",
    1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    2: "CONSUME_FROM_MIN_OFFSET",
    3: "CONSUME_FROM_MAX_OFFSET",
    4: "CONSUME_FROM_FIRST_OFFSET",
    5: "CONSUME_FROM_TIMESTAMP",
}


def _enum(value: object, names: dict[int, str], default: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, default)
    if isinstance(value, str) and value:
        return value
    return default


def parse_heartbeat(body: bytes) -> Heartbeat:
    """``HeartbeatData`` JSON: Java's enum names or the C++ client's integers, both accepted."""
    check_json_budget(body, "the heartbeat body")
    try:
        data = json.loads(body)
        client_id = data["clientID"]
        if not isinstance(client_id, str) or not client_id:
            raise TypeError("clientID must be a non-empty string")  # noqa: TRY301 - one handler for every malformation
        producers = tuple(str(p["groupName"]) for p in data.get("producerDataSet") or ())
        consumers = []
        for c in data.get("consumerDataSet") or ():
            subs = {}
            types = {}
            for s in c.get("subscriptionDataSet") or ():
                subs[str(s["topic"])] = str(s.get("subString") or "*")
                types[str(s["topic"])] = str(s.get("expressionType") or "TAG")
            consumers.append(
                ConsumerData(
                    group=str(c["groupName"]),
                    consume_type=_enum(c.get("consumeType"), _CONSUME_TYPES, "CONSUME_PASSIVELY"),
                    message_model=_enum(c.get("messageModel"), _MESSAGE_MODELS, "CLUSTERING"),
                    consume_from_where=_enum(
                        c.get("consumeFromWhere"), _CONSUME_FROM, "CONSUME_FROM_LAST_OFFSET"
                    ),
                    subscriptions=subs,
                    expression_types=types,
                )
            )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequestError(
            f"the heartbeat body is not valid HeartbeatData JSON: {exc}"
        ) from None
    return Heartbeat(client_id, producers, tuple(consumers))


def queue_object(queue: QueueId) -> dict[str, Any]:
    """``MessageQueue`` as RocketMQ's JSON names it (a lock answer's ``lockOKMQSet``)."""
    return {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id}


def _queue_id(value: Any) -> QueueId:
    return QueueId(str(value["topic"]), str(value["brokerName"]), int(value["queueId"]))


LockRequest: TypeAlias = "tuple[str, str, list[QueueId]]"
"""A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body: (clientId, consumerGroup, its queues)."""


def parse_lock_body(body: bytes) -> LockRequest:
    """``LockBatchRequestBody`` / ``UnlockBatchRequestBody``: (clientId, group, queues)."""
    check_json_budget(body, "the lock request body")
    try:
        data = json.loads(body)
        queues = [_queue_id(q) for q in data.get("mqSet") or ()]
        return str(data["clientId"]), str(data["consumerGroup"]), queues
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequestError(f"the lock request body is not valid JSON: {exc}") from None


@dataclass(frozen=True, slots=True)
class ClientCheck:
    """``CheckClientRequestBody``: a consumer asks whether the broker takes its subscription."""

    client_id: str
    group: str
    topic: str
    expression: str
    expression_type: str | None


def parse_check_client_body(body: bytes) -> ClientCheck | None:
    """The JSON body of CHECK_CLIENT_CONFIG; None when it carries no ``subscriptionData``
    (RocketMQ answers SUCCESS then).

    Raises:
        BadRequestError: the body is not that JSON object.
    """
    check_json_budget(body, "the client check body")
    try:
        data = json.loads(body or b"{}")
        if not isinstance(data, dict):
            raise TypeError("the body is not a JSON object")  # noqa: TRY301 - one handler
        sub = data.get("subscriptionData")
        if sub is None:
            return None
        if not isinstance(sub, dict):
            raise TypeError("subscriptionData is not an object")  # noqa: TRY301
        expression_type = sub.get("expressionType")
        return ClientCheck(
            client_id=str(data.get("clientId") or ""),
            group=str(data.get("group") or ""),
            topic=str(sub.get("topic") or ""),
            expression=str(sub.get("subString") or ""),
            expression_type=None if expression_type is None else str(expression_type),
        )
    except (ValueError, TypeError) as exc:
        raise BadRequestError(
            f"the CHECK_CLIENT_CONFIG body is not valid CheckClientRequestBody JSON: {exc}"
        ) from None
