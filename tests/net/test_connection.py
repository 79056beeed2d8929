"""Connection behaviour shared by both networks: matching, timeouts, closing, bad peers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct

import pytest

from ledgermq.errors import ConnectionClosedError, RequestTimeoutError
from ledgermq.net import Connection, Network
from ledgermq.wire import FrameDecoder, MQResponseCode, RemotingCommand

from .conftest import HOST, OK, arun, echo, eventually, ignore, make_network, request

pytestmark = pytest.mark.timeout(10)


def test_concurrent_requests_answered_out_of_order_reach_their_callers(network: Network) -> None:
    held: list[tuple[Connection, RemotingCommand]] = []
    count = 50

    def hold_then_answer_shuffled(conn: Connection, command: RemotingCommand) -> None:
        held.append((conn, command))
        if len(held) == count:
            random.Random(7).shuffle(held)
            for c, cmd in held:
                c.send(cmd.response(OK, body=cmd.body))

    async def main() -> None:
        listener = await network.serve(HOST, 0, hold_then_answer_shuffled)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        answers = await asyncio.gather(
            *(conn.request(request(body=str(i).encode()), timeout_s=2) for i in range(count))
        )
        assert [a.body for a in answers] == [str(i).encode() for i in range(count)]
        assert all(a.is_response and a.code == OK for a in answers)
        assert len({cmd.opaque for _, cmd in held}) == count
        conn.close()
        listener.close()
        await conn.wait_closed()
        await listener.wait_closed()

    arun(main())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_tcp_request_response_on_each_event_loop(loop: str) -> None:
    async def main() -> None:
        network = make_network("tcp")
        listener = await network.serve(HOST, 0, echo)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        assert conn.address == f"{HOST}:{listener.port}"
        answer = await conn.request(request(body=b"x" * 100_000), timeout_s=2)
        assert answer.body == b"x" * 100_000
        conn.close()
        listener.close()
        await conn.wait_closed()
        await listener.wait_closed()

    if loop == "asyncio":
        arun(main())
    else:
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(asyncio.wait_for(main(), 5))


def test_responses_to_nowait_requests_and_oneway_go_to_the_handler(network: Network) -> None:
    received: list[RemotingCommand] = []
    server_got: list[RemotingCommand] = []

    def server(conn: Connection, command: RemotingCommand) -> None:
        server_got.append(command)
        echo(conn, command)

    async def main() -> None:
        listener = await network.serve(HOST, 0, server)
        conn = await network.connect(
            HOST, listener.port, lambda c, cmd: received.append(cmd), timeout_s=1
        )
        first = conn.send_request_nowait(request(body=b"a"))
        second = conn.send_request_nowait(request(body=b"b"))
        conn.send_oneway(request(body=b"c"))
        await eventually(lambda: len(received) == 2 and len(server_got) == 3)
        assert second == first + 1
        assert [(r.opaque, r.body) for r in received] == [(first, b"a"), (second, b"b")]
        assert server_got[2].is_oneway
        conn.close()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_timeout_then_late_answer_is_dropped_and_connection_still_works(
    network: Network, caplog: pytest.LogCaptureFixture
) -> None:
    held: list[tuple[Connection, RemotingCommand]] = []
    client_handler_got: list[RemotingCommand] = []

    def server(conn: Connection, command: RemotingCommand) -> None:
        if command.code == 1:
            held.append((conn, command))
        else:
            echo(conn, command)

    async def main() -> None:
        listener = await network.serve(HOST, 0, server)
        conn = await network.connect(
            HOST, listener.port, lambda c, cmd: client_handler_got.append(cmd), timeout_s=1
        )
        with pytest.raises(RequestTimeoutError) as info:
            await conn.request(request(code=1), timeout_s=0.05)
        assert info.value.address == conn.address
        assert "within 0.05 s" in str(info.value)
        (server_conn, late), *_ = held
        server_conn.send(late.response(OK))
        answer = await conn.request(request(code=2, body=b"after"), timeout_s=1)
        assert answer.body == b"after"
        assert client_handler_got == []  # the late answer went nowhere
        assert not conn.closed
        conn.close()
        listener.close()
        await listener.wait_closed()

    with caplog.at_level(logging.DEBUG, logger="ledgermq.net"):
        arun(main())
    assert any("late answer" in r.getMessage() for r in caplog.records)


def test_peer_closing_fails_pending_requests(network: Network) -> None:
    server_conns: list[Connection] = []

    def server(conn: Connection, command: RemotingCommand) -> None:
        server_conns.append(conn)

    async def main() -> None:
        listener = await network.serve(HOST, 0, server)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        closed: list[Connection] = []
        conn.add_close_callback(closed.append)
        pending = [asyncio.ensure_future(conn.request(request(), timeout_s=3)) for _ in range(3)]
        await eventually(lambda: len(server_conns) == 3)
        server_conns[0].close()
        for task in pending:
            with pytest.raises(ConnectionClosedError, match="closed by the peer"):
                await task
        assert conn.closed
        assert closed == [conn]
        with pytest.raises(ConnectionClosedError):
            conn.send(request())
        listener.close()
        await listener.wait_closed()
        await conn.wait_closed()

    arun(main())


def test_closing_locally_fails_pending_requests(network: Network) -> None:
    async def main() -> None:
        listener = await network.serve(HOST, 0, ignore)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        task = asyncio.ensure_future(conn.request(request(), timeout_s=3))
        await asyncio.sleep(0.01)
        conn.close()
        with pytest.raises(ConnectionClosedError, match="closed locally"):
            await task
        await conn.wait_closed()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_listener_close_closes_accepted_connections(network: Network) -> None:
    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        conns = [await network.connect(HOST, listener.port, ignore, timeout_s=1) for _ in range(3)]
        for conn in conns:
            await conn.request(request(), timeout_s=1)
        listener.close()
        await listener.wait_closed()
        for conn in conns:
            await asyncio.wait_for(conn.wait_closed(), 1)
            assert conn.closed

    arun(main())


def test_oversized_frame_closes_only_that_connection(network_kind: str) -> None:
    """It is answered first (MESSAGE_ILLEGAL, the reason), then that connection closes."""
    network = make_network(network_kind, max_frame_bytes=1024)

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        bad = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        good = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        answer = await bad.request(request(body=b"x" * 2000), timeout_s=2)
        assert answer.code == MQResponseCode.MESSAGE_ILLEGAL
        assert answer.remark is not None
        assert "exceeds the limit of 1024 bytes" in answer.remark
        await asyncio.wait_for(bad.wait_closed(), 3)
        with pytest.raises(ConnectionClosedError):
            await bad.request(request(body=b"again"), timeout_s=1)
        assert (await good.request(request(body=b"fine"), timeout_s=1)).body == b"fine"
        good.close()
        listener.close()
        await listener.wait_closed()
        await bad.wait_closed()

    arun(main())


def test_tcp_garbage_gets_the_connection_closed_and_others_are_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    network = make_network("tcp")

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        reader, writer = await asyncio.open_connection(HOST, listener.port)
        writer.write(b"\x00\x00\x00\x0c\x07\x00\x00\x04garbage!")  # serialize type 7
        # answered (the reason; opaque 0: it cannot be read), then EOF
        (answer,) = FrameDecoder().feed(await asyncio.wait_for(reader.read(), 4))
        assert (answer.code, answer.opaque) == (MQResponseCode.MESSAGE_ILLEGAL, 0)
        assert answer.remark is not None
        assert "unknown serialize type 7" in answer.remark
        writer.close()
        with contextlib.suppress(ConnectionResetError):
            await writer.wait_closed()
        good = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        assert (await good.request(request(body=b"ok"), timeout_s=1)).body == b"ok"
        good.close()
        listener.close()
        await listener.wait_closed()

    with caplog.at_level(logging.WARNING, logger="ledgermq.net"):
        arun(main())
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "unknown serialize type 7" in warning.getMessage()
    assert f"{HOST}:" in warning.getMessage()


def test_handler_exception_is_logged_and_the_connection_stays(
    network: Network, caplog: pytest.LogCaptureFixture
) -> None:
    def server(conn: Connection, command: RemotingCommand) -> None:
        if command.code == 13:
            raise RuntimeError("bug in a handler")
        echo(conn, command)

    async def main() -> None:
        listener = await network.serve(HOST, 0, server)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        conn.send_oneway(request(code=13))
        answer = await conn.request(request(code=2, body=b"still here"), timeout_s=1)
        assert answer.body == b"still here"
        conn.close()
        listener.close()
        await listener.wait_closed()

    with caplog.at_level(logging.ERROR, logger="ledgermq.net"):
        arun(main())
    (record,) = caplog.records
    assert "code 13" in record.getMessage()
    assert record.exc_info is not None


async def _answer_to(port: int, data: bytes) -> tuple[list[RemotingCommand], bytes]:
    """Send ``data`` on a raw TCP connection; the frames that came back before the server's
    close, and what followed them (b"" for a clean close)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(data)
        with contextlib.suppress(ConnectionError):  # refused early: the rest went unread
            await writer.drain()
        received = await asyncio.wait_for(reader.read(), 4)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    decoder = FrameDecoder()
    return decoder.feed(received), received[len(received) - decoder.buffered :]


