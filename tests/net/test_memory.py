"""What MemoryNetwork adds to the shared behaviour: write counts, back-pressure, broken links."""

from __future__ import annotations

import asyncio

import pytest

from ledgermq.errors import ConnectError, ConnectionClosedError, NetworkError
from ledgermq.net import Connection, MemoryNetwork
from ledgermq.wire import RemotingCommand

from .conftest import HOST, arun, echo, eventually, ignore, request

pytestmark = pytest.mark.timeout(10)


def test_a_burst_of_sends_is_one_write_on_the_wire() -> None:
    network = MemoryNetwork()
    got: list[RemotingCommand] = []

    async def main() -> None:
        listener = await network.serve(HOST, 0, lambda c, cmd: got.append(cmd))
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        before = network.writes
        for i in range(200):
            conn.send_request_nowait(request(body=str(i).encode()))
        await eventually(lambda: len(got) == 200)
        assert network.writes - before == 1
        assert [c.body for c in got] == [str(i).encode() for i in range(200)]
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_back_pressure_pauses_until_the_peer_has_the_bytes() -> None:
    network = MemoryNetwork()

    async def main() -> None:
        listener = await network.serve(HOST, 0, ignore)
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        conn.send(request(body=b"x" * 200_000))
        assert conn.write_buffer_size() > 200_000
        await conn.drain()
        assert conn.write_buffer_size() == 0
        conn.close()
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_unknown_address_is_refused_and_ports_are_allocated() -> None:
    network = MemoryNetwork()

    async def main() -> None:
        with pytest.raises(ConnectError) as info:
            await network.connect(HOST, 9, ignore, timeout_s=1)
        assert str(info.value) == f"cannot connect to {HOST}:9: connection refused"
        first = await network.serve(HOST, 0, ignore)
        second = await network.serve(HOST, 0, ignore)
        assert first.port != second.port
        with pytest.raises(NetworkError, match="address already in use"):
            await network.serve(HOST, first.port, ignore)
        wildcard = await network.serve("0.0.0.0", 7000, echo)
        conn = await network.connect(HOST, 7000, ignore, timeout_s=1)
        assert (await conn.request(request(body=b"w"), timeout_s=1)).body == b"w"
        for listener in (first, second, wildcard):
            listener.close()
            await listener.wait_closed()
        with pytest.raises(ConnectError):
            await network.connect(HOST, first.port, ignore, timeout_s=1)

    arun(main())


def test_break_link_resets_connections_and_refuses_until_healed() -> None:
    network = MemoryNetwork()
    server_conns: list[Connection] = []

    def server(conn: Connection, command: RemotingCommand) -> None:
        server_conns.append(conn)

    async def main() -> None:
        listener = await network.serve(HOST, 0, server)
        other = await network.serve(HOST, 0, echo)
        address = f"{HOST}:{listener.port}"
        conn = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        bystander = await network.connect(HOST, other.port, ignore, timeout_s=1)
        pending = asyncio.ensure_future(conn.request(request(), timeout_s=2))
        await eventually(lambda: len(server_conns) == 1)
        network.break_link(address)
        with pytest.raises(ConnectionClosedError, match="connection reset by peer"):
            await pending
        await server_conns[0].wait_closed()
        with pytest.raises(ConnectError, match="connection refused"):
            await network.connect(HOST, listener.port, ignore, timeout_s=1)
        assert (await bystander.request(request(body=b"b"), timeout_s=1)).body == b"b"
        network.heal(address)
        again = await network.connect(HOST, listener.port, ignore, timeout_s=1)
        assert not again.closed
        for lst in (listener, other):
            lst.close()
            await lst.wait_closed()

    arun(main())
