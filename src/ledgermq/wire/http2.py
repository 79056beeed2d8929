"""A gRPC client at the remoting port: recognise its HTTP/2 preface, so the log can say so.

RocketMQ 5 SDKs speak gRPC, HTTP/2 with prior knowledge (h2c), and their first bytes on a new
connection are the client connection preface of RFC 9113 section 3.4,
``PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n`` (spec protocol-remoting-and-grpc.md
section 1.2). A client pointed at a RocketMQ remoting port by mistake (10911 or 9876 instead of
the gRPC port) used to leave "frame of 1347569952 bytes exceeds the limit" in our log: ``b"PRI "``
read as a length.

Cost on the hot path: none. The check runs only where the frame decoder is already refusing a
frame for its length, and ``FrameDecoder`` refuses limits so large that the preface's length
(``PREFACE_FRAME_LENGTH``) could pass. It needs no per-connection state either: at a frame
boundary of a healthy remoting stream these bytes cannot occur, so wherever they appear they are
a preface, and in practice they come first.

What the client gets is a plain close, deliberately not an HTTP/2 answer. A SETTINGS frame and a
GOAWAY carrying "gRPC is on port N" looked friendlier, but grpcio then counts the connection as
established, skips its reconnect back-off and retries the call at once: tried here, one client
opened 777 connections in 6 s (one warning each) and its call ended in DEADLINE_EXCEEDED with
the text nowhere in the error. After a plain close the call fails at once with UNAVAILABLE
("Socket closed") and the channel backs off (1 s, growing), so the operator's one log line per
attempt is the message.
"""

from __future__ import annotations

from typing import Final

__all__ = ["HTTP2_CLIENT_PREFACE", "PREFACE_FRAME_LENGTH", "is_http2_preface_start"]

HTTP2_CLIENT_PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""RFC 9113 section 3.4: what an HTTP/2 client sends first on a prior-knowledge connection."""
PREFACE_FRAME_LENGTH: Final = int.from_bytes(HTTP2_CLIENT_PREFACE[:4], "big")
"""1347569952: the preface's first four bytes read as a remoting frame length."""


def is_http2_preface_start(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` (4 bytes or more) agrees with the HTTP/2 client preface as far as it goes.

    The first four bytes alone decide in practice (the decoder refuses the frame when it sees
    them, often before the rest has arrived); the rest, when it is there, must match too.
    """
    n = min(len(data), len(HTTP2_CLIENT_PREFACE))
    return n >= 4 and bytes(data[:n]) == HTTP2_CLIENT_PREFACE[:n]
