"""The transactional producer: a half message, the local transaction, then commit or rollback --
and answers to the broker's check-backs (RocketMQ's ``TransactionMQProducer``).

``send_message_in_transaction`` sends the message as a *half* message (property
``TRAN_MSG=true``, ``PGROUP`` = the producer group): the broker stores it where no consumer sees
it. It then runs ``local_executor(message, arg)``, which does the local transaction and returns a
``LocalTransactionState``; an exception counts as ``UNKNOWN``. The producer then ends the
transaction at the broker that stored the half message (END_TRANSACTION, 37; 8 commit, 12
rollback, 0 unknown). Commit delivers the message to consumers once; rollback drops it.

When the end does not arrive (``UNKNOWN``, the producer died, the end was lost), the broker asks
a producer of the group after ``transactionTimeOut`` (CHECK_TRANSACTION_STATE, 39): ``checker``
gets the half message (its real topic, body, properties and ``msg_id``) and returns the state,
which is sent back as END_TRANSACTION with ``fromTransactionCheck=true``. An ``UNKNOWN`` answer
leaves it open; after ``transactionCheckMax`` unanswered checks the broker discards it.

Differences from RocketMQ's Java client: the end is sent two-way (it waits for the broker's
answer, so a committed message is visible when ``send_message_in_transaction`` returns), and a
failed end is logged and reported in the result (``end_error``) rather than raised: the
check-back settles it. Executors and checkers may be plain functions or coroutines.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ledgermq.client.producer import Producer
from ledgermq.errors import BadRequestError, ConfigError, LedgerMQError, MessageFormatError
from ledgermq.wire import MessageProperty, SysFlag, decode_offset_message_id
from ledgermq.wire.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ledgermq.client.producer import SendResult
    from ledgermq.net import Connection
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.message import MessageExt

__all__ = [
    "LocalTransactionState",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionalMessage",
]

logger = logging.getLogger("ledgermq.client")


class LocalTransactionState(enum.Enum):
    """How the local transaction ended (RocketMQ's ``LocalTransactionState``)."""

    COMMIT_MESSAGE = SysFlag.TRANSACTION_COMMIT
    ROLLBACK_MESSAGE = SysFlag.TRANSACTION_ROLLBACK
    UNKNOWN = SysFlag.TRANSACTION_NOT_TYPE
    """Not decided yet: the broker checks back later."""


@dataclass(frozen=True, slots=True)
class TransactionalMessage:
    """The message a local executor is given: what was sent, and its id."""

    topic: str
    body: bytes
    msg_id: str
    """The ``UNIQ_KEY`` consumers will see as the message's id (RocketMQ's transaction id)."""
    properties: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    send_result: SendResult
    """The half message's send: its ``msg_id``, queue and half-queue offset."""
    local_state: LocalTransactionState
    end_error: LedgerMQError | None = None
    """Why the end could not be delivered (the broker's check-back settles it), None if it was."""

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


_State: TypeAlias = "LocalTransactionState | Awaitable[LocalTransactionState]"
LocalExecutor: TypeAlias = "Callable[[TransactionalMessage, Any], _State]"
Checker: TypeAlias = "Callable[[MessageExt], _State]"

_END_TIMEOUT_S: Final = 3.0


class TransactionProducer(Producer):
    """A ``Producer`` that also sends transactional messages (module docstring).

    Args:
        group: the producer group; the broker checks back with a connected producer of it.
        namesrv_addr: ``"host:port;host:port"``.
        checker: answers the broker's check-back for a half message left open.
        **options: as ``Producer``'s.
    """

    def __init__(self, group: str, namesrv_addr: str, *, checker: Checker, **options: Any) -> None:
        super().__init__(group, namesrv_addr, **options)
        if not callable(checker):
            raise ConfigError("a TransactionProducer needs a checker (a callable)")
        self._checker = checker
        self._checks: set[asyncio.Task[None]] = set()
        self._client.on_check_transaction = self._on_check
        #: Check-backs answered (by state), for tests and operators.
        self.checks_answered: dict[LocalTransactionState, int] = {}

    async def shutdown(self) -> None:
        for task in list(self._checks):
            task.cancel()
        await super().shutdown()

    async def send_message_in_transaction(
        self,
        topic: str,
        body: bytes,
        local_executor: LocalExecutor,
        arg: Any = None,
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> TransactionSendResult:
        """Send a half message, run ``local_executor(message, arg)``, end the transaction.

        Raises what ``send`` raises if the half message was not stored (the executor is then
        not run, as in RocketMQ)."""
        props = dict(properties or {})
        if MessageProperty.DELAY in props:
            raise ConfigError("a transactional message cannot be delayed")
        props[MessageProperty.TRAN_MSG] = "true"
        props[MessageProperty.PRODUCER_GROUP] = self.group
        sent = await self.send(topic, body, tags=tags, keys=keys, properties=props)
        message = TransactionalMessage(topic, body, sent.msg_id, props)
        try:
            state = await _resolve(local_executor(message, arg))
        except Exception:
            logger.exception("local transaction of %s failed; its state is UNKNOWN", sent.msg_id)
            state = LocalTransactionState.UNKNOWN
        try:
            await self._end(sent, state)
        except LedgerMQError as exc:
            logger.warning("end of transaction %s (%s) not delivered: %s; the broker will "
                           "check back", sent.msg_id, state.name, exc)  # fmt: skip
            return TransactionSendResult(sent, state, exc)
        return TransactionSendResult(sent, state)

    async def _end(self, sent: SendResult, state: LocalTransactionState) -> None:
        mq = sent.message_queue
        info = await self._publish_info(mq.topic)
        address = self._address(info, mq)
        header = EndTransactionRequestHeader(
            commit_or_rollback=state.value,
            commit_log_offset=decode_offset_message_id(sent.offset_msg_id)[2],
            producer_group=self.group,
            tran_state_table_offset=sent.queue_offset,
            from_transaction_check=False,
            msg_id=sent.msg_id,
            transaction_id=sent.msg_id,
            topic=mq.topic,
        )
        await self._client.invoke(
            address, header.CODE, header.to_ext_fields(), timeout_s=_END_TIMEOUT_S
        )

    # ------------------------------------------------------------------ check-backs
    def _on_check(self, conn: Connection, command: RemotingCommand) -> None:
        task = asyncio.get_running_loop().create_task(self._answer_check(conn.address, command))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, address: str, command: RemotingCommand) -> None:
        try:
            (message,) = decode_records(command.body)
            # CHECK_TRANSACTION_STATE's offsets and ids, which the answer gives back
            check = CheckTransactionStateRequestHeader.from_ext_fields(command.ext_fields)
        except (MessageFormatError, ValueError, BadRequestError) as exc:
            logger.warning("check-back from %s with an unreadable message: %s", address, exc)
            return
        try:
            state = await _resolve(self._checker(message))
        except Exception:
            logger.exception("transaction checker failed for %s; answering UNKNOWN", message.msg_id)
            state = LocalTransactionState.UNKNOWN
        self.checks_answered[state] = self.checks_answered.get(state, 0) + 1
        answer = EndTransactionRequestHeader(
            commit_or_rollback=state.value,
            commit_log_offset=check.commit_log_offset,
            producer_group=self.group,
            tran_state_table_offset=check.tran_state_table_offset,
            from_transaction_check=True,
            msg_id=message.msg_id if check.msg_id is None else check.msg_id,
            transaction_id=message.msg_id if check.transaction_id is None else check.transaction_id,
            topic=message.topic,
        )
        try:
            await self._client.invoke_oneway(address, answer.CODE, answer.to_ext_fields())
        except LedgerMQError as exc:
            logger.warning("answer to the check-back of %s not sent: %s", message.msg_id, exc)


async def _resolve(value: _State) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, LocalTransactionState):
        raise TypeError(f"a local transaction state must be a LocalTransactionState, not {value!r}")
    return value
