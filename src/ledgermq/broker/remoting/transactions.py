"""END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39): the remoting door of
``TransactionService`` (broker.service.transactions), which holds what ending a transaction
means. Translators only.

END_TRANSACTION's header is RocketMQ's ``EndTransactionRequestHeader``: ``producerGroup``,
``tranStateTableOffset`` (the half message's offset in the half queue), ``commitLogOffset`` (where
it is stored), ``commitOrRollback`` (8 commit, 12 rollback, 0 unknown: RocketMQ's
``MessageSysFlag.TRANSACTION_*_TYPE``), ``fromTransactionCheck``, ``msgId`` and
``transactionId`` (and RocketMQ 5's ``topic``, checked against the half message's real topic:
the ACL grants PUB on it). Clients send it one-way (Java ``endTransactionOneway``); a two-way one is
answered SUCCESS, or the refusal's code with a remark that says why.

CHECK_TRANSACTION_STATE goes the other way, one-way, to a producer of the half message's group
connected to this broker (``RemotingCheckBack``): RocketMQ's ``CheckTransactionStateRequestHeader``
(``tranStateTableOffset``, ``commitLogOffset``, ``msgId``, ``transactionId``, ``offsetMsgId``,
and RocketMQ 5's ``topic`` / ``brokerName``) with the half message as its body, in the record
layout, under its real topic and queue. The producer answers with an END_TRANSACTION whose
``fromTransactionCheck`` is true.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import InvalidArgumentError
from ledgermq.broker.service.message_writer import split_host_port
from ledgermq.broker.service.transactions import EndTransactionRequest, Resolution
from ledgermq.errors import NetworkError
from ledgermq.security.acl import Perm, record_needs
from ledgermq.wire import MQResponseCode, RemotingCommand
from ledgermq.wire.headers import CheckTransactionStateRequestHeader
from ledgermq.wire.message import SysFlag, encode_properties, encode_record

if TYPE_CHECKING:
    from ledgermq.broker.remoting.access import SignedIn
    from ledgermq.broker.remoting.consumers import Registry
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.transactions import TransactionCheck, TransactionService
    from ledgermq.net import Connection
    from ledgermq.wire.headers import EndTransactionRequestHeader

__all__ = ["EndTransactionProcessor", "RemotingCheckBack", "check_request"]

_RESOLUTIONS: Final = {
    SysFlag.TRANSACTION_COMMIT: Resolution.COMMIT,
    SysFlag.TRANSACTION_ROLLBACK: Resolution.ROLLBACK,
    SysFlag.TRANSACTION_NOT_TYPE: Resolution.UNKNOWN,
}


def parse_end_request(header: EndTransactionRequestHeader) -> EndTransactionRequest:
    """The request ``header`` (parsed once by the door) asks for; ``InvalidArgumentError`` for
    a ``commitOrRollback`` that is none of RocketMQ's three."""
    flag = header.commit_or_rollback
    resolution = _RESOLUTIONS.get(flag)
    if resolution is None:
        raise InvalidArgumentError(
            f"commitOrRollback must be 8 (commit), 12 (rollback) or 0 (unknown), not {flag}"
        )
    return EndTransactionRequest(
        commit_log_offset=header.commit_log_offset,
        resolution=resolution,
        producer_group=header.producer_group,
        queue_offset=header.tran_state_table_offset,
        msg_id=header.msg_id,
        from_check=header.from_transaction_check,
        topic=header.topic,
    )


class EndTransactionProcessor:
    def __init__(self, service: TransactionService) -> None:
        self._service = service

    async def end(
        self, command: RemotingCommand, header: EndTransactionRequestHeader, access: Access
    ) -> RemotingCommand:
        """SUCCESS, or the refusal of ``header`` (the door parsed it once, before the ACL
        checked PUB on its topic). ``access``: the requester, who needs PUB on the half
        message's real topic. A request that does not match its half message, or that was
        settled the other way (``InvalidArgumentError``), is MESSAGE_ILLEGAL, where RocketMQ's
        broker answers SYSTEM_ERROR: its clients send END_TRANSACTION one-way and never read
        the code, and a two-way caller (the stand-alone proxy, ``proxy.remote_status``) must
        tell the caller's mistake (BAD_REQUEST) from a broker failure (INTERNAL_ERROR)."""
        try:
            await self._service.end(parse_end_request(header), access)
        except InvalidArgumentError as exc:
            return command.response(MQResponseCode.MESSAGE_ILLEGAL, remark=str(exc))
        return command.response(MQResponseCode.SUCCESS)


def check_request(check: TransactionCheck, broker_name: str) -> RemotingCommand:
    """The CHECK_TRANSACTION_STATE request (one-way) for ``check``."""
    message = check.message
    body = encode_record(
        topic=message.topic,
        queue_id=message.queue_id,
        body=message.body,
        flag=message.flag,
        properties=encode_properties(message.properties),
        sys_flag=(message.sys_flag & ~(SysFlag.TRANSACTION_MASK | 1))
        | SysFlag.TRANSACTION_PREPARED,
        born_timestamp=message.born_timestamp,
        born_host=split_host_port(message.born_host),
        store_timestamp=message.store_timestamp,
        store_host=split_host_port(message.store_host),
        reconsume_times=message.reconsume_times,
        queue_offset=check.queue_offset,
        physical_offset=check.commit_log_offset,
    )
    header = CheckTransactionStateRequestHeader(
        check.queue_offset,
        check.commit_log_offset,
        message.msg_id,
        check.transaction_id,
        check.offset_msg_id,
        message.topic,
        broker_name,
    )
    return RemotingCommand(header.CODE, 0, ext_fields=header.to_ext_fields(), body=body)


class RemotingCheckBack:
    """A ``CheckBackChannel``: the check-back to a producer of the group connected here.

    ``signed_in`` (the ACL is on): only to a connection whose heartbeat was signed by an account
    with PUB on the half message's topic, since the check-back carries the message and any
    client may claim a producer group; without one, nobody gets it (the checker tries again)."""

    def __init__(
        self, clients: Registry, broker_name: str, signed_in: SignedIn | None = None
    ) -> None:
        self._clients = clients
        self._broker_name = broker_name
        self._signed_in = signed_in

    def __call__(self, check: TransactionCheck) -> bool:
        accept = None
        signed_in = self._signed_in
        if signed_in is not None:
            needs = record_needs(check.message.topic, Perm.PUB)

            def accept(conn: Connection) -> bool:
                return signed_in.allows(conn, needs)

        conn = self._clients.producer_connection(check.producer_group, accept)
        if conn is None:
            return False
        with contextlib.suppress(NetworkError):
            conn.send_oneway(check_request(check, self._broker_name))
            return True
        return False
