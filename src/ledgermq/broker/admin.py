"""Administration requests: topics, subscription groups, offsets, statistics, messages, leadership.

Each handler takes the broker state and the request and returns the response (or raises
``RequestRejectedError``). Changes go through the master and the ledger; reads are served by
any replica from its applied state. Bodies use RocketMQ's JSON field names where RocketMQ has the
request; the statistics bodies are flat lists (RocketMQ's maps keyed by JSON objects are not
valid JSON).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from ledgermq.broker.state.metadata import (
    SubscriptionGroupConfig,
    delete_group_op,
    delete_topic_op,
)
from ledgermq.errors import (
    BadRequestError,
    IndexCompactedError,
    IndexOutOfRangeError,
    InvalidMessageError,
    LedgerMQError,
    MessageFormatError,
    RequestRejectedError,
)
from ledgermq.raft import ResponseCode
from ledgermq.wire import MQResponseCode, ext_bool, ext_int, ext_str
from ledgermq.wire.message import decode_offset_message_id, decode_records, validate_topic
from ledgermq.wire.route import PERM_READ, PERM_WRITE, TopicConfig

if TYPE_CHECKING:
    from ledgermq.broker.consumers import ConsumerManager
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.ledger.server import LedgerServer
    from ledgermq.wire import RemotingCommand

__all__ = [
    "consume_stats",
    "consumer_connections",
    "create_group",
    "create_topic",
    "delete_group",
    "delete_topic",
    "json_body",
    "query_message",
    "runtime_info",
    "topic_stats",
    "transfer_leadership",
    "view_message",
]


def json_body(value: object) -> bytes:
    """A response body in compact JSON."""
    return json.dumps(value, separators=(",", ":")).encode()


async def create_topic(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    fields = command.ext_fields
    topic = ext_str(fields, "topic")
    try:
        validate_topic(topic)
    except InvalidMessageError as exc:
        raise RequestRejectedError(str(exc), MQResponseCode.SYSTEM_ERROR) from None
    read = ext_int(fields, "readQueueNums", 8)
    write = ext_int(fields, "writeQueueNums", read)
    perm = ext_int(fields, "perm", PERM_READ | PERM_WRITE)
    if not (1 <= read <= 1024 and 1 <= write <= 1024):
        raise BadRequestError("readQueueNums and writeQueueNums must be between 1 and 1024")
    config = TopicConfig(
        topic,
        read,
        write,
        perm,
        fields.get("topicFilterType", "SINGLE_TAG"),
        ext_int(fields, "topicSysFlag", 0),
        ext_bool(fields, "order"),
    )
    state.require_master("creating a topic")
    await state.topics.create(config)
    return command.response(MQResponseCode.SUCCESS)


async def delete_topic(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    topic = ext_str(command.ext_fields, "topic")
    state.require_master("deleting a topic")
    await state.writer.submit(delete_topic_op(topic))
    # The queue offsets carry on: the ConsumeQueues keep their units (on every replica; a new
    # master rebuilds its offsets from them), so a topic made again under the same name must
    # not hand out offsets that already name the old messages, or its new ones are unreachable.
    if state.topics.on_topics_changed is not None:
        await state.topics.on_topics_changed()
    return command.response(MQResponseCode.SUCCESS)


async def create_group(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    try:
        config = SubscriptionGroupConfig.from_object(json.loads(command.body))
    except (ValueError, TypeError, AttributeError) as exc:
        raise BadRequestError(f"the subscription group body is not valid: {exc}") from None
    state.require_master("creating a subscription group")
    await state.topics.put_group(config)
    return command.response(MQResponseCode.SUCCESS)


async def delete_group(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    group = ext_str(command.ext_fields, "groupName")
    state.require_master("deleting a subscription group")
    await state.writer.submit(delete_group_op(group))
    return command.response(MQResponseCode.SUCCESS)


def all_topics(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    metadata = state.metadata
    body = {
        "topicConfigTable": {n: c.to_object() for n, c in sorted(metadata.topics.items())},
        "dataVersion": metadata.topic_version.to_object(),
    }
    return command.response(MQResponseCode.SUCCESS, body=json_body(body))


def all_groups(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    metadata = state.metadata
    body = {
        "subscriptionGroupTable": {n: g.to_object() for n, g in sorted(metadata.groups.items())},
        "dataVersion": metadata.group_version.to_object(),
    }
    return command.response(MQResponseCode.SUCCESS, body=json_body(body))


def all_offsets(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    table = {
        f"{topic}@{group}": {str(q): o for q, o in sorted(queues.items())}
        for (topic, group), queues in sorted(state.metadata.offsets.items())
    }
    return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": table}))


def topic_stats(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    topic = ext_str(command.ext_fields, "topic")
    config = state.topics.find(topic)
    if config is None:
        raise RequestRejectedError(f"topic[{topic}] not exist", MQResponseCode.TOPIC_NOT_EXIST)
    rows = []
    for queue_id in range(config.write_queue_nums):
        queue = state.queues.find(topic, queue_id)
        rows.append(
            {
                "topic": topic,
                "brokerName": state.config.broker_name,
                "queueId": queue_id,
                "minOffset": queue.min_offset if queue else 0,
                "maxOffset": queue.max_offset if queue else 0,
            }
        )
    return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": rows}))


def consume_stats(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    """Per queue: the broker's max offset and the group's committed offset (lag = difference)."""
    fields = command.ext_fields
    group = ext_str(fields, "consumerGroup")
    only = fields.get("topic") or None
    topics = [only] if only else state.metadata.topics_of_group(group)
    rows = []
    for topic in topics:
        config = state.topics.find(topic)
        if config is None:
            continue
        for queue_id in range(config.read_queue_nums):
            queue = state.queues.find(topic, queue_id)
            consumer = state.writer.offset(group, topic, queue_id)
            rows.append(
                {
                    "topic": topic,
                    "brokerName": state.config.broker_name,
                    "queueId": queue_id,
                    "brokerOffset": queue.max_offset if queue else 0,
                    "consumerOffset": -1 if consumer is None else consumer,
                }
            )
    return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": rows}))


def consumer_connections(
    state: BrokerState, consumers: ConsumerManager, command: RemotingCommand
) -> RemotingCommand:
    group = ext_str(command.ext_fields, "consumerGroup")
    info = consumers.groups.get(group)
    if info is None:
        raise RequestRejectedError(
            f"the consumer group [{group}] is not online", MQResponseCode.SYSTEM_ERROR
        )
    body = {
        "connectionSet": [
            {
                "clientId": cid,
                "clientAddr": m.connection.address if m.connection else "",
                "language": m.language,
                "version": m.version,
            }
            for cid, m in sorted(info.members.items())
        ],
        "subscriptionTable": {
            t: {
                "topic": t,
                "subString": s,
                "expressionType": info.expression_types.get(t, "TAG"),
            }
            for t, s in info.subscriptions.items()
        },
        "consumeType": info.consume_type,
        "messageModel": info.message_model,
        "consumeFromWhere": info.consume_from_where,
    }
    return command.response(MQResponseCode.SUCCESS, body=json_body(body))


def view_message(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    offset = ext_int(command.ext_fields, "offset")
    try:
        record = state.commitlog.read_record_at(offset)
        decode_records(record)  # it must be one whole, valid record
    except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError) as exc:
        raise RequestRejectedError(
            f"no message at commit-log offset {offset}: {exc}", MQResponseCode.SYSTEM_ERROR
        ) from None
    return command.response(MQResponseCode.SUCCESS, body=record)


def query_message(state: BrokerState, command: RemotingCommand) -> RemotingCommand:
    """QUERY_MESSAGE (12): messages of a topic by key (or unique id), newest first."""
    fields = command.ext_fields
    topic = ext_str(fields, "topic")
    key = ext_str(fields, "key")
    max_num = max(1, min(ext_int(fields, "maxNum", 32), 64))
    begin = ext_int(fields, "beginTimestamp", 0)
    end = ext_int(fields, "endTimestamp", 1 << 62)
    records = []
    for offset in state.keys.query(topic, key, max_num * 4, begin, end):
        try:
            record = state.commitlog.read_record_at(offset)
            (message,) = decode_records(record)
        except (IndexOutOfRangeError, IndexCompactedError, MessageFormatError, ValueError):
            continue
        if message.topic != topic:
            continue
        if key not in message.keys and message.properties.get("UNIQ_KEY") != key:
            continue  # a hash collision
        records.append(record)
        if len(records) >= max_num:
            break
    if not records:
        raise RequestRejectedError(
            f"no message of topic {topic} with key {key}", MQResponseCode.QUERY_NOT_FOUND
        )
    ext = {"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
    return command.response(MQResponseCode.SUCCESS, ext_fields=ext, body=b"".join(records))


def message_id_offset(msg_id: str) -> int:
    """The commit-log offset an offset message id names (clients resolve the broker by it)."""
    try:
        return decode_offset_message_id(msg_id)[2]
    except (MessageFormatError, ValueError) as exc:
        raise BadRequestError(f"{msg_id!r} is not an offset message id: {exc}") from None


def runtime_info(
    state: BrokerState, ledger: LedgerServer, command: RemotingCommand
) -> RemotingCommand:
    core, store = ledger.core, ledger.store
    table = {
        "brokerName": state.config.broker_name,
        "brokerId": str(state.broker_id),
        "brokerRole": state.role.value,
        "dLegerSelfId": state.config.dleger_self_id,
        "dLegerRole": core.role.value,
        "dLegerTerm": str(core.term),
        "dLegerLeader": core.leader_id or "",
        "ledgerBeginIndex": str(store.begin_index),
        "ledgerEndIndex": str(store.end_index),
        "committedIndex": str(store.committed_index),
        "dispatchedIndex": str(state.dispatcher.dispatched_index),
        "putMessages": str(sum(state.stats.put_messages.values())),
        "getMessages": str(sum(state.stats.get_messages.values())),
    }
    return command.response(MQResponseCode.SUCCESS, body=json_body({"table": table}))


async def transfer_leadership(
    state: BrokerState, ledger: LedgerServer, command: RemotingCommand
) -> RemotingCommand:
    target = ext_str(command.ext_fields, "to")
    if target not in state.config.dleger_peers:
        raise BadRequestError(
            f"{target!r} is not a replica of group {state.config.group} "
            f"({', '.join(sorted(state.config.dleger_peers))})"
        )
    try:
        code = await ledger.transfer_leadership(target)
    except LedgerMQError as exc:
        raise RequestRejectedError(
            f"transfer to {target} refused: {exc}", MQResponseCode.SERVICE_NOT_AVAILABLE
        ) from None
    if code != ResponseCode.SUCCESS:  # DLedger's SUCCESS is 200, not 0
        raise RequestRejectedError(_transfer_failure(state, target, code), _transfer_code(code))
    return command.response(MQResponseCode.SUCCESS)


_TRANSFER_HINTS: Final[dict[int, str]] = {
    ResponseCode.NOT_LEADER: "this replica no longer leads the group; ask again",
    ResponseCode.LEADER_TRANSFERRING: "a transfer is already under way; wait for it",
    ResponseCode.FALL_BEHIND_TOO_MUCH: "it is too far behind the leader; wait until it catches up",
    ResponseCode.TAKE_LEADERSHIP_FAILED: "it did not take over in time (is it running?)",
    ResponseCode.TIMEOUT: "it did not answer in time (is it running?)",
    ResponseCode.NETWORK_ERROR: "it could not be reached (is it running?)",
}
"""What a refused or failed transfer means for the operator, by DLedger code."""


def _transfer_failure(state: BrokerState, target: str, code: int) -> str:
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = "UNKNOWN"
    hint = _TRANSFER_HINTS.get(code, "the leader is unchanged")
    return (
        f"leadership of broker group {state.config.group} was not moved to {target}: "
        f"{hint} (DLedger code {code} {name})"
    )


def _transfer_code(code: int) -> MQResponseCode:
    """Retriable refusals (the leader moved or is moving) vs the rest."""
    if code in (ResponseCode.NOT_LEADER, ResponseCode.LEADER_TRANSFERRING):
        return MQResponseCode.SERVICE_NOT_AVAILABLE
    return MQResponseCode.SYSTEM_ERROR
