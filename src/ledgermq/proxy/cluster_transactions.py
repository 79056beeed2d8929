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
  Telemetry stream of a producer whose settings publish the topic (``ClusterProducers``; with
  the ACL on, only one whose stream was signed by an account with PUB on the topic), and that
  producer's checker answers with an EndTransaction.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, TypeAlias

from ledgermq.errors import MessageFormatError
from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.received import stored_message
from ledgermq.wire.message import decode_records

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable

    from ledgermq.wire import RemotingCommand

__all__ = ["ClusterProducers", "orphaned_command", "transaction_id"]

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


_Outbox: TypeAlias = "asyncio.Queue[service_pb2.TelemetryCommand | None]"
"""Commands to one client's Telemetry stream (None: the stream ends)."""
_MayPublish: TypeAlias = "Callable[[str], bool]"


class ClusterProducers:
    """The open Telemetry streams of v5 producers through this proxy and the topics each
    publishes."""

    def __init__(self) -> None:
        self._streams: dict[int, tuple[frozenset[str], _Outbox, _MayPublish | None]] = {}
        self._ids = itertools.count()

    def open(self, outbox: _Outbox, may_publish: _MayPublish | None = None) -> int:
        """A new stream; ``may_publish`` (the ACL is on): whether its account may publish a
        topic: a check-back goes only to a stream that claims the topic and may publish it."""
        key = next(self._ids)
        self._streams[key] = (frozenset(), outbox, may_publish)
        return key

    def publishes(self, key: int, topics: Iterable[str]) -> None:
        entry = self._streams.get(key)
        if entry is not None:
            self._streams[key] = (frozenset(topics), entry[1], entry[2])

    def close(self, key: int) -> None:
        self._streams.pop(key, None)

    def relay(self, topic: str, command: service_pb2.TelemetryCommand) -> bool:
        """Hand ``command`` to the latest producer publishing ``topic``; False if none."""
        for topics, outbox, may_publish in reversed(list(self._streams.values())):
            if topic in topics and (may_publish is None or may_publish(topic)):
                outbox.put_nowait(command)
                return True
        return False
