"""A NameServer and fake brokers on real TCP ports, run by a loop in a thread, so that a CLI
command (which runs its own event loop, as ``main()`` does) can talk to them in-process."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import TcpNetwork
from tests.client.fake_broker import FakeBroker

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

T = TypeVar("T")


class TcpFakeCluster:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.network = TcpNetwork()
        self.namesrv = NameServer(NameServerConfig(listen_port=0), self.network)
        self.call(self.namesrv.start())
        self.addr = f"127.0.0.1:{self.namesrv.port}"
        self.brokers: list[FakeBroker] = []

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def add_broker(self, topics: dict[str, int], **options: Any) -> FakeBroker:
        async def start() -> FakeBroker:
            broker = FakeBroker(self.network, self.addr, topics=topics, **options)  # type: ignore[arg-type]
            return await broker.start()

        broker = self.call(start())
        self.brokers.append(broker)
        return broker

    def close(self) -> None:
        async def close() -> None:
            for broker in self.brokers:
                await broker.close()
            await self.namesrv.close()

        try:
            self.call(close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


@pytest.fixture
def tcp_fake_cluster() -> Iterator[TcpFakeCluster]:
    cluster = TcpFakeCluster()
    try:
        yield cluster
    finally:
        cluster.close()
