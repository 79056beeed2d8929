"""Clients with credentials sign every request as RocketMQ's AclClientRPCHook does."""

from __future__ import annotations

import asyncio

import pytest

from ledgermq.client import Credentials, Producer
from ledgermq.errors import ConfigError, LedgerMQError
from ledgermq.security.acl import signature_matches
from ledgermq.wire import RemotingCommand
from ledgermq.wire.frame import FrameDecoder, encode_frame


async def _capture_one_request(credentials: Credentials | None) -> RemotingCommand:
    """Start a producer against a fake NameServer that records the first request and hangs up."""
    seen: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while not seen.done():
            data = await reader.read(65536)
            if not data:
                break
            for command in decoder.feed(data):
                if not seen.done():
                    seen.set_result(command)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    producer = Producer("P", f"127.0.0.1:{port}", credentials=credentials, send_timeout_s=0.5)
    await producer.start()
    try:
        with pytest.raises(LedgerMQError):  # the fake NameServer answers nothing
            await producer.send("T", b"body")
        return await asyncio.wait_for(seen, 5)
    finally:
        await producer.shutdown()
        server.close()
        await server.wait_closed()


def test_requests_are_signed() -> None:
    credentials = Credentials("RocketMQ", "12345678")
    command = asyncio.run(_capture_one_request(credentials))
    assert command.ext_fields["AccessKey"] == "RocketMQ"
    assert signature_matches(command.ext_fields, command.body, "12345678")
    assert not signature_matches(command.ext_fields, command.body, "12345679")
    assert b"12345678" not in encode_frame(command)
    assert "12345678" not in repr(credentials)


def test_without_credentials_nothing_is_added() -> None:
    command = asyncio.run(_capture_one_request(None))
    assert "AccessKey" not in command.ext_fields
    assert "Signature" not in command.ext_fields


def test_credentials_need_both_halves() -> None:
    with pytest.raises(ConfigError):
        Credentials("RocketMQ", "")
