"""The ``Backend`` of the stand-alone proxy: the brokers' masters over remoting (``proxy.forward``).

Each operation goes to the master of the broker group its handle or id names, found in the
topic's route, and is retried across a failover until the caller's deadline where repeating it
is safe (``Forwarder``). A replica's door uses the same backend for what only its master serves
while it is not the master (``proxy.local_backend``).

- An acknowledgement is ACK_MESSAGE per entry, to the group the receipt handle (the broker's
  ``POP_CK``) names; NO_MESSAGE after an attempt whose outcome was unknown is taken as done
  (that attempt acknowledged it).
- CHANGE_MESSAGE_INVISIBLETIME is not retried when its outcome is unknown (a change that was
  made makes the handle stale, so the retry would fail anyway).
- A dead letter goes as RocketMQ's proxy sends it over remoting: CONSUMER_SEND_MSG_BACK (36)
  with ``delayLevel`` -1 to ``%DLQ%<group>``, then ACK_MESSAGE. The send-back names the message
  by its commit-log offset, which a receipt handle does not hold (it names the queue and the
  queue offset), so the message is read first with a one-message PULL_MESSAGE there. In that
  order a failure between the steps leaves the message where a consumer still gets it (it comes
  back after its invisible time), never lost; at worst it is a dead letter delivered once more.
- END_TRANSACTION goes to the group the transaction id names: the proxy answers a
  transactional send with ``"<brokerName>:<offset msgId>"``.
- The PullConsumer set is what a remoting pull consumer sends (PULL_MESSAGE 11,
  UPDATE_CONSUMER_OFFSET 15, QUERY_CONSUMER_OFFSET 14, GET_MIN_OFFSET 31 / GET_MAX_OFFSET 30,
  SEARCH_OFFSET_BY_TIMESTAMP 29) to the master of the queue's broker group, which the request
  must name (the route's queues all carry it); each is safe to repeat, so retried.
- RECALL_MESSAGE (370, RocketMQ 5.3) goes to the group the recall handle names (RocketMQ 5.3's
  ``RecallMessageHandle.HandleV1``: URL-safe base64 of ``"v1 <topic> <brokerName> <due ms>
  <message id>"``); the handle is forwarded as it is and the master decides.

Every request is signed with the client's credentials (the broker's own account in a replica's
door): the caller was authorized at the door it reached.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError, MessageFormatError, MQResponseError, TopicNotFoundError
from ledgermq.messaging import Delivered, Delivery, OffsetPolicy, PullOutcome, Resolution
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.remote_messages import RemoteMessages, refusing
from ledgermq.proxy.remote_sessions import RemoteSessions
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, status
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    RecallMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from ledgermq.wire.message import (
    DEFAULT_MAX_MESSAGE_BYTES,
    SysFlag,
    decode_offset_message_id,
    decode_records,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ledgermq.messaging import AckEntry, Caller, Door, EndTransaction, PullQuery, QueueRef
    from ledgermq.proxy.forward import Forwarded, Forwarder

__all__ = ["RemoteBackend", "end_fields", "handle_broker", "recall_broker", "transaction_at"]

_FLAG_SUSPEND: Final = 2
_FLAG_SUBSCRIPTION: Final = 4
_PULL_CODES: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.PULL_NOT_FOUND,
    MQResponseCode.PULL_RETRY_IMMEDIATELY,
    MQResponseCode.PULL_OFFSET_MOVED,
)
_PULL_OUTCOMES: Final[dict[int, PullOutcome]] = {
    MQResponseCode.SUCCESS: PullOutcome.FOUND,
    MQResponseCode.PULL_OFFSET_MOVED: PullOutcome.OFFSET_MOVED,
    MQResponseCode.PULL_RETRY_IMMEDIATELY: PullOutcome.FILTERED,
}
_FLAGS: Final = {
    Resolution.COMMIT: SysFlag.TRANSACTION_COMMIT,
    Resolution.ROLLBACK: SysFlag.TRANSACTION_ROLLBACK,
    Resolution.UNKNOWN: SysFlag.TRANSACTION_NOT_TYPE,
}


def handle_broker(handle: str) -> str | None:
    """The broker group a receipt handle (the broker's ``POP_CK``: ``"<seq> <popTime>
    <invisibleTime> 0 0 <brokerName> <queueId> <offset>"``) names; None if it is not one."""
    fields = handle.split(" ")
    if len(fields) != 8 or not fields[5]:
        return None
    return fields[5]


def recall_broker(handle: str) -> str | None:
    """The broker group a recall handle names; None if it is not a v1 handle."""
    try:
        raw = base64.urlsafe_b64decode(handle.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        return None
    fields = raw.split(" ")
    if len(fields) < 5 or fields[0] != "v1" or not fields[2] or not fields[3].isdigit():
        return None
    return fields[2]


def _check_queue(queue: QueueRef) -> None:
    """``Refusal`` for a queue that names no broker group or a negative id."""
    if not queue.broker_name:
        raise Refusal(
            status(Code.BAD_REQUEST, "the queue names no broker (take it from QueryRoute)")
        )
    if queue.queue_id < 0:
        raise Refusal(status(Code.BAD_REQUEST, f"queue id {queue.queue_id} is negative"))


def _int(fields: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(fields.get(name) or default)
    except ValueError:
        return default


def end_fields(request: EndTransaction, commit_log_offset: int) -> dict[str, str]:
    """END_TRANSACTION's fields for the half message stored at ``commit_log_offset``;
    ``Refusal`` when the request names no topic (the master compares it with the half
    message's)."""
    if not request.topic:
        raise Refusal(status(Code.ILLEGAL_TOPIC, "the request names no topic"))
    return EndTransactionRequestHeader(
        commit_or_rollback=_FLAGS[request.resolution],
        commit_log_offset=commit_log_offset,
        producer_group=GRPC_PRODUCER_GROUP,
        from_transaction_check=request.from_check,
        msg_id=request.message_id or None,
        transaction_id=request.transaction_id,
        topic=request.topic,
    ).to_ext_fields()


def transaction_at(transaction_id: str) -> tuple[str, int]:
    """(broker group, commit-log offset) of a proxy's transaction id; ``Refusal`` otherwise."""
    broker_name, _, offset_msg_id = transaction_id.partition(":")
    try:
        offset = decode_offset_message_id(offset_msg_id)[2]
    except (MessageFormatError, ValueError):
        offset = -1
    if not broker_name or offset < 0:
        raise Refusal(
            status(
                Code.INVALID_TRANSACTION_ID,
                f"transaction_id {transaction_id!r} is not one this proxy gave",
            )
        )
    return broker_name, offset


class RemoteBackend(RemoteMessages, RemoteSessions):
    """``Backend`` over a ``Forwarder`` (module docstring); routes, settings, sends and
    receives are ``proxy.remote_messages``', the clients' sessions ``proxy.remote_sessions``'."""

    def __init__(
        self,
        forwarder: Forwarder,
        endpoint: Door | None = None,
        *,
        check_message_type: bool = True,
        max_body_size: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """``endpoint``: the door routes name (the proxy's own; None in a replica's door,
        which answers routes itself and forwards only the master's writes)."""
        RemoteMessages.__init__(
            self, forwarder, endpoint,
            check_message_type=check_message_type, max_body_size=max_body_size,
        )  # fmt: skip
        RemoteSessions.__init__(self, forwarder)

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> list[Refusal | None]:
        return [await self._ack(group, topic, e.receipt_handle, deadline_s) for e in entries]

    async def _ack(self, group: str, topic: str, handle: str, deadline_s: float) -> Refusal | None:
        broker_name = handle_broker(handle)
        if broker_name is None:
            return Refusal(
                status(Code.INVALID_RECEIPT_HANDLE, f"not a receipt handle: {handle!r:.120}")
            )
        fields = AckMessageRequestHeader(group, topic, handle).to_ext_fields()
        try:
            forwarded = await self._forward.call(
                topic, broker_name, MQRequestCode.ACK_MESSAGE, fields, deadline_s=deadline_s,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.NO_MESSAGE),
            )  # fmt: skip
        except LedgerMQError as exc:
            return Refusal(remote_status(exc))
        if forwarded.response.code == MQResponseCode.NO_MESSAGE and not forwarded.unknown_before:
            remark = forwarded.response.remark or "stale handle"
            return Refusal(status(Code.INVALID_RECEIPT_HANDLE, remark))
        # NO_MESSAGE after an attempt whose outcome is unknown: that attempt acked it
        return None

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int, deadline_s: float
    ) -> str:
        broker_name = handle_broker(receipt_handle)
        if broker_name is None:
            raise Refusal(
                status(
                    Code.INVALID_RECEIPT_HANDLE, f"not a receipt handle: {receipt_handle!r:.120}"
                )
            )
        fields = ChangeInvisibleTimeRequestHeader(
            group, topic, receipt_handle, invisible_ms
        ).to_ext_fields()
        try:
            forwarded = await self._forward.call(
                topic, broker_name, MQRequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields,
                deadline_s=deadline_s, retry_unknown=False,
            )  # fmt: skip
        except LedgerMQError as exc:
            raise Refusal(remote_status(exc)) from None
        return forwarded.response.ext_fields.get("extraInfo", "")

    async def forward_to_dead_letters(
        self, group: str, topic: str, receipt_handle: str, deadline_s: float
    ) -> None:
        handle = receipt_handle
        fields = handle.split(" ")
        if len(fields) != 8 or not fields[5] or not (fields[6].isdigit() and fields[7].isdigit()):
            raise Refusal(
                status(Code.INVALID_RECEIPT_HANDLE, f"not a receipt handle: {handle!r:.120}")
            )
        if not group:
            refused = status(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group")
            raise Refusal(refused)
        broker_name, queue_id, offset = fields[5], fields[6], int(fields[7])
        forwarder = self._forward
        try:
            pulled = await forwarder.call(
                topic, broker_name, MQRequestCode.PULL_MESSAGE,
                PullMessageRequestHeader(
                    group, topic, int(queue_id), offset, max_msg_nums=1,
                    sys_flag=_FLAG_SUBSCRIPTION, commit_offset=-1, suspend_timeout_millis=0,
                    subscription="*", sub_version=0, expression_type="TAG",
                ).to_ext_fields(),
                deadline_s=deadline_s,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.PULL_NOT_FOUND,
                        MQResponseCode.PULL_OFFSET_MOVED, MQResponseCode.PULL_RETRY_IMMEDIATELY),
            )  # fmt: skip
            records = (
                decode_records(pulled.response.body)
                if pulled.response.code == MQResponseCode.SUCCESS
                else []
            )
            if not records or records[0].queue_offset != offset:
                raise Refusal(
                    status(
                        Code.INVALID_RECEIPT_HANDLE,
                        f"the message of handle {handle!r:.120} is no longer in {topic}:{queue_id}",
                    )
                )
            message = records[0]
            await forwarder.call(
                topic, broker_name, MQRequestCode.CONSUMER_SEND_MSG_BACK,
                ConsumerSendMsgBackRequestHeader(
                    message.commit_log_offset, group, -1, message.msg_id, topic
                ).to_ext_fields(),
                deadline_s=deadline_s,
            )  # fmt: skip
            acked = await forwarder.call(
                topic, broker_name, MQRequestCode.ACK_MESSAGE,
                AckMessageRequestHeader(group, topic, handle).to_ext_fields(),
                deadline_s=deadline_s, expect=(MQResponseCode.SUCCESS, MQResponseCode.NO_MESSAGE),
            )  # fmt: skip
        except LedgerMQError as exc:
            raise Refusal(remote_status(exc)) from None
        if acked.response.code == MQResponseCode.NO_MESSAGE and not acked.unknown_before:
            raise Refusal(
                status(
                    Code.INVALID_RECEIPT_HANDLE,
                    f"the message went to the dead letters, but its handle is stale: "
                    f"{acked.response.remark}",
                )
            )

    async def end_transaction(
        self, request: EndTransaction, caller: Caller, deadline_s: float
    ) -> None:
        """To the master of the group the transaction id names; retried across a failover
        (the same end again is accepted; the other one is refused)."""
        broker_name, offset = transaction_at(request.transaction_id)
        await self.end_at(broker_name, offset, request, deadline_s)

    async def end_at(
        self, broker_name: str, commit_log_offset: int, request: EndTransaction, deadline_s: float
    ) -> None:
        """END_TRANSACTION for the half message at ``commit_log_offset`` to the master of
        ``broker_name``."""
        fields = end_fields(request, commit_log_offset)
        await refusing(
            self._forward.call(
                request.topic, broker_name, MQRequestCode.END_TRANSACTION, fields,
                deadline_s=deadline_s,
            ),
            request.topic,
        )  # fmt: skip

    async def recall(self, topic: str, recall_handle: str, deadline_s: float) -> str:
        """A recall is safe to repeat, so it is retried across a failover."""
        broker_name = recall_broker(recall_handle)
        if broker_name is None:
            raise Refusal(
                status(Code.BAD_REQUEST, f"recall handle is invalid: {recall_handle!r:.120}")
            )
        fields = RecallMessageRequestHeader(
            topic, recall_handle, GRPC_PRODUCER_GROUP
        ).to_ext_fields()
        try:
            forwarded = await self._forward.call(
                topic, broker_name, MQRequestCode.RECALL_MESSAGE, fields, deadline_s=deadline_s
            )
        except TopicNotFoundError:
            raise Refusal(status(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")) from None
        except MQResponseError as exc:
            if exc.code == MQResponseCode.NO_MESSAGE:
                raise Refusal(status(Code.NOT_FOUND, str(exc))) from None
            raise Refusal(remote_status(exc)) from None
        except LedgerMQError as exc:
            raise Refusal(remote_status(exc)) from None
        return forwarded.response.ext_fields.get("msgId", "")

    # ------------------------------------------------------------------ pull and offsets
    async def _queue_call(
        self,
        queue: QueueRef,
        code: int,
        fields: Mapping[str, str],
        deadline_s: float,
        *,
        expect: tuple[int, ...] = (MQResponseCode.SUCCESS,),
        extra_s: float = 0.0,
    ) -> Forwarded:
        """``code`` to the master of the queue's group; ``Refusal`` when it fails."""
        return await refusing(
            self._forward.call(
                queue.topic, queue.broker_name, code, fields,
                deadline_s=max(deadline_s, extra_s + 0.5), timeout_s=3.0 + extra_s,
                expect=expect,
            ),
            queue.topic,
        )  # fmt: skip

    async def pull(self, query: PullQuery, deadline_s: float) -> Delivered:
        queue = query.queue
        _check_queue(queue)
        fields = PullMessageRequestHeader(
            query.group, queue.topic, queue.queue_id, query.offset,
            max_msg_nums=query.max_messages,
            sys_flag=_FLAG_SUBSCRIPTION | (_FLAG_SUSPEND if query.poll_ms else 0),
            commit_offset=-1, suspend_timeout_millis=query.poll_ms,
            subscription=query.expression, sub_version=0, expression_type=query.expression_type,
        ).to_ext_fields()  # fmt: skip
        forwarded = await self._queue_call(
            queue, MQRequestCode.PULL_MESSAGE, fields, deadline_s,
            expect=_PULL_CODES, extra_s=query.poll_ms / 1000,
        )  # fmt: skip
        response = forwarded.response
        ext = response.ext_fields
        outcome = _PULL_OUTCOMES.get(response.code, PullOutcome.NOT_FOUND)
        return Delivered(
            outcome=outcome,
            messages=[Delivery(r) for r in decode_records(response.body)]
            if outcome is PullOutcome.FOUND
            else [],
            next_offset=_int(ext, "nextBeginOffset", query.offset),
            min_offset=_int(ext, "minOffset", 0),
            max_offset=_int(ext, "maxOffset", 0),
        )

    async def commit_offset(
        self, group: str, queue: QueueRef, offset: int, deadline_s: float
    ) -> None:
        _check_queue(queue)
        header = UpdateConsumerOffsetRequestHeader(group, queue.topic, queue.queue_id, offset)
        await self._queue_call(queue, header.CODE, header.to_ext_fields(), deadline_s)

    async def consumer_offset(self, group: str, queue: QueueRef, deadline_s: float) -> int | None:
        _check_queue(queue)
        header = QueryConsumerOffsetRequestHeader(group, queue.topic, queue.queue_id)
        forwarded = await self._queue_call(
            queue, header.CODE, header.to_ext_fields(), deadline_s,
            expect=(MQResponseCode.SUCCESS, MQResponseCode.QUERY_NOT_FOUND),
        )  # fmt: skip
        if forwarded.response.code == MQResponseCode.QUERY_NOT_FOUND:
            return None
        return _int(forwarded.response.ext_fields, "offset", -1)

    async def query_offset(
        self, queue: QueueRef, policy: OffsetPolicy, at_ms: int | None, deadline_s: float
    ) -> int:
        _check_queue(queue)
        topic, queue_id = queue.topic, queue.queue_id
        header: SearchOffsetRequestHeader | GetMinOffsetRequestHeader | GetMaxOffsetRequestHeader
        if policy is OffsetPolicy.TIMESTAMP and at_ms is not None:
            header = SearchOffsetRequestHeader(topic, queue_id, at_ms)
        elif policy is OffsetPolicy.BEGINNING:
            header = GetMinOffsetRequestHeader(topic, queue_id)
        else:  # the end (as the local backend answers a time-less TIMESTAMP)
            header = GetMaxOffsetRequestHeader(topic, queue_id)
        forwarded = await self._queue_call(queue, header.CODE, header.to_ext_fields(), deadline_s)
        return _int(forwarded.response.ext_fields, "offset", 0)
