"""Shared pieces of the transport tests: both networks, a bounded runner, an echo server."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from ledgermq.net import Connection, MemoryNetwork, Network, TcpNetwork
from ledgermq.wire import RemotingCommand

if TYPE_CHECKING:
    from collections.abc import Coroutine

T = TypeVar("T")

HOST = "127.0.0.1"
OK = 0


def arun(main: Coroutine[Any, Any, T], timeout_s: float = 5.0) -> T:
    """Run ``main`` on a fresh asyncio loop, bounded so a hang fails instead of stalling."""
    return asyncio.run(asyncio.wait_for(main, timeout_s))


def echo(conn: Connection, command: RemotingCommand) -> None:
    """Answer every request with its own body; ignore one-way commands and responses."""
    if not command.is_response and not command.is_oneway:
        conn.send(command.response(OK, body=command.body))


def ignore(conn: Connection, command: RemotingCommand) -> None:
    """A handler for sides that expect nothing."""


def request(code: int = 1, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, opaque=0, body=body)


async def eventually(predicate: Any, timeout_s: float = 2.0) -> None:
    """Poll ``predicate`` every few milliseconds until it is true.

    Polling is deliberate: the predicates read state of the code under test, which has no event
    to wait on, and the timeout bounds the wait.
    """
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.002)


def make_network(kind: str, max_frame_bytes: int | None = None) -> Network:
    if kind == "tcp":
        return TcpNetwork() if max_frame_bytes is None else TcpNetwork(max_frame_bytes)
    return MemoryNetwork() if max_frame_bytes is None else MemoryNetwork(max_frame_bytes)


@pytest.fixture(params=["tcp", "memory"])
def network_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def network(network_kind: str) -> Network:
    return make_network(network_kind)
