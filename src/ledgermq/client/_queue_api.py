"""Per-queue broker requests shared by the pull and push consumers: pull, offsets, send-back.

Each request finds the broker of the queue's group in the cached route (a pull may go to a
slave while the group has no master; offset updates go to the master), and, for the idempotent
ones, tries again once after looking the route up anew when the broker failed or said the route
is stale. A master failover keeps the queue's broker group, so the new master is found by name.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.client._remoting import master_may_have_moved
from ledgermq.client._routing import MessageQueue, master_address, pull_address
from ledgermq.client._selector import as_selector
from ledgermq.errors import MQResponseError, NetworkError, NoRouteError
from ledgermq.wire import MQRequestCode, MQResponseCode, decode_records, tags_match
from ledgermq.wire.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from ledgermq.client._remoting import ClientInstance
    from ledgermq.client._selector import Subscription
    from ledgermq.wire import MessageExt, RemotingCommand

__all__ = ["PullResult", "PullStatus", "PullSysFlag", "QueueApi", "RecordsPullResult"]

_DETECT_WINDOW_S: Final = 30.0
"""How long a group whose master refused a request is searched for a new master (the route's
refresh period: by then a NameServer knows, or the next refusal starts another search)."""

_PULL_CODES: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.PULL_NOT_FOUND,
    MQResponseCode.PULL_RETRY_IMMEDIATELY,
    MQResponseCode.PULL_OFFSET_MOVED,
)


class PullSysFlag:
    """``PullSysFlag`` bits of a pull request."""

    COMMIT_OFFSET: Final = 1
    SUSPEND: Final = 2
    SUBSCRIPTION: Final = 4
    CLASS_FILTER: Final = 8


class PullStatus(enum.Enum):
    """``PullStatus.java``: what a pull found."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_OF_CODE: Final = {
    MQResponseCode.SUCCESS: PullStatus.FOUND,
    MQResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    MQResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    MQResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's answer. Pull again from ``next_begin_offset``.

    ``messages`` passed the subscription on the broker (tag hash, or a SQL92 selector) and, for
    tags, again here (tag string); a FOUND result may hold none when every message was filtered
    here.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]


