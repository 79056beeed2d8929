"""PeerLink: dropping while down, reconnecting with capped, jittered back-off, waiting requests."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from ledgermq.errors import ConnectError, ConnectionClosedError
from ledgermq.net import Connection, Handler, MemoryNetwork, Network, PeerLink
from ledgermq.wire import RemotingCommand

from .conftest import HOST, arun, echo, eventually, ignore, make_network, request

pytestmark = pytest.mark.timeout(10)

PORT = 7000


def fast_link(network: Network, port: int, handler: Handler = ignore) -> PeerLink:
    """A link with short back-off, so tests see several attempts in a few milliseconds."""
    return PeerLink(
        network, HOST, port, handler, min_backoff_s=0.005, max_backoff_s=0.02, rng=random.Random(1)
    )


def test_send_while_down_is_dropped_and_starts_connecting() -> None:
    network = MemoryNetwork()
    got: list[RemotingCommand] = []
    answers: list[RemotingCommand] = []

    def server(conn: Connection, command: RemotingCommand) -> None:
        got.append(command)
        echo(conn, command)

    async def main() -> None:
        link = fast_link(network, PORT, lambda c, cmd: answers.append(cmd))
        assert not link.connected
        assert link.send(request(body=b"lost")) is False
        assert link.send_raw(request(body=b"lost too")) is False
        await asyncio.sleep(0.03)  # a few failed attempts
        listener = await network.serve(HOST, PORT, server)
        await eventually(lambda: link.connected)  # nobody had to send again
        assert link.send(request(body=b"one")) is True
        assert link.send(request(body=b"two")) is True
        assert link.send_raw(RemotingCommand(code=1, opaque=99, body=b"raw")) is True
        await eventually(lambda: len(answers) == 3)
        assert [c.body for c in got] == [b"one", b"two", b"raw"]
        assert got[0].opaque != got[1].opaque
        assert [a.opaque for a in answers][2] == 99
        link.close()
        await link.wait_closed()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_reconnects_after_the_server_comes_back_on_the_same_port(network_kind: str) -> None:
    network = make_network(network_kind)

    async def main() -> None:
        listener = await network.serve(HOST, 0, echo)
        port = listener.port
        link = fast_link(network, port)
        answer = await link.request(request(body=b"first"), timeout_s=1)
        assert answer.body == b"first"
        listener.close()
        await listener.wait_closed()
        await eventually(lambda: not link.connected)
        assert link.send(request()) is False
        await asyncio.sleep(0.05)  # attempts fail while nobody listens
        listener = await network.serve(HOST, port, echo)
        answer = await link.request(request(body=b"again"), timeout_s=2)
        assert answer.body == b"again"
        link.close()
        await link.wait_closed()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_backoff_doubles_with_jitter_is_capped_and_resets_after_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    network = MemoryNetwork()
    delays: list[float] = []
    gate = asyncio.Event()
    min_s, max_s = 0.05, 2.0

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) >= 12:
            await gate.wait()
        await asyncio.sleep(0)

    async def main() -> None:
        nonlocal gate
        gate = asyncio.Event()
        link = PeerLink(
            network, HOST, PORT, ignore, min_backoff_s=min_s, max_backoff_s=max_s,
            rng=random.Random(42), sleep=fake_sleep,
        )  # fmt: skip
        link.send(request())
        await eventually(lambda: len(delays) == 12)
        for failures, delay in enumerate(delays):
            ceiling = min(max_s, min_s * 2**failures)
            assert ceiling / 2 <= delay <= ceiling, (failures, delay)
        assert max(delays) <= max_s
        assert delays[-1] >= max_s / 2  # capped, still jittered
        assert len(set(delays)) == len(delays)  # jitter: no two waits alike

        listener = await network.serve(HOST, PORT, echo)
        gate.set()
        await eventually(lambda: link.connected)
        delays.clear()
        gate = asyncio.Event()
        network.break_link(f"{HOST}:{PORT}")  # the peer drops us and refuses for a while
        await eventually(lambda: len(delays) >= 3)
        # After a success the back-off starts over: one short pause, then doubling again.
        for failures, delay in enumerate(delays[:3]):
            ceiling = min(max_s, min_s * 2**failures)
            assert ceiling / 2 <= delay <= ceiling
        gate.set()
        link.close()
        await link.wait_closed()
        listener.close()
        await listener.wait_closed()

    with caplog.at_level(logging.DEBUG, logger="ledgermq.net"):
        arun(main())
    infos = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert infos == [
        f"cannot connect to {HOST}:{PORT}: connection refused; retrying with back-off",
        f"connected to {HOST}:{PORT}",
        f"disconnected from {HOST}:{PORT}",
        f"cannot connect to {HOST}:{PORT}: connection refused; retrying with back-off",
    ]


def test_request_waits_for_the_connection() -> None:
    network = MemoryNetwork()

    async def main() -> None:
        link = fast_link(network, PORT)
        task = asyncio.ensure_future(link.request(request(body=b"patient"), timeout_s=2))
        await asyncio.sleep(0.05)
        assert not task.done()
        listener = await network.serve(HOST, PORT, echo)
        assert (await task).body == b"patient"
        link.close()
        await link.wait_closed()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_request_gives_up_with_connect_error_and_close_fails_waiters() -> None:
    network = MemoryNetwork()

    async def main() -> None:
        link = fast_link(network, PORT)
        with pytest.raises(ConnectError) as info:
            await link.request(request(), timeout_s=0.05)
        message = str(info.value)
        assert message.startswith(f"no connection to {HOST}:{PORT} within 0.05 s: cannot connect")
        assert "\n" not in message
        waiter = asyncio.ensure_future(link.request(request(), timeout_s=2))
        await asyncio.sleep(0.01)
        link.close()
        with pytest.raises(ConnectionClosedError, match=r"link .* is closed"):
            await waiter
        assert link.send(request()) is False
        await link.wait_closed()

    arun(main())


def test_close_while_connected_closes_the_connection() -> None:
    network = MemoryNetwork()
    server_side: list[Connection] = []

    async def main() -> None:
        listener = await network.serve(HOST, PORT, lambda c, cmd: server_side.append(c))
        link = fast_link(network, PORT)
        link.send(request())
        await eventually(lambda: link.connected)
        link.send(request())
        await eventually(lambda: len(server_side) == 1)
        link.close()
        await link.wait_closed()
        await server_side[0].wait_closed()
        assert not link.connected
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_backoff_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="min_backoff_s"):
        PeerLink(MemoryNetwork(), HOST, PORT, ignore, min_backoff_s=1, max_backoff_s=0.5)
