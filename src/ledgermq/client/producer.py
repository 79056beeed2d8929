"""The producer: sends messages to a topic's queues, with retries across queues and broker groups.

What a send promises (RocketMQ's ``DefaultMQProducer``, made explicit):

- ``SendStatus.SEND_OK`` means the broker answered code 0: the message is stored (in DLedger
  mode, committed by the group's quorum). FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT /
  SLAVE_NOT_AVAILABLE are returned as results too (the broker stored the message but could not
  confirm durability in time); they are not retried, as in RocketMQ.
- A plain ``send`` makes up to ``1 + retry_times`` attempts (a queue the broker refuses because
  the topic's write count shrank, and the refreshed route no longer lists, counts as one). Each
  attempt picks the next queue round-robin and avoids the group that failed the previous
  attempt and, for ``fault_avoid_ms``, any group that failed recently. After a failure the
  topic's route is looked up again before the next attempt, so a new master (DLedger failover)
  is found.
- **Outcome unknown ("maybe stored").** A timeout, a connection that closes after the request
  went out, or a broker's SYSTEM_ERROR (how a broker says a quorum did not confirm the write in
  time) leaves the outcome unknown: the broker may have stored the message. Like RocketMQ, the
  producer retries anyway (at-least-once: the message may be stored twice; consumers deduplicate
  by ``msg_id``, the ``UNIQ_KEY`` that every copy shares). ``unknown_outcomes`` counts these
  retries. A send whose attempts all failed raises ``SendOutcomeUnknownError`` when any of them
  had an unknown outcome (even if a later one failed plainly: the first may have stored it), and
  the last attempt's plain error (``NoRouteError``, ``ConnectError``, ``MQResponseError``) only
  when none did: **a plain failure means the message was not stored.**
- **Fault avoidance ends with a new master.** A group is avoided for ``fault_avoid_ms`` after a
  failure, unless a fresh route shows it with another master (a failover, a transferred leader)
  or with a master again (a group that regained its majority): then it is used at once. Routes
  are fresh within about a second (``ClientInstance``'s route version poll).
- **A master found without the NameServers.** When a group's master answers that it is not the
  master any more (SERVICE_NOT_AVAILABLE) or cannot be reached, and a fresh route still names it
  (the NameServers are down, or have not heard yet), the attempt tries the group's other members
  from the route: a slave refuses a send before storing anything, the new master takes it, and
  the cached routes are patched to name it (``ClientInstance.learn_master``). When none takes
  it (the group is still electing), the group's members are asked in the background, every
  0.5 s, whether one is the master now (``ClientInstance.detect_master``).
- ``send_orderly`` never moves to another queue (that would reorder); it retries the *same* queue
  only when nothing was sent (connection refused) or the broker refused it, and raises
  ``SendOutcomeUnknownError`` on an unknown outcome, so the caller decides.
- A topic with no route borrows the route of ``TBW102`` and sends with ``defaultTopic=TBW102``:
  a broker with ``autoCreateTopicEnable`` creates the topic (RocketMQ's flow).

Every message gets a ``UNIQ_KEY`` (``UniqueIdGenerator``); single sends use SEND_MESSAGE_V2
(310), batches SEND_BATCH_MESSAGE (320). Bodies over ``compress_over`` bytes are zlib-deflated
(SYSFLAG bit 0), as RocketMQ's ``compressMsgBodyOverHowmuch`` does; batches are not compressed.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import enum
import logging
import os
import secrets
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ledgermq.client import trace
from ledgermq.client._remoting import ClientInstance, master_may_have_moved
from ledgermq.client._routing import (
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_QUEUE_NUMS,
    LatencyFaultTolerance,
    MessageQueue,
    TopicPublishInfo,
    master_address,
    publish_info,
    select_queue,
    sharding_queue,
)
from ledgermq.client.trace import TRACE_TOPIC, TraceDispatcher
from ledgermq.errors import (
    ConfigError,
    ConnectError,
    InvalidMessageError,
    LedgerMQError,
    MQResponseError,
    NetworkError,
    NoRouteError,
    SendOutcomeUnknownError,
    TopicNotFoundError,
)
from ledgermq.wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MessageProperty,
    MQRequestCode,
    MQResponseCode,
    SysFlag,
    UniqueIdGenerator,
    decode_offset_message_id,
    encode_batch,
    encode_properties,
    validate_message,
)
from ledgermq.wire.headers import RecallMessageRequestHeader, SendMessageRequestHeaderV2
from ledgermq.wire.names import check_send_topic, group_name_problem
from ledgermq.wire.route import MASTER_ID, is_writable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from ledgermq.client.credentials import Credentials
    from ledgermq.clock import Clock
    from ledgermq.net import Network, TlsClientConfig
    from ledgermq.wire.route import TopicRouteData

__all__ = ["Message", "Producer", "SendResult", "SendStatus"]

logger = logging.getLogger("ledgermq.client.producer")

_SEND_CODES: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.FLUSH_DISK_TIMEOUT,
    MQResponseCode.FLUSH_SLAVE_TIMEOUT,
    MQResponseCode.SLAVE_NOT_AVAILABLE,
)
_RETRY_CODES: Final = frozenset(
    {MQResponseCode.TOPIC_NOT_EXIST, MQResponseCode.NO_PERMISSION}
)  # besides the codes MQResponseError calls retriable (RocketMQ's retryResponseCodes)


class SendStatus(enum.Enum):
    """``SendStatus.java``; only SEND_OK means stored and confirmed."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_STATUS_OF_CODE: Final = {
    MQResponseCode.SUCCESS: SendStatus.SEND_OK,
    MQResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    MQResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    MQResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class SendResult:
    """What the broker said about a send.

    ``msg_id`` is the producer's ``UNIQ_KEY`` (comma-joined for a batch), what consumers see as
    ``MessageExt.msg_id``; ``offset_msg_id`` says where the broker stored it.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    recall_handle: str | None = None
    """A timer message's handle for ``Producer.recall`` (RocketMQ 5.3's ``recallHandle``)."""

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK


@dataclass(frozen=True, slots=True)
class Message:
    """A message of a batch (single sends take the same fields as keyword arguments)."""

    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0


def _keys_text(keys: str | Iterable[str] | None) -> str | None:
    if keys is None:
        return None
    text = keys if isinstance(keys, str) else " ".join(keys)
    return text or None


class Producer:
    """An asyncio producer (see the module docstring).

    Args:
        group: the producer group.
        namesrv_addr: ``"host:port;host:port"``.
        send_timeout_s: timeout of each send attempt (default 3 s).
        retry_times: extra attempts of a failed ``send`` / ``send_batch`` (default 2).
        max_message_size: largest body accepted, in bytes (default 4 MiB, the broker's).
        compress_over: bodies larger than this many bytes are zlib-compressed (default 4 KiB).
        fault_avoid_ms: how long a failed broker group is avoided (default 30 000 ms).
        network: ``TcpNetwork()`` by default.
        client_id, instance_name: see ``ClientInstance``.
        clock: time source (tests).
        credentials: sign every request with this ACL account (``aclEnable=true`` clusters).
        tls: dial the NameServers and brokers with TLS (``TlsClientConfig``: the CA to
            trust, a client certificate for mutual TLS); None: plain connections.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        send_timeout_s: float = 3.0,
        retry_times: int = 2,
        max_message_size: int = DEFAULT_MAX_MESSAGE_BYTES,
        compress_over: int = 4 * 1024,
        fault_avoid_ms: int = 30_000,
        network: Network | None = None,
        client_id: str | None = None,
        instance_name: str | None = None,
        clock: Clock | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
        route_refresh_interval_s: float = 30.0,
        heartbeat_interval_s: float = 30.0,
        enable_msg_trace: bool = False,
        trace_topic: str = TRACE_TOPIC,
    ) -> None:
        if (problem := group_name_problem(group)) is not None:
            raise ConfigError(f"producer group: {problem}")  # Validators.checkGroup
        if retry_times < 0 or send_timeout_s <= 0 or max_message_size <= 0:
            raise ConfigError("retry_times must be >= 0, send_timeout_s and max_message_size > 0")
        self.group = group
        self.send_timeout_s = send_timeout_s
        self.retry_times = retry_times
        self.max_message_size = max_message_size
        self.compress_over = compress_over
        self.fault_avoid_ms = fault_avoid_ms
        self._client = ClientInstance(
            namesrv_addr,
            credentials=credentials,
            tls=tls,
            client_id=client_id,
            instance_name=instance_name,
            network=network,
            clock=clock,
            request_timeout_s=send_timeout_s,
            route_refresh_interval_s=route_refresh_interval_s,
            heartbeat_interval_s=heartbeat_interval_s,
        )
        self._ids = UniqueIdGenerator(
            self._client.ip, os.getpid(), secrets.randbits(32), self._client.wall_ms
        )
        self._faults = LatencyFaultTolerance()
        # A group with a new master (or a master again) is not avoided any more.
        self._client.master_listeners.append(self._faults.mark_ok)
        self._counters: dict[str, int] = {}
        # Topics that have no route of their own yet: sent with the default topic's queues.
        self._borrowed: dict[str, TopicPublishInfo] = {}
        # The writable queues last made of each topic's route, kept while the client's cached
        # route is that very object (a refresh replaces it): recomputing them cost every send
        # about 10 us.
        self._published: dict[str, TopicPublishInfo] = {}
        self._started = False
        self._closed = False
        #: Retries made after an attempt whose outcome was unknown (possible duplicates).
        self.unknown_outcomes = 0
        self.trace: TraceDispatcher | None = None
        """The trace records' sender when ``enable_msg_trace`` (RocketMQ's enableMsgTrace)."""
        if enable_msg_trace:
            self.trace = trace.dispatcher(
                trace_topic, namesrv_addr, network=network, clock=clock,
                credentials=credentials, tls=tls,
            )  # fmt: skip

    @property
    def client_id(self) -> str:
        return self._client.client_id

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._client.producer_groups.add(self.group)
        await self._client.start()

    async def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.trace is not None:
            await self.trace.close()
        if self._started:
            await self._client.unregister(producer_group=self.group)
        await self._client.close()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ public sends
    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        queue: MessageQueue | None = None,
        flag: int = 0,
    ) -> SendResult:
        """Send one message and wait for the broker's answer (see the module docstring).

        ``queue`` pins the message to that queue (one attempt, no retry elsewhere).
        """
        request = self._single(topic, body, tags, keys, properties, flag)
        if self.trace is None:
            if queue is not None:
                info = await self._publish_info(topic)
                return await self._attempt_once(info, queue, request)
            return await self._send_with_retries(topic, request)
        started = self._client.wall_ms()
        result: SendResult | None = None
        try:
            if queue is not None:
                info = await self._publish_info(topic)
                result = await self._attempt_once(info, queue, request)
            else:
                result = await self._send_with_retries(topic, request)
            return result
        finally:
            self._trace_pub(topic, request, result, started, tags, keys)

    def _trace_pub(
        self,
        topic: str,
        request: _SendRequest,
        result: SendResult | None,
        started_ms: int,
        tags: str | None,
        keys: str | Sequence[str] | None,
    ) -> None:
        """One ``Pub`` trace record of a send (``result`` None: it failed)."""
        assert self.trace is not None
        store_host = ""
        if result is not None and result.offset_msg_id:
            with contextlib.suppress(ValueError):
                ip, port, _ = decode_offset_message_id(result.offset_msg_id)
                store_host = f"{ip}:{port}"
        record = trace.pub(
            timestamp_ms=started_ms,
            group=self.group,
            topic=topic,
            msg_id=request.msg_id,
            tags=tags or "",
            keys=_keys_text(keys) or "",
            store_host=store_host,
            body_length=len(request.body),
            cost_ms=self._client.wall_ms() - started_ms,
            offset_msg_id=result.offset_msg_id if result is not None else "",
            success=result is not None,
        )
        self.trace.submit(record, request.msg_id)

    async def send_oneway(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
    ) -> None:
        """Send without waiting for an answer: one attempt, nothing confirmed."""
        request = self._single(topic, body, tags, keys, properties, flag)
        info = await self._publish_info(topic)
        mq = select_queue(
            info, self._next_counter(topic), faults=self._faults, now_ms=self._client.now_ms()
        )
        address = self._address(info, mq)
        await self._client.invoke_oneway(
            address, request.code, request.ext_fields(mq), request.body
        )

    async def send_batch(
        self, topic: str, messages: Sequence[bytes | Message], *, queue: MessageQueue | None = None
    ) -> SendResult:
        """Send ``messages`` in one request (SEND_BATCH_MESSAGE), all to one queue.

        Retried as a whole like ``send``. ``msg_id`` of the result is the comma-joined ids.
        """
        if not messages:
            raise InvalidMessageError("a batch must hold at least one message")
        check_send_topic(topic)
        items: list[tuple[bytes, int, str]] = []
        ids: list[str] = []
        total = 0
        for item in messages:
            message = item if isinstance(item, Message) else Message(item)
            msg_id = self._ids.next_id()
            props = self._properties(message.tags, message.keys, message.properties, msg_id)
            validate_message(topic, message.body, props, self.max_message_size)
            items.append((message.body, message.flag, props))
            ids.append(msg_id)
            total += len(message.body)
        if total > self.max_message_size:
            raise InvalidMessageError(
                f"the batch of {len(messages)} messages holds {total} bytes of bodies, more than "
                f"maxMessageSize {self.max_message_size}; split it"
            )
        request = _SendRequest(
            self.group,
            topic,
            MQRequestCode.SEND_BATCH_MESSAGE,
            encode_batch(items),
            0,
            0,
            "",
            ",".join(ids),
            self._client.wall_ms,
        )
        if queue is not None:
            return await self._attempt_once(await self._publish_info(topic), queue, request)
        return await self._send_with_retries(topic, request)

    async def send_orderly(
        self,
        topic: str,
        body: bytes,
        sharding_key: str,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
    ) -> SendResult:
        """Send to the queue ``sharding_key`` maps to, so one key's messages stay in order.

        The queue is ``javaHash(sharding_key) % len(queues)`` over the sorted writable queues.
        Never moved to another queue; see the module docstring for when it is retried.
        """
        request = self._single(topic, body, tags, keys, properties, flag)
        last: LedgerMQError | None = None
        for attempt in range(1 + self.retry_times):
            info = await self._publish_info(topic)
            mq = sharding_queue(info, sharding_key)
            try:
                return await self._attempt_once(info, mq, request)
            except (ConnectError, NoRouteError, MQResponseError) as exc:
                if isinstance(exc, MQResponseError) and not self._retriable(exc):
                    raise
                last = exc
                logger.info("orderly send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                await self._refresh(topic)
        assert last is not None
        raise last

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if not self._started or self._closed:
            raise LedgerMQError(
                f"producer {self.group} is {'closed' if self._closed else 'not started'}"
            )

    def _properties(
        self,
        tags: str | None,
        keys: str | Iterable[str] | None,
        user: Mapping[str, str] | None,
        msg_id: str,
    ) -> str:
        props: dict[str, str] = dict(user) if user else {}
        if tags:
            props[MessageProperty.TAGS] = tags
        keys_text = _keys_text(keys)
        if keys_text:
            props[MessageProperty.KEYS] = keys_text
        props.setdefault(MessageProperty.WAIT, "true")
        props[MessageProperty.UNIQ_KEY] = msg_id
        return encode_properties(props)

    def _single(
        self,
        topic: str,
        body: bytes,
        tags: str | None,
        keys: str | Sequence[str] | None,
        properties: Mapping[str, str] | None,
        flag: int,
    ) -> _SendRequest:
        self._check_open()
        check_send_topic(topic)  # a valid name, and not a topic only the broker writes
        msg_id = self._ids.next_id()
        props = self._properties(tags, keys, properties, msg_id)
        validate_message(topic, body, props, self.max_message_size)
        sys_flag = 0
        if len(body) > self.compress_over:
            compressed = zlib.compress(body, 5)
            if len(compressed) < len(body):
                body, sys_flag = compressed, SysFlag.COMPRESSED
        return _SendRequest(
            self.group,
            topic,
            MQRequestCode.SEND_MESSAGE_V2,
            body,
            sys_flag,
            flag,
            props,
            msg_id,
            self._client.wall_ms,
        )

    def _next_counter(self, topic: str) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = secrets.randbelow(1 << 16)
        self._counters[topic] = counter + 1
        return counter

    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        """Writable queues of ``topic``: its own route, else the default topic's (borrowed)."""
        self._check_open()
        client = self._client
        route = client.cached_route(topic)
        known = self._published.get(topic)
        if known is not None and known.route is route:
            return known
        if route is None:
            borrowed = self._borrowed.get(topic)
            if borrowed is not None:
                return borrowed
            client.producer_topics.add(topic)
            try:
                route = await client.topic_route(topic)
            except TopicNotFoundError:
                return await self._borrow_default_route(topic)
        self._borrowed.pop(topic, None)
        info = publish_info(topic, route)
        if not info.ok:
            route = await client.topic_route(topic, refresh=True)
            info = publish_info(topic, route)
            if not info.ok:
                raise NoRouteError(_no_writable_queue_reason(topic, route))
        self._published[topic] = info
        return info

    async def _borrow_default_route(self, topic: str) -> TopicPublishInfo:
        try:
            default = await self._client.topic_route(DEFAULT_TOPIC)
        except TopicNotFoundError:
            raise TopicNotFoundError(
                f"topic {topic!r} does not exist, and the cluster does not create topics on "
                f"first send (the NameServer has no route for {DEFAULT_TOPIC}): create the "
                "topic first (ledgermq admin topic-create -t TOPIC)"
            ) from None
        info = publish_info(topic, default, borrowed=True)
        if not info.ok:
            raise NoRouteError(
                f"topic {topic!r} does not exist and no master offers {DEFAULT_TOPIC} to create it"
            )
        logger.info("topic %s has no route; sending with %s's to create it", topic, DEFAULT_TOPIC)
        self._borrowed[topic] = info
        return info

    def _address(self, info: TopicPublishInfo, mq: MessageQueue) -> str:
        address = master_address(info.route, mq.broker_name)
        if address is None:
            raise NoRouteError(f"broker group {mq.broker_name} has no master in the route now")
        return address

    def _retriable(self, exc: MQResponseError) -> bool:
        return exc.retriable or exc.code in _RETRY_CODES

    async def _refresh(self, topic: str) -> None:
        """Look the route up again now (failures are left to the next attempt)."""
        try:
            await self._client.topic_route(topic, refresh=True)
        except TopicNotFoundError as exc:
            # A NameServer that knows nothing of the topic may have just restarted (brokers
            # register again within 30 s): the cached route, if any, stays the best guess.
            logger.debug("route refresh of %s: %s; keeping the cached route", topic, exc)
        except LedgerMQError as exc:
            logger.debug("route refresh of %s failed: %s", topic, exc)

    async def _send_with_retries(self, topic: str, request: _SendRequest) -> SendResult:
        last: LedgerMQError | None = None
        unknown: LedgerMQError | None = None  # the first attempt whose outcome is unknown
        last_failed: str | None = None
        attempts = 1 + self.retry_times
        for attempt in range(attempts):
            try:
                info = await self._publish_info(topic)
            except NoRouteError as exc:
                if unknown is None:
                    raise
                last = exc
                break
            now = self._client.now_ms()
            mq = select_queue(
                info,
                self._next_counter(topic),
                last_failed_broker=last_failed,
                faults=self._faults,
                now_ms=now,
            )
            address = master_address(info.route, mq.broker_name)
            try:
                result = await self._attempt(info, mq, request)
            except (NetworkError, NoRouteError, MQResponseError) as exc:
                if (
                    isinstance(exc, MQResponseError)
                    and not self._retriable(exc)
                    and not await self._queue_gone(mq, exc)
                ):
                    if unknown is not None:
                        raise _maybe_stored_error(request.msg_id, unknown, exc) from exc
                    raise
                last, last_failed = exc, mq.broker_name
                self._faults.mark_failed(mq.broker_name, now, self.fault_avoid_ms)
                if _maybe_stored(exc):
                    unknown = unknown or exc
                    if attempt + 1 < attempts:
                        self.unknown_outcomes += 1
                        logger.warning(
                            "send of %s to %s: outcome unknown (%s); retrying elsewhere, the "
                            "message may be stored twice",
                            request.msg_id, mq, exc,
                        )  # fmt: skip
                else:
                    logger.info("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                if attempt + 1 < attempts:
                    await self._refresh(topic)
                    if self._master_moved(topic, mq.broker_name, address):
                        self._faults.mark_ok(mq.broker_name)  # the old master failed, not it
                    elif address is not None and master_may_have_moved(exc):
                        found = await self._find_master(mq, address, request)
                        if isinstance(found, SendResult):
                            return found
                        if found is not None:
                            unknown = unknown or found
                        # the group may be electing: look for its new master meanwhile
                        self._client.detect_master(
                            mq.broker_name, address, self.fault_avoid_ms / 1000
                        )
                continue
            self._faults.mark_ok(mq.broker_name)
            if info.borrowed:
                self._client.request_route_refresh(topic)
            return result
        assert last is not None
        if unknown is not None:
            raise _maybe_stored_error(request.msg_id, unknown, last) from last
        last.add_note(f"(the producer made {attempts} attempts for message {request.msg_id})")
        raise last

    def _master_moved(self, topic: str, broker_name: str, failed: str | None) -> bool:
        """Whether the cached route now names another master of ``broker_name`` than
        ``failed``, the one that failed: the failure says nothing about the group any more
        (the route may have changed before the failure arrived, so no change is seen now)."""
        route = self._client.cached_route(topic)
        if route is None or failed is None:
            return False
        master = master_address(route, broker_name)
        return master is not None and master != failed

    async def _queue_gone(self, mq: MessageQueue, exc: MQResponseError) -> bool:
        """Whether a refusal as INVALID_PARAMETER was of a queue the topic no longer offers for
        writing (its write count shrank; nothing was stored): the route is looked up again, and
        the send goes on to another queue if ``mq`` is not in it any more."""
        if exc.code != MQResponseCode.INVALID_PARAMETER:
            return False
        await self._refresh(mq.topic)
        try:
            info = await self._publish_info(mq.topic)
        except LedgerMQError:
            return False
        return mq not in info.queues

    async def _find_master(
        self, mq: MessageQueue, failed: str, request: _SendRequest
    ) -> SendResult | LedgerMQError | None:
        """Send to the other members of ``mq``'s group when the route just refreshed still
        names ``failed`` as its master (see the module docstring): the result of the member
        that took it (the cached routes now name it), else None, or the error of a member
        whose answer did not come (the message may be stored there)."""
        route = self._client.cached_route(mq.topic)
        if route is None or master_address(route, mq.broker_name) != failed:
            return None  # the route names another master (or none): the next attempt uses it
        members = [
            addr
            for data in route.broker_datas
            if data.broker_name == mq.broker_name
            for _, addr in sorted(data.broker_addrs.items())
            if addr != failed
        ]
        unknown: LedgerMQError | None = None
        for address in members:
            try:
                result = await self._attempt(None, mq, request, address=address)
            except (NetworkError, MQResponseError) as exc:
                logger.debug("%s of %s did not take the send: %s", address, mq.broker_name, exc)
                if _maybe_stored(exc):
                    unknown = unknown or exc
                continue
            self._client.learn_master(mq.broker_name, address)
            self._faults.mark_ok(mq.broker_name)
            return result
        return unknown

    async def _attempt_once(
        self, info: TopicPublishInfo, mq: MessageQueue, request: _SendRequest
    ) -> SendResult:
        """One attempt of a send that is not retried here: an unknown outcome is reported as
        ``SendOutcomeUnknownError`` ("maybe stored"), any other failure as it came."""
        try:
            return await self._attempt(info, mq, request)
        except (NetworkError, MQResponseError) as exc:
            if _maybe_stored(exc):
                raise _maybe_stored_error(request.msg_id, exc, exc) from exc
            raise

    async def _attempt(
        self,
        info: TopicPublishInfo | None,
        mq: MessageQueue,
        request: _SendRequest,
        *,
        address: str | None = None,
    ) -> SendResult:
        if address is None:
            assert info is not None
            address = self._address(info, mq)
        response = await self._client.invoke(
            address,
            request.code,
            request.ext_fields(mq),
            request.body,
            timeout_s=self.send_timeout_s,
            expect=_SEND_CODES,
        )
        ext = response.ext_fields
        queue_id = int(ext.get("queueId", mq.queue_id))
        return SendResult(
            _STATUS_OF_CODE[MQResponseCode(response.code)],
            request.msg_id,
            ext.get("msgId", ""),
            MessageQueue(mq.topic, mq.broker_name, queue_id),
            int(ext.get("queueOffset", "-1")),
            ext.get("recallHandle") or None,
        )

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Cancel a pending timer message (sent with ``TIMER_DELIVER_MS``, ``TIMER_DELAY_MS`` or
        ``TIMER_DELAY_SEC`` in its properties) by the ``recall_handle`` its send answered
        (RECALL_MESSAGE, RocketMQ 5.3); returns its message id. ``MQResponseError`` when the
        broker refuses (NO_MESSAGE: it was delivered or recalled already)."""
        broker = _recall_handle_broker(recall_handle)
        info = await self._publish_info(topic)
        address = master_address(info.route, broker)
        if address is None:
            raise NoRouteError(f"broker group {broker} has no master in the route of {topic} now")
        fields = RecallMessageRequestHeader(topic, recall_handle, self.group).to_ext_fields()
        response = await self._client.invoke(
            address, MQRequestCode.RECALL_MESSAGE, fields, timeout_s=self.send_timeout_s
        )
        return response.ext_fields.get("msgId", "")


def _maybe_stored(exc: LedgerMQError) -> bool:
    """Whether an attempt that failed with ``exc`` may have stored the message: the request went
    out and no answer came, or the broker answered SYSTEM_ERROR (its answer when a quorum did not
    confirm the write in time; other causes of that code are reported the same way, to be safe).
    A connection never made, a missing route and every other answer stored nothing."""
    if isinstance(exc, NetworkError):
        return not isinstance(exc, ConnectError)
    return isinstance(exc, MQResponseError) and exc.code == MQResponseCode.SYSTEM_ERROR


def _maybe_stored_error(
    msg_id: str, unknown: LedgerMQError, last: LedgerMQError
) -> SendOutcomeUnknownError:
    detail = f"; the last attempt: {last}" if last is not unknown else ""
    return SendOutcomeUnknownError(
        f"message {msg_id} may be stored: an attempt's outcome is unknown ({unknown}){detail}. "
        "It may be delivered; sending it again may deliver it twice",
        msg_id,
    )


def _recall_handle_broker(handle: str) -> str:
    """The broker name in a recall handle (URL-safe base64 of ``"v1 topic broker time id"``)."""
    try:
        fields = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
    except (binascii.Error, UnicodeError, ValueError):
        fields = []
    if len(fields) < 5 or fields[0] != "v1":
        raise InvalidMessageError(f"not a recall handle: {handle!r:.80}")
    return fields[2]


def _no_writable_queue_reason(topic: str, route: TopicRouteData) -> str:
    """Why ``route`` offers no queue to write ``topic`` to, as a sentence naming each group."""
    groups = {b.broker_name: b for b in route.broker_datas}
    writable = {q.broker_name for q in route.queue_datas if is_writable(q.perm)}
    reasons = []
    for name in sorted(groups.keys() | {q.broker_name for q in route.queue_datas}):
        broker = groups.get(name)
        if broker is None or MASTER_ID not in broker.broker_addrs:
            reasons.append(f"{name} has no master (an election may be under way)")
        elif name not in writable:
            reasons.append(f"{name} does not allow writing to it")
    detail = "; ".join(reasons) if reasons else "the route lists no broker group"
    return f"no broker group can take messages for topic {topic!r} now: {detail}"


_write_v2: Final = SendMessageRequestHeaderV2.writer(
    default_topic=DEFAULT_TOPIC,
    default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
    reconsume_times=0,
    unit_mode=False,
    max_reconsume_times=None,
)
"""A send's V2 header from what varies (group, topic, queue id, sys flag, born time, flag,
properties, batch, broker name): the shared definition (``wire.headers``), with what a
producer always sends the same written in, as fast as the dict literal it replaced."""


@dataclass(frozen=True, slots=True)
class _SendRequest:
    """One send, ready for any queue: only ``queueId`` and ``brokerName`` vary per attempt."""

    group: str
    topic: str
    code: int
    body: bytes
    sys_flag: int
    flag: int
    properties: str
    msg_id: str
    born_ms: Callable[[], int]

    def ext_fields(self, mq: MessageQueue) -> dict[str, str]:
        """SEND_MESSAGE_V2's one-letter header (protocol-remoting-and-grpc.md section 2.7),
        ``SendMessageRequestHeaderV2`` as its generated writer writes it (``_write_v2``)."""
        return _write_v2(
            self.group,
            self.topic,
            mq.queue_id,
            self.sys_flag,
            self.born_ms(),
            self.flag,
            self.properties,
            self.code == MQRequestCode.SEND_BATCH_MESSAGE,
            mq.broker_name,
        )
