"""Transactions through the stand-alone proxy: the ids it hands out, EndTransaction as
END_TRANSACTION (37), and the masters' CHECK_TRANSACTION_STATE (39) relayed to a v5 producer's
Telemetry stream as a ``RecoverOrphanedTransactionCommand``.

- A transactional send is a remoting send of a half message (``proxy.messages`` sets
  ``TRAN_MSG``) under the producer group ``GRPC_PRODUCER_GROUP``; its ``transaction_id`` is
  ``"<brokerName>:<offset msgId>"``: the broker group, so EndTransaction reaches that group's
  current master (the offset msgId alone names a host, which a failover changes), and the
  offset msgId, which names where the half message is stored, the same on every replica.
  Broker names never hold a ``:`` (RocketMQ allows letters, digits, ``%|_-``).
- EndTransaction is END_TRANSACTION with RocketMQ's ``EndTransactionRequestHeader`` fields
  (``proxy.remote_backend``).
- Check-backs: the proxy heartbeats the masters of the topics v5 producers publish as a
  producer of ``GRPC_PRODUCER_GROUP`` (as RocketMQ's proxy registers its clients' groups), so a
  master checks a half message back over the proxy's connection; the proxy hands it to the
  Telemetry stream of a producer whose settings publish the topic (``proxy.telemetry``; with
  the ACL on, only one whose stream was signed by an account with PUB on the topic), and that
  producer's checker answers with an EndTransaction.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ledgermq.errors import MessageFormatError
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    from ledgermq.wire import RemotingCommand

__all__ = ["orphaned_command", "transaction_id"]

_log = logging.getLogger(__name__)


def transaction_id(broker_name: str, offset_msg_id: str) -> str:
    """The id a transactional send through the proxy answers (module docstring)."""
    return f"{broker_name}:{offset_msg_id}"


def orphaned_command(command: RemotingCommand) -> service_pb2.TelemetryCommand | None:
    """The ``RecoverOrphanedTransactionCommand`` for a master's CHECK_TRANSACTION_STATE (its
    body the half message's record, its fields naming the broker and the offset msgId); None
    if it does not hold one."""
    fields = command.ext_fields
    try:
        (record,) = decode_records(command.body)
    except (MessageFormatError, ValueError):
        return None
    broker_name = fields.get("brokerName", "")
    offset_msg_id = fields.get("offsetMsgId") or record.offset_msg_id
    if not broker_name:
        return None
    message = stored_message(record)
    system = message.system_properties
    system.message_type = definition_pb2.TRANSACTION
    telemetry = service_pb2.TelemetryCommand()
    orphan = telemetry.recover_orphaned_transaction_command
    orphan.message.CopyFrom(message)
    orphan.transaction_id = transaction_id(broker_name, offset_msg_id)
    return telemetry