def _json_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def test_a_header_over_64_kib_is_answered_then_closed_and_others_are_served() -> None:
    """Issue 25 item 6: a 16 MiB header of 700,000 extFields held the event loop for seconds.
    The frame is refused from its header word, answered with its opaque and the limit, and the
    connection closed; the port keeps serving."""
    network = make_network("tcp")
    fields = ",".join(f'"f{i:06d}":"xxxxxxxxxx"' for i in range(50_000))
    header = f'{{"code":10,"opaque":77,"extFields":{{{fields}}}}}'.encode()

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        answers, rest = await _answer_to(listener.port, _json_frame(header))
        assert [(a.code, a.opaque, a.is_response) for a in answers] == [
            (MQResponseCode.MESSAGE_ILLEGAL, 77, True)
        ]
        assert answers[0].remark == (
            f"frame refused: a header of {len(header)} bytes exceeds the limit of 65536 bytes"
            " (RocketMQ's clients send a few hundred)"
        )
        assert rest == b""
        good = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        assert (await good.request(request(body=b"ok"), timeout_s=1)).body == b"ok"
        good.close()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_a_header_nested_1000_deep_is_answered_before_the_close() -> None:
    """Issue 25 item 22: the connection used to close with no answer."""
    network = make_network("tcp")
    nested = "[" * 1000 + "]" * 1000
    header = f'{{"code":10,"opaque":41,"extFields":{{"a":{nested}}}}}'.encode()

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        answers, rest = await _answer_to(listener.port, _json_frame(header))
        assert [(a.code, a.opaque) for a in answers] == [(MQResponseCode.MESSAGE_ILLEGAL, 41)]
        assert answers[0].remark is not None
        assert answers[0].remark.startswith("frame refused: ")
        assert rest == b""
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_closing_the_listener_ends_the_wait_after_an_answered_refusal() -> None:
    """A refused frame's connection lingers (half-closed) to let the answer through; closing
    the listener closes it at once."""
    network = make_network("tcp")

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        reader, writer = await asyncio.open_connection(HOST, listener.port)
        writer.write(struct.pack(">ii", 2, 0))  # a frame length below the minimum
        prefix = await asyncio.wait_for(reader.readexactly(4), 2)
        body = await reader.readexactly(int.from_bytes(prefix, "big"))
        (answer,) = FrameDecoder().feed(prefix + body)
        assert answer.code == MQResponseCode.MESSAGE_ILLEGAL
        listener.close()
        await asyncio.wait_for(listener.wait_closed(), 1)  # not the 2 s linger
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    arun(main())
