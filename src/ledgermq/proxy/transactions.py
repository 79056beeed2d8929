"""Transactions at the gRPC door: EndTransaction in, RecoverOrphanedTransactionCommand out.

Translation only; ``broker.service.transactions`` holds what ending a transaction means.

- A v5 transactional send (``message_type`` TRANSACTION) is stored as a half message
  (``messages.outgoing`` sets ``TRAN_MSG``); its ``SendResultEntry.transaction_id`` is the
  half message's offset msgId (``transaction_id``), which names where it is stored. So the id
  needs no table in the door, and it means the same on every replica: a commit after a
  failover reaches the half message at the same commit-log offset on the new master.
- ``EndTransaction`` (``proxy.local_backend``): the id back to the offset, ``COMMIT`` / ``ROLLBACK``
  to the service's resolutions, ``SOURCE_SERVER_CHECK`` to an answer to a check-back; the
  ``message_id`` and ``topic`` must be the half message's. An id that does not decode answers
  INVALID_TRANSACTION_ID.
- The check-back (``TelemetryProducers``): v5 producers have no group (the door records
  ``GRPC_PRODUCER_GROUP``), so a half message sent over gRPC is checked back with a producer
  whose Telemetry settings publish its topic, as a ``RecoverOrphanedTransactionCommand`` on
  that producer's Telemetry stream; its checker answers with an EndTransaction. With the ACL
  on, only a stream whose account has PUB on the topic gets it (the check-back carries the
  message; settings are only a claim).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.proxy.telemetry import TelemetryStreams

if TYPE_CHECKING:
    from ledgermq.broker.service.transactions import TransactionCheck

__all__ = ["TelemetryProducers", "orphaned_command", "transaction_id"]


def transaction_id(offset_msg_id: str) -> str:
    """The ``transaction_id`` a transactional send answers: the half message's offset msgId."""
    return offset_msg_id


def orphaned_command(check: TransactionCheck) -> service_pb2.TelemetryCommand:
    """The ``RecoverOrphanedTransactionCommand`` for ``check``: the half message as a v5
    message (type TRANSACTION, its real topic) and the transaction id."""
    message = stored_message(check.message)
    system = message.system_properties
    system.message_type = definition_pb2.TRANSACTION
    system.queue_offset = check.queue_offset
    command = service_pb2.TelemetryCommand()
    orphan = command.recover_orphaned_transaction_command
    orphan.message.CopyFrom(message)
    orphan.transaction_id = transaction_id(check.offset_msg_id)
    return command


class TelemetryProducers(TelemetryStreams):
    """The v5 producers' Telemetry streams as a ``CheckBackChannel`` of the service (module
    docstring)."""

    def __call__(self, check: TransactionCheck) -> bool:
        if check.producer_group not in ("", GRPC_PRODUCER_GROUP):
            return False  # a remoting producer's (its group's connections are asked)
        return self.relay(check.message.topic, orphaned_command(check))
