"""Transactions at the gRPC door: EndTransaction in, RecoverOrphanedTransactionCommand out.

Translation only; ``broker.service.transactions`` holds what ending a transaction means.

- A v5 transactional send (``message_type`` TRANSACTION) is stored as a half message
  (``messages.send_request`` sets ``TRAN_MSG``); its ``SendResultEntry.transaction_id`` is the
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

import itertools
from typing import TYPE_CHECKING, TypeAlias

from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable

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


_Outbox: TypeAlias = "asyncio.Queue[service_pb2.TelemetryCommand | None]"
"""Commands to one client's Telemetry stream (None: the stream ends)."""
_MayPublish: TypeAlias = "Callable[[str], bool]"


class TelemetryProducers:
    """The open Telemetry streams of v5 producers and the topics each publishes; a
    ``CheckBackChannel`` of the service (module docstring)."""

    def __init__(self) -> None:
        self._streams: dict[int, tuple[frozenset[str], _Outbox, _MayPublish | None]] = {}
        self._ids = itertools.count()

    def open(self, outbox: _Outbox, may_publish: _MayPublish | None = None) -> int:
        """A new stream, whose commands to the client go into ``outbox``; its key.
        ``may_publish`` (the ACL is on): whether the stream's account may publish a topic; a
        check-back goes only to a stream that claims the topic and may publish it."""
        key = next(self._ids)
        self._streams[key] = (frozenset(), outbox, may_publish)
        return key

    def publishes(self, key: int, topics: Iterable[str]) -> None:
        """The producer on stream ``key`` publishes ``topics`` (its settings)."""
        entry = self._streams.get(key)
        if entry is not None:
            self._streams[key] = (frozenset(topics), entry[1], entry[2])

    def close(self, key: int) -> None:
        self._streams.pop(key, None)

    def __call__(self, check: TransactionCheck) -> bool:
        if check.producer_group not in ("", GRPC_PRODUCER_GROUP):
            return False  # a remoting producer's (its group's connections are asked)
        topic = check.message.topic
        for topics, outbox, may_publish in reversed(list(self._streams.values())):
            if topic in topics and (may_publish is None or may_publish(topic)):
                outbox.put_nowait(orphaned_command(check))
                return True
        return False
