"""Administration requests, the remoting door of ``AdminService`` (broker.service.admin).

Translators only: header fields and JSON bodies in, the service call, RocketMQ's JSON field
names out where RocketMQ has the request; the statistics bodies are flat lists (RocketMQ's maps
keyed by JSON objects are not valid JSON).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ledgermq.broker.state.metadata import SubscriptionGroupConfig
from ledgermq.errors import BadRequestError, MessageFormatError, RequestRejectedError
from ledgermq.wire import MQResponseCode
from ledgermq.wire.json_fields import check_json_budget
from ledgermq.wire.message import decode_offset_message_id
from ledgermq.wire.route import TopicConfig
from ledgermq.wire.topic_attributes import parse_changes

if TYPE_CHECKING:
    from ledgermq.broker.remoting.consumers import Registry
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.admin import AdminService
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.headers import (
        CreateTopicRequestHeader,
        DeleteSubscriptionGroupRequestHeader,
        DeleteTopicRequestHeader,
        GetConsumerConnectionListRequestHeader,
        GetConsumeStatsRequestHeader,
        GetQuarantinedEntriesRequestHeader,
        GetTopicStatsInfoRequestHeader,
        QueryMessageRequestHeader,
        ReplicaAddRequestHeader,
        ReplicaBackupRequestHeader,
        ReplicaRemoveRequestHeader,
        TransferLeadershipRequestHeader,
        ViewMessageRequestHeader,
    )

__all__ = ["AdminProcessor", "json_body", "message_id_offset"]


def json_body(value: object) -> bytes:
    """A response body in compact JSON."""
    return json.dumps(value, separators=(",", ":")).encode()


def message_id_offset(msg_id: str) -> int:
    """The commit-log offset an offset message id names (clients resolve the broker by it)."""
    try:
        return decode_offset_message_id(msg_id)[2]
    except (MessageFormatError, ValueError) as exc:
        raise BadRequestError(f"{msg_id!r} is not an offset message id: {exc}") from None


class AdminProcessor:
    def __init__(self, service: AdminService) -> None:
        self._service = service

    async def create_topic(
        self, command: RemotingCommand, header: CreateTopicRequestHeader
    ) -> RemotingCommand:
        topic, read = header.topic, header.read_queue_nums
        write = read if header.write_queue_nums is None else header.write_queue_nums
        config = TopicConfig(
            topic,
            read,
            write,
            header.perm,
            header.topic_filter_type,
            header.topic_sys_flag,
            header.order,
        )
        try:
            changes = parse_changes(header.attributes)
        except ValueError as exc:
            raise BadRequestError(f"topic {topic}: {exc}") from None
        await self._service.create_topic(config, changes)
        return command.response(MQResponseCode.SUCCESS)

    async def delete_topic(
        self, command: RemotingCommand, header: DeleteTopicRequestHeader
    ) -> RemotingCommand:
        await self._service.delete_topic(header.topic)
        return command.response(MQResponseCode.SUCCESS)

    async def create_group(self, command: RemotingCommand) -> RemotingCommand:
        check_json_budget(command.body, "the subscription group body")
        try:
            config = SubscriptionGroupConfig.from_object(json.loads(command.body))
        except (ValueError, TypeError, AttributeError) as exc:
            raise BadRequestError(f"the subscription group body is not valid: {exc}") from None
        await self._service.put_group(config)
        return command.response(MQResponseCode.SUCCESS)

    async def delete_group(
        self, command: RemotingCommand, header: DeleteSubscriptionGroupRequestHeader
    ) -> RemotingCommand:
        await self._service.delete_group(header.group_name)
        return command.response(MQResponseCode.SUCCESS)

    def all_topics(self, command: RemotingCommand) -> RemotingCommand:
        topics, version = self._service.topics()
        body = {
            "topicConfigTable": {n: c.to_object() for n, c in topics.items()},
            "dataVersion": version.to_object(),
        }
        return command.response(MQResponseCode.SUCCESS, body=json_body(body))

    def all_groups(self, command: RemotingCommand) -> RemotingCommand:
        groups, version = self._service.groups()
        body = {
            "subscriptionGroupTable": {n: g.to_object() for n, g in groups.items()},
            "dataVersion": version.to_object(),
        }
        return command.response(MQResponseCode.SUCCESS, body=json_body(body))

    def all_offsets(self, command: RemotingCommand) -> RemotingCommand:
        table = {
            f"{topic}@{group}": {str(q): o for q, o in queues.items()}
            for (topic, group), queues in self._service.consumer_offsets().items()
        }
        return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": table}))

    def topic_stats(
        self, command: RemotingCommand, header: GetTopicStatsInfoRequestHeader
    ) -> RemotingCommand:
        rows = [
            {
                "topic": row.topic,
                "brokerName": row.broker_name,
                "queueId": row.queue_id,
                "minOffset": row.min_offset,
                "maxOffset": row.max_offset,
            }
            for row in self._service.topic_stats(header.topic)
        ]
        return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": rows}))

    def consume_stats(
        self, command: RemotingCommand, header: GetConsumeStatsRequestHeader
    ) -> RemotingCommand:
        """Per queue: the broker's max offset and the group's committed offset (lag is the
        difference)."""
        rows = [
            {
                "topic": row.topic,
                "brokerName": row.broker_name,
                "queueId": row.queue_id,
                "brokerOffset": row.broker_offset,
                "consumerOffset": row.consumer_offset,
            }
            for row in self._service.consume_stats(header.consumer_group, header.topic)
        ]
        return command.response(MQResponseCode.SUCCESS, body=json_body({"offsetTable": rows}))

    def view_message(
        self, command: RemotingCommand, header: ViewMessageRequestHeader, access: Access
    ) -> RemotingCommand:
        """``access``: the requester, who needs SUB on the record's topic."""
        record = self._service.view_message(header.offset, access)
        return command.response(MQResponseCode.SUCCESS, body=record)

    def query_message(
        self, command: RemotingCommand, header: QueryMessageRequestHeader
    ) -> RemotingCommand:
        """QUERY_MESSAGE (12): messages of a topic by key (or unique id), newest first."""
        topic, key = header.topic, header.key
        records = self._service.query_message(
            topic, key, header.max_num, header.begin_timestamp, header.end_timestamp
        )
        if not records:
            raise RequestRejectedError(
                f"no message of topic {topic} with key {key}", MQResponseCode.QUERY_NOT_FOUND
            )
        ext = {"indexLastUpdateTimestamp": "0", "indexLastUpdatePhyoffset": "0"}
        return command.response(MQResponseCode.SUCCESS, ext_fields=ext, body=b"".join(records))

    def runtime_info(self, command: RemotingCommand) -> RemotingCommand:
        table = self._service.runtime_info()
        return command.response(MQResponseCode.SUCCESS, body=json_body({"table": table}))

    def quarantined_entries(
        self, command: RemotingCommand, header: GetQuarantinedEntriesRequestHeader
    ) -> RemotingCommand:
        """GET_QUARANTINED_ENTRIES (ours): ``sinceIndex`` (default 0) and ``limit`` (default
        1000) in; ``{"total": n, "entries": [{index, record, topic, reason, timeMs}]}`` out."""
        since, limit = header.since_index, header.limit
        if limit < 1:
            raise BadRequestError(f"limit must be at least 1, got {limit}")
        service = self._service
        entries = service.quarantined_entries(since, limit)
        body = {"total": service.quarantined_total(), "entries": [e.to_object() for e in entries]}
        return command.response(MQResponseCode.SUCCESS, body=json_body(body))

    def replica_list(self, command: RemotingCommand) -> RemotingCommand:
        """REPLICA_LIST (1020): ``{"replicas": [{id, address, role, logEnd, lag,
        lastContactMs}]}``."""
        body = {"replicas": self._service.replica_list()}
        return command.response(MQResponseCode.SUCCESS, body=json_body(body))

    async def replica_add(
        self, command: RemotingCommand, header: ReplicaAddRequestHeader
    ) -> RemotingCommand:
        """REPLICA_ADD (1021): ``peer`` (nX-HOST:PORT) in; ``index`` of the change out."""
        index = await self._service.replica_add(header.peer)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"index": str(index)})

    async def replica_remove(
        self, command: RemotingCommand, header: ReplicaRemoveRequestHeader
    ) -> RemotingCommand:
        """REPLICA_REMOVE (1022): ``id`` in; ``index`` of the change out."""
        index = await self._service.replica_remove(header.replica_id)
        return command.response(MQResponseCode.SUCCESS, ext_fields={"index": str(index)})

    async def replica_backup(
        self, command: RemotingCommand, header: ReplicaBackupRequestHeader
    ) -> RemotingCommand:
        """REPLICA_BACKUP (1023): ``to`` (an absolute path on this replica's host, new or
        empty) in; the backup's manifest (``backup.json``'s keys) out."""
        manifest = await self._service.backup(header.to)
        return command.response(MQResponseCode.SUCCESS, body=json_body(manifest.to_json()))

    async def transfer_leadership(
        self, command: RemotingCommand, header: TransferLeadershipRequestHeader
    ) -> RemotingCommand:
        await self._service.transfer_leadership(header.to)
        return command.response(MQResponseCode.SUCCESS)


def consumer_connections(
    consumers: Registry,
    command: RemotingCommand,
    header: GetConsumerConnectionListRequestHeader,
) -> RemotingCommand:
    """GET_CONSUMER_CONNECTION_LIST (203): the remoting clients of a group, from the registry
    their heartbeats keep (``broker.service.client_registry``)."""
    group = header.consumer_group
    info = consumers.groups.get(group)
    if info is None:
        raise RequestRejectedError(
            f"the consumer group [{group}] is not online", MQResponseCode.SYSTEM_ERROR
        )
    body = {
        "connectionSet": [
            {
                "clientId": cid,
                "clientAddr": m.client_address,
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
