"""The options both gRPC doors (a replica's and the stand-alone proxy's) give ``grpc.aio.server``.

gRPC refuses, before any servicer runs, a received message over its
``grpc.max_receive_message_length``, 4 MiB by default: exactly RocketMQ's default
``maxMessageSize``, so a SendMessage carrying a body of that size (plus its properties) was
answered RESOURCE_EXHAUSTED by the transport instead of being stored, and a broker configured
for larger messages could not take them over gRPC at all. The Java proxy raises the limit to
``grpcMaxInboundMessageSize`` (130 MiB: a SendMessage may carry several messages) and lets its
own checks answer MESSAGE_BODY_TOO_LARGE with the limit named; so do we, and the limit grows with
``maxMessageSize`` when that is set higher.

A connection may carry at most ``MAX_CONCURRENT_STREAMS`` calls at once (HTTP/2's
``SETTINGS_MAX_CONCURRENT_STREAMS``; grpcio sets no limit by default): each call in progress may
hold a request of up to that receive limit, so without it one connection could make a door hold
any number of them. A client's further calls wait for a stream to end (the gRPC clients queue
them), they are not refused. The official clients use a few streams per endpoint (a Telemetry
stream, and one long-polling receive per consumer and queue at most).
"""

from __future__ import annotations

from typing import Final

__all__ = ["GRPC_MAX_INBOUND_MESSAGE_SIZE", "MAX_CONCURRENT_STREAMS", "server_options"]

GRPC_MAX_INBOUND_MESSAGE_SIZE: Final = 130 * 1024 * 1024
"""The Java proxy's default ``grpcMaxInboundMessageSize``."""
_HEADROOM: Final = 1024 * 1024
"""Room for a message's properties and the request around the largest body we take."""
MAX_CONCURRENT_STREAMS: Final = 128
"""Calls in progress on one connection (nginx's default for HTTP/2)."""


def server_options(max_message_size: int) -> list[tuple[str, int]]:
    """Options for ``grpc.aio.server``: no port sharing (a second process must fail to bind,
    not split the traffic), a receive limit our own size check always comes before, and a
    bound on the calls one connection carries at once."""
    inbound = max(GRPC_MAX_INBOUND_MESSAGE_SIZE, max_message_size + _HEADROOM)
    return [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", inbound),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
    ]
