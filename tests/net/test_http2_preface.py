"""A gRPC client at the remoting port, over real sockets: one log line, a GOAWAY, the port named.

Issue 16: RocketMQ 5 SDKs dialling a remoting port got the connection closed with "frame of
1347569952 bytes exceeds the limit" in our log and a bare reset on their side.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import grpc
import pytest

from ledgermq.net import TcpNetwork
from ledgermq.proxy.protocol import service_pb2, service_pb2_grpc
from ledgermq.wire.http2 import HTTP2_CLIENT_PREFACE

from .conftest import HOST, arun, echo, ignore, request

pytestmark = pytest.mark.timeout(20)

GRPC_OPENING = HTTP2_CLIENT_PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def read_to_eof(port: int, data: bytes) -> bytes:
    """Connect a plain socket, send ``data``, return everything until the server closes."""
    with socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("grpc_port", "named"),
    [(8081, "gRPC is served on port 8081"), (None, "this process serves no gRPC")],
)
def test_raw_preface_gets_one_log_line_and_a_close(
    caplog: pytest.LogCaptureFixture, grpc_port: int | None, named: str
) -> None:
    async def main() -> bytes:
        listener = await TcpNetwork().serve(HOST, 0, echo, grpc_port=grpc_port)
        try:
            answer = await asyncio.to_thread(read_to_eof, listener.port, GRPC_OPENING)
            # the listener still serves remoting clients
            good = await TcpNetwork().connect(HOST, listener.port, ignore, timeout_s=1)
            assert (await good.request(request(body=b"ok"), timeout_s=1)).body == b"ok"
            good.close()
        finally:
            listener.close()
            await listener.wait_closed()
        return answer

    with caplog.at_level(logging.DEBUG, logger="ledgermq"):
        answer = arun(main())
    assert answer == b""  # a plain close, no HTTP/2 answer (wire/http2.py says why)
    (line,) = warnings_of(caplog)
    assert named in line
    assert "gRPC (HTTP/2) client dialled this RocketMQ remoting port" in line
    assert f"{HOST}:" in line
    assert "1347569952" not in line


def test_a_real_grpc_client_fails_fast_without_a_reconnect_storm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """grpcio's own client, two calls: both fail at once with UNAVAILABLE, and the channel backs
    off instead of reconnecting (an HTTP/2 GOAWAY made it open hundreds of connections)."""

    def call_twice(port: int) -> list[grpc.RpcError]:
        errors = []
        with grpc.insecure_channel(f"{HOST}:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            for _ in range(2):
                with pytest.raises(grpc.RpcError) as caught:
                    stub.QueryRoute(service_pb2.QueryRouteRequest(), timeout=5)
                errors.append(caught.value)
        return errors

    async def main() -> list[grpc.RpcError]:
        listener = await TcpNetwork().serve(HOST, 0, echo, grpc_port=8081)
        try:
            return await asyncio.to_thread(call_twice, listener.port)
        finally:
            listener.close()
            await listener.wait_closed()

    with caplog.at_level(logging.WARNING, logger="ledgermq"):
        errors = arun(main(), timeout_s=15)
    assert [e.code() for e in errors] == [grpc.StatusCode.UNAVAILABLE] * 2
    lines = warnings_of(caplog)
    assert 1 <= len(lines) <= 2, lines
    assert all("gRPC is served on port 8081" in line for line in lines)
