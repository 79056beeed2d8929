"""Connection over a recording fake transport: coalescing, back-pressure, opaques, bad input."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from ledgermq.errors import ConnectionClosedError
from ledgermq.net import Connection
from ledgermq.net.connection import COMMANDS_PER_PASS
from ledgermq.wire import (
    SEPARATE_BODY_BYTES,
    FrameDecoder,
    MQResponseCode,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

from .conftest import arun, ignore, request

pytestmark = pytest.mark.timeout(10)


class RecordingTransport(asyncio.Transport):
    """Keeps every ``write``; buffer size and closing are set by the test."""

    def __init__(self) -> None:
        super().__init__({"peername": ("10.0.0.9", 40911)})
        self.writes: list[bytes] = []
        self.writelines_calls: list[list[bytes]] = []
        self.buffered = 0
        self.closing = False
        self.aborted = False
        self.eof_written = False
        self.reading = True

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        pieces = list(list_of_data)
        self.writelines_calls.append(pieces)
        self.writes.append(b"".join(pieces))

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def can_write_eof(self) -> bool:
        return True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write_eof(self) -> None:
        self.eof_written = True


def connect(handler: Any = ignore) -> tuple[Connection, RecordingTransport]:
    conn = Connection(handler)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def test_frames_queued_in_one_loop_pass_leave_in_one_write() -> None:
    async def main() -> None:
        conn, transport = connect()
        assert conn.address == "10.0.0.9:40911"
        commands = [request(body=bytes([i])) for i in range(100)]
        for command in commands:
            conn.send(command)
        assert transport.writes == []  # nothing is written synchronously
        assert conn.write_buffer_size() == sum(len(encode_frame(c)) for c in commands)
        await asyncio.sleep(0)
        assert transport.writes == [b"".join(encode_frame(c) for c in commands)]
        conn.send(commands[0])
        await asyncio.sleep(0)
        assert len(transport.writes) == 2  # the next pass is the next batch
        conn.close()

    arun(main())


def test_a_large_body_leaves_uncopied_in_the_same_write() -> None:
    """Frames with a large body go out through one ``writelines``, the body object itself among
    the pieces (uvloop writes them with one writev); small frames around it still ride along."""

    async def main() -> None:
        conn, transport = connect()
        body = b"b" * SEPARATE_BODY_BYTES
        commands = [request(body=b"small"), request(body=body), request(body=b"after")]
        for command in commands:
            conn.send(command)
        assert conn.write_buffer_size() == sum(len(encode_frame(c)) for c in commands)
        await asyncio.sleep(0)
        assert transport.writes == [b"".join(encode_frame(c) for c in commands)]
        (pieces,) = transport.writelines_calls
        assert any(piece is body for piece in pieces)
        assert conn.write_buffer_size() == 0
        # Many small frames that add up past the limit are not joined either.
        for _ in range(SEPARATE_BODY_BYTES // 1000 + 1):
            conn.send(request(body=b"s" * 1000))
        await asyncio.sleep(0)
        assert len(transport.writelines_calls) == 2
        conn.close()

    arun(main())


def test_close_sends_what_is_queued_first() -> None:
    async def main() -> None:
        conn, transport = connect()
        conn.send(request(body=b"last words"))
        conn.close()
        assert transport.closing
        assert FrameDecoder().feed(b"".join(transport.writes))[0].body == b"last words"
        conn.close()  # idempotent
        conn.connection_lost(None)
        await conn.wait_closed()

    arun(main())


def test_opaques_are_positive_int32_and_wrap() -> None:
    async def main() -> None:
        conn, transport = connect()
        conn._next_opaque = 2**31 - 1
        assert conn.send_request_nowait(request()) == 2**31 - 1
        assert conn.send_request_nowait(request()) == 1
        await asyncio.sleep(0)
        opaques = [c.opaque for c in FrameDecoder().feed(transport.writes[0])]
        assert opaques == [2**31 - 1, 1]
        conn.close()

    arun(main())


def test_drain_waits_for_resume_writing_and_fails_on_close() -> None:
    async def main() -> None:
        conn, transport = connect()
        conn.send(request(body=b"x" * 1000))
        await conn.drain()  # not paused: returns after writing
        assert len(transport.writes) == 1
        conn.pause_writing()
        transport.buffered = 5000
        assert conn.write_buffer_size() == 5000
        waiter = asyncio.ensure_future(conn.drain())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        conn.resume_writing()
        await asyncio.wait_for(waiter, 1)
        conn.pause_writing()
        waiter = asyncio.ensure_future(conn.drain())
        await asyncio.sleep(0)
        conn.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
        with pytest.raises(ConnectionClosedError, match="lost: connection reset by peer"):
            await waiter
        with pytest.raises(ConnectionClosedError):
            await conn.drain()

    arun(main())


def test_a_refused_frame_is_answered_logged_once_and_fails_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Answered (MESSAGE_ILLEGAL, the reason), half-closed, then closed after the linger; what
    the peer sends meanwhile is dropped."""
    got: list[RemotingCommand] = []

    async def main() -> None:
        conn, transport = connect(lambda c, cmd: got.append(cmd))
        pending = asyncio.ensure_future(conn.request(request(), timeout_s=2))
        await asyncio.sleep(0)
        transport.writes.clear()
        valid = encode_frame(request(code=5))
        conn.data_received(valid + b"\x7f\xff\xff\xff")  # a whole frame, then a 2 GiB length
        assert got == []  # the decoder drops the whole read that broke the stream
        *_, answer = FrameDecoder().feed(b"".join(transport.writes))  # after the request
        assert answer.is_response
        assert answer.code == MQResponseCode.MESSAGE_ILLEGAL
        assert answer.remark == (
            "frame refused: frame of 2147483647 bytes exceeds the limit of 16777216 bytes"
        )
        assert transport.eof_written
        assert not transport.closing
        assert not transport.aborted
        assert conn.closed
        with pytest.raises(ConnectionClosedError, match="refused frame"):
            await pending
        conn.data_received(valid)  # ignored after the error, never raises
        assert got == []
        conn.close()  # a listener closing: the linger ends now
        assert transport.closing

    with caplog.at_level(logging.WARNING, logger="ledgermq.net"):
        arun(main())
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "refusing a frame from 10.0.0.9:40911 and closing: frame of"
    )


