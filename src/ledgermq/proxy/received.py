"""A stored message handed out by POP or a pull, as a v5 ``Message`` (the inverse of
``messages.py``).

Pure. The mapping is the Java proxy's (``GrpcConverter.buildMessage``): ``TAGS`` -> ``tag``,
``KEYS`` -> ``keys`` (split on spaces), ``UNIQ_KEY`` -> ``message_id`` (else the offset id),
``__SHARDINGKEY`` -> ``message_group`` (and type FIFO), ``TRACE_CONTEXT``, ``__BORNHOST`` (else
the record's born host), and the other properties, not system ones, as user properties. POP adds
``receipt_handle``, ``delivery_attempt`` and ``invisible_duration``; a pull hands the message
out as stored (``stored_message``). The body is handed out
inflated (IDENTITY) with its CRC32 as 8 upper-case hex digits, the digest the official clients
check (spec protocol-remoting-and-grpc.md section 3.3).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from ledgermq.proxy.messages import (
    PROPERTY_BORN_HOST,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TRACE_CONTEXT,
    RESERVED_PROPERTIES,
)
from ledgermq.proxy.protocol import definition_pb2
from ledgermq.wire.message import MessageProperty

if TYPE_CHECKING:
    from ledgermq.messaging import Delivery
    from ledgermq.wire.message import MessageExt

__all__ = ["received_message", "stored_message"]


def received_message(delivery: Delivery) -> definition_pb2.Message:
    """The v5 message a receive answers for ``delivery``."""
    message = stored_message(delivery.record)
    system = message.system_properties
    system.receipt_handle = delivery.receipt_handle
    system.delivery_attempt = delivery.attempt
    system.invisible_duration.FromMilliseconds(delivery.invisible_ms)
    return message


def stored_message(stored: MessageExt) -> definition_pb2.Message:
    """The v5 message for ``stored`` as it is in its queue (a pull's answer)."""
    props = stored.properties
    message = definition_pb2.Message(body=stored.body)
    message.topic.name = stored.topic
    for key, value in props.items():
        if key not in RESERVED_PROPERTIES:
            message.user_properties[key] = value
    system = message.system_properties
    tag = props.get(MessageProperty.TAGS)
    if tag:
        system.tag = tag
    system.keys.extend(props.get(MessageProperty.KEYS, "").split())
    system.message_id = stored.msg_id
    system.body_digest.type = definition_pb2.CRC32
    system.body_digest.checksum = f"{zlib.crc32(stored.body):08X}"
    system.body_encoding = definition_pb2.IDENTITY
    group = props.get(PROPERTY_SHARDING_KEY)
    system.message_type = definition_pb2.FIFO if group else definition_pb2.NORMAL
    if group:
        system.message_group = group
    due = props.get(MessageProperty.TIMER_DELIVER_MS) or props.get(MessageProperty.TIMER_OUT_MS)
    if due and due.isdigit():  # a timer message: when it was due (broker.service.timers)
        system.message_type = definition_pb2.DELAY
        system.delivery_timestamp.FromMilliseconds(int(due))
    trace = props.get(PROPERTY_TRACE_CONTEXT)
    if trace:
        system.trace_context = trace
    system.born_timestamp.FromMilliseconds(stored.born_timestamp)
    system.born_host = props.get(PROPERTY_BORN_HOST) or stored.born_host.rpartition(":")[0]
    system.store_timestamp.FromMilliseconds(stored.store_timestamp)
    system.store_host = stored.store_host
    system.queue_id = stored.queue_id
    system.queue_offset = stored.queue_offset
    return message