@dataclass(frozen=True, slots=True)
class RecordsPullResult:
    """One pull's answer with the messages left as the broker sent them: ``records`` is the
    concatenated CommitLog records (``decode_records`` reads them), filtered by the broker's tag
    hash only. For readers that decode records their own way (the Spark connector's columns)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: bytes


def _int(fields: Mapping[str, str], name: str, default: int = -1) -> int:
    value = fields.get(name)
    try:
        return int(value) if value else default
    except ValueError:
        return default


class QueueApi:
    """Queue-level requests of one consumer group (see the module docstring)."""

    def __init__(self, client: ClientInstance, group: str) -> None:
        self.client = client
        self.group = group

    async def address(self, mq: MessageQueue, *, master: bool, refresh: bool = False) -> str:
        """The broker serving ``mq``: its group's master, or (``master=False``) any member."""
        pick = master_address if master else pull_address
        route = await self.client.topic_route(mq.topic, refresh=refresh)
        address = pick(route, mq.broker_name)
        if address is None and not refresh:
            route = await self.client.topic_route(mq.topic, refresh=True)
            address = pick(route, mq.broker_name)
        if address is None:
            role = "master" if master else "member"
            raise NoRouteError(f"broker group {mq.broker_name} of {mq} has no {role} in the route")
        return address

    async def call(
        self,
        mq: MessageQueue,
        code: int,
        ext_fields: Mapping[str, str],
        body: bytes = b"",
        *,
        master: bool = False,
        timeout_s: float | None = None,
        expect: Collection[int] = (MQResponseCode.SUCCESS,),
        attempts: int = 2,
    ) -> RemotingCommand:
        """``code`` to the broker of ``mq``; with ``attempts`` > 1 retried after a route refresh."""
        refresh = False
        for attempt in range(attempts):
            address: str | None = None
            try:
                address = await self.address(mq, master=master, refresh=refresh)
                return await self.client.invoke(
                    address, code, ext_fields, body, timeout_s=timeout_s, expect=expect
                )
            except (NetworkError, NoRouteError, MQResponseError) as exc:
                if master and address is not None and master_may_have_moved(exc):
                    # the NameServers may not know (or be down): ask the group's members
                    self.client.detect_master(mq.broker_name, address, _DETECT_WINDOW_S)
                if attempt + 1 >= attempts or not (exc.retriable or exc.refresh_route):
                    if exc.refresh_route or isinstance(exc, NetworkError):
                        self.client.request_route_refresh(mq.topic)
                    raise
                refresh = True
        raise AssertionError("unreachable")  # pragma: no cover

    async def pull_records(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        subscription: Subscription,
        *,
        sys_flag: int = PullSysFlag.SUBSCRIPTION,
        commit_offset: int = -1,
        suspend_ms: int = 0,
        timeout_s: float | None = None,
        attempts: int = 2,
    ) -> RecordsPullResult:
        selector = as_selector(subscription)
        ext = PullMessageRequestHeader(
            self.group,
            mq.topic,
            mq.queue_id,
            offset,
            max_nums,
            sys_flag,
            commit_offset,
            suspend_ms,
            selector.expression,
            0,
            selector.expression_type,
        ).to_ext_fields()
        response = await self.call(
            mq,
            MQRequestCode.PULL_MESSAGE,
            ext,
            timeout_s=timeout_s,
            expect=_PULL_CODES,
            attempts=attempts,
        )
        fields = response.ext_fields
        status = _STATUS_OF_CODE[MQResponseCode(response.code)]
        return RecordsPullResult(
            status,
            _int(fields, "nextBeginOffset", offset),
            _int(fields, "minOffset"),
            _int(fields, "maxOffset"),
            response.body if status is PullStatus.FOUND else b"",
        )

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        subscription: Subscription,
        *,
        sys_flag: int = PullSysFlag.SUBSCRIPTION,
        commit_offset: int = -1,
        suspend_ms: int = 0,
        timeout_s: float | None = None,
        attempts: int = 2,
    ) -> PullResult:
        raw = await self.pull_records(
            mq,
            offset,
            max_nums,
            subscription,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_ms=suspend_ms,
            timeout_s=timeout_s,
            attempts=attempts,
        )
        messages: list[MessageExt] = []
        if raw.records:
            messages = decode_records(raw.records)
            tags = as_selector(subscription).tags
            if tags is not None:
                messages = [m for m in messages if tags_match(m.properties.get("TAGS"), tags)]
        return PullResult(
            raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset, messages
        )

    async def _offset_call(self, mq: MessageQueue, code: int, ext: Mapping[str, str]) -> int:
        response = await self.call(mq, code, ext)
        return _int(response.ext_fields, "offset")

    async def max_offset(self, mq: MessageQueue) -> int:
        header = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id)
        return await self._offset_call(mq, header.CODE, header.to_ext_fields())

    async def min_offset(self, mq: MessageQueue) -> int:
        header = GetMinOffsetRequestHeader(mq.topic, mq.queue_id)
        return await self._offset_call(mq, header.CODE, header.to_ext_fields())

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
        return await self._offset_call(mq, header.CODE, header.to_ext_fields())

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        ext = GetEarliestMsgStoretimeRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
        response = await self.call(mq, MQRequestCode.GET_EARLIEST_MSG_STORETIME, ext)
        return _int(response.ext_fields, "timestamp")

    async def committed_offset(self, mq: MessageQueue) -> int | None:
        """The group's committed offset of ``mq``; None if it has none (QUERY_NOT_FOUND)."""
        ext = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id).to_ext_fields()
        response = await self.call(
            mq,
            MQRequestCode.QUERY_CONSUMER_OFFSET,
            ext,
            master=True,
            expect=(MQResponseCode.SUCCESS, MQResponseCode.QUERY_NOT_FOUND),
        )
        if response.code == MQResponseCode.QUERY_NOT_FOUND:
            return None
        offset = _int(response.ext_fields, "offset")
        return offset if offset >= 0 else None

    async def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset)
        await self.call(mq, header.CODE, header.to_ext_fields(), master=True)

    async def send_back(
        self, mq: MessageQueue, message: MessageExt, *, delay_level: int, max_reconsume_times: int
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores the message in ``%RETRY%<group>``."""
        header = ConsumerSendMsgBackRequestHeader(
            message.commit_log_offset,
            self.group,
            delay_level,
            message.msg_id,
            message.topic,
            max_reconsume_times,
        )
        await self.call(mq, header.CODE, header.to_ext_fields(), master=True, attempts=1)

    async def lock(self, broker_name: str, mqs: Collection[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ at ``broker_name``'s master: the queues this client now holds."""
        if not mqs:
            return set()
        first = next(iter(mqs))
        body = json.dumps(
            {
                "consumerGroup": self.group,
                "clientId": self.client.client_id,
                "mqSet": [mq.to_object() for mq in sorted(mqs)],
            }
        ).encode()
        response = await self.call(
            first, MQRequestCode.LOCK_BATCH_MQ, {}, body, master=True, attempts=1
        )
        held = json.loads(response.body or b"{}").get("lockOKMQSet") or []
        return {MessageQueue(q["topic"], q["brokerName"], int(q["queueId"])) for q in held}

    async def unlock(self, mqs: Collection[MessageQueue]) -> None:
        if not mqs:
            return
        first = next(iter(mqs))
        body = json.dumps(
            {
                "consumerGroup": self.group,
                "clientId": self.client.client_id,
                "mqSet": [mq.to_object() for mq in sorted(mqs)],
            }
        ).encode()
        await self.call(first, MQRequestCode.UNLOCK_BATCH_MQ, {}, body, master=True, attempts=1)

    async def check_client_config(
        self, address: str, topic: str, subscription: Subscription
    ) -> None:
        """CHECK_CLIENT_CONFIG (46) at ``address``: raises the broker's refusal of the
        subscription (SYSTEM_ERROR: no SQL92 there; SUBSCRIPTION_PARSE_FAILED: a bad one)."""
        selector = as_selector(subscription)
        body = {
            "clientId": self.client.client_id,
            "group": self.group,
            "subscriptionData": {
                "topic": topic,
                "subString": selector.expression,
                "tagsSet": sorted(selector.tags or ()),
                "codeSet": sorted(selector.tag_codes),
                "subVersion": 0,
                "expressionType": selector.expression_type,
                "classFilterMode": False,
            },
        }
        await self.client.invoke(
            address, MQRequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(body).encode()
        )

    async def consumer_ids(self, address: str) -> list[str]:
        header = GetConsumerListByGroupRequestHeader(self.group)
        response = await self.client.invoke(address, header.CODE, header.to_ext_fields())
        ids = json.loads(response.body or b"{}").get("consumerIdList") or []
        return [str(i) for i in ids]
