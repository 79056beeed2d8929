"""The options both gRPC doors (a replica's and the stand-alone proxy's) give ``grpc.aio.server``.

gRPC refuses, before any servicer runs, a received message over its
``grpc.max_receive_message_length``, 4 MiB by default: exactly RocketMQ's default
``maxMessageSize``, so a SendMessage carrying a body of that size (plus its properties) was
answered RESOURCE_EXHAUSTED by the transport instead of being stored. The Java proxy raises the
limit to ``grpcMaxInboundMessageSize`` (130 MiB), and so did we, until outside testing showed what
that lets anyone do (issue 25 items 6 and 8): make a door read and parse 130 MiB requests on the
loop that runs the replica's Raft. The limit is now twice ``maxMessageSize`` plus 1 MiB
(``max_request_bytes``): room for the largest message and its properties, so that a body just
over ``maxMessageSize`` still reaches our own check and is answered MESSAGE_BODY_TOO_LARGE with
the limit named; several messages in one SendMessage are one batch, which RocketMQ also bounds by
``maxMessageSize`` as a whole.

A connection may carry at most ``MAX_CONCURRENT_STREAMS`` calls at once (HTTP/2's
``SETTINGS_MAX_CONCURRENT_STREAMS``; grpcio sets no limit by default): each call in progress may
hold a request of up to that receive limit, so without it one connection could make a door hold
any number of them. A client's further calls wait for a stream to end (the gRPC clients queue
them), they are not refused. The official clients use a few streams per endpoint (a Telemetry
stream, and one long-polling receive per consumer and queue at most).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_CONCURRENT_STREAMS", "max_request_bytes", "server_options"]

_HEADROOM: Final = 1024 * 1024
"""Room for a message's properties and the request around the largest body we take."""
MAX_CONCURRENT_STREAMS: Final = 128
"""Calls in progress on one connection (nginx's default for HTTP/2)."""


def max_request_bytes(max_message_size: int) -> int:
    """The largest request a door reads (module docstring)."""
    return 2 * max_message_size + _HEADROOM


def server_options(max_message_size: int) -> list[tuple[str, int]]:
    """Options for ``grpc.aio.server``: no port sharing (a second process must fail to bind,
    not split the traffic), a receive limit our own size check always comes before, and a
    bound on the calls one connection carries at once."""
    return [
        ("grpc.so_reuseport", 0),
        ("grpc.max_receive_message_length", max_request_bytes(max_message_size)),
        ("grpc.max_concurrent_streams", MAX_CONCURRENT_STREAMS),
        # a stream's window stays at 64 KiB until its request is asked for: grpcio's window
        # growth (BDP probing) let waiting calls' requests pile up in the door (issue 25 item 8)
        ("grpc.http2.bdp_probe", 0),
        ("grpc.http2.lookahead_bytes", 64 * 1024),
    ]
