"""ConnectionPool: one connection per address, shared first connects, re-made after a close."""

from __future__ import annotations

import asyncio

import pytest

from ledgermq.errors import ConnectError
from ledgermq.net import ConnectionPool, MemoryNetwork, split_address

from .conftest import HOST, arun, echo, request

pytestmark = pytest.mark.timeout(10)


def test_requests_share_one_connection_and_a_closed_one_is_remade() -> None:
    network = MemoryNetwork()
    accepted = []

    async def main() -> None:
        listener = await network.serve(HOST, 7100, echo)
        pool = ConnectionPool(network)
        address = f"{HOST}:7100"
        answers = await asyncio.gather(
            *(pool.request(address, request(body=b"%d" % i), 1.0) for i in range(5))
        )
        assert sorted(a.body for a in answers) == [b"%d" % i for i in range(5)]
        first = await pool.connection(address)
        accepted.append(first)
        assert await pool.connection(address) is first
        first.close()
        await first.wait_closed()
        again = await pool.request(address, request(body=b"again"), 1.0)
        assert again.body == b"again"
        assert await pool.connection(address) is not first
        await pool.close()
        with pytest.raises(ConnectError):
            await pool.request(address, request(), 1.0)
        listener.close()
        await listener.wait_closed()

    arun(main())


def test_nobody_listening_is_a_connect_error() -> None:
    async def main() -> None:
        pool = ConnectionPool(MemoryNetwork(), connect_timeout_s=0.2)
        with pytest.raises(ConnectError):
            await pool.request(f"{HOST}:7199", request(), 1.0)
        await pool.close()

    arun(main())


def test_split_address() -> None:
    assert split_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    for bad in ("nohost", ":1", "h:", "h:x"):
        with pytest.raises(ConnectError):
            split_address(bad)