def test_handler_closing_the_connection_stops_the_batch() -> None:
    got: list[int] = []

    def handler(conn: Connection, command: RemotingCommand) -> None:
        got.append(command.code)
        conn.close()

    async def main() -> None:
        conn, _ = connect(handler)
        conn.data_received(encode_frame(request(code=1)) + encode_frame(request(code=2)))
        assert got == [1]

    arun(main())


def test_close_callbacks_run_once_and_late_ones_run_soon() -> None:
    async def main() -> None:
        conn, _ = connect()
        calls: list[str] = []
        conn.add_close_callback(lambda c: calls.append("early"))

        def failing(c: Connection) -> None:
            raise RuntimeError("a failing callback does not stop the rest")

        conn.add_close_callback(failing)
        conn.add_close_callback(lambda c: calls.append("second"))
        conn.close()
        conn.connection_lost(None)
        conn.add_close_callback(lambda c: calls.append("late"))
        await asyncio.sleep(0)
        assert calls == ["early", "second", "late"]

    arun(main())


def test_a_read_of_many_requests_is_handled_over_several_loop_passes() -> None:
    """Issue 25 item 6: one 256 KiB read of 29-byte requests held a broker's loop (and its
    replica's Raft) for 200 ms. At most COMMANDS_PER_PASS commands are handled per pass of the
    loop, with reading paused until the backlog is done; order is kept."""
    got: list[int] = []

    async def main() -> None:
        conn, transport = connect(lambda c, cmd: got.append(cmd.opaque))
        data = b"".join(
            encode_frame(RemotingCommand(code=1, opaque=i, serialize_type=kind))
            for i in range(150)
            for kind in (SerializeType.JSON, SerializeType.ROCKETMQ)
        )
        conn.data_received(data[: len(data) // 2])
        assert len(got) == COMMANDS_PER_PASS
        assert not transport.reading
        conn.data_received(data[len(data) // 2 :])  # held for the backlog's pass, in order
        assert len(got) == COMMANDS_PER_PASS
        passes = 1
        while len(got) < 300:
            await asyncio.sleep(0)
            passes += 1
            assert len(got) <= passes * COMMANDS_PER_PASS
        assert got == [i for i in range(150) for _ in range(2)]
        await asyncio.sleep(0)
        assert transport.reading

    arun(main())
