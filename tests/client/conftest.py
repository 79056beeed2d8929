"""Shared pieces of the client tests: a NameServer and fake brokers on one MemoryNetwork."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import MemoryNetwork

from .fake_broker import FakeBroker, FakeStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine

T = TypeVar("T")
NAMESRV = "127.0.0.1:9876"


def arun(main: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
    """Run ``main`` on a fresh loop, bounded so a hang fails instead of stalling."""
    return asyncio.run(asyncio.wait_for(main, timeout_s))


async def eventually(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110 - polls state that has no event to wait on
            await asyncio.sleep(0.01)


@dataclass
class Env:
    network: MemoryNetwork
    namesrv: NameServer
    brokers: dict[str, FakeBroker] = field(default_factory=dict)
    addr: str = NAMESRV

    async def add_broker(self, name: str, topics: dict[str, int], **options: Any) -> FakeBroker:
        broker = FakeBroker(self.network, self.addr, name=name, topics=topics, **options)
        await broker.start()
        self.brokers[f"{name}/{broker.broker_id}/{broker.port}"] = broker
        return broker

    async def add_slave(self, master: FakeBroker, broker_id: int = 1) -> FakeBroker:
        slave = FakeBroker(
            self.network,
            self.addr,
            name=master.name,
            broker_id=broker_id,
            store=master.store,
            auto_create=False,
        )
        await slave.start()
        self.brokers[f"{master.name}/{broker_id}/{slave.port}"] = slave
        return slave


@contextlib.asynccontextmanager
async def cluster(
    brokers: dict[str, dict[str, int]] | None = None, **options: Any
) -> AsyncIterator[Env]:
    """A NameServer and one fake broker per entry of ``brokers`` (name -> {topic: queues})."""
    network = MemoryNetwork()
    namesrv = NameServer(NameServerConfig(listen_port=9876), network)
    await namesrv.start()
    env = Env(network, namesrv)
    try:
        for name, topics in (brokers or {"broker-a": {"T": 4}}).items():
            await env.add_broker(name, topics, **options)
        yield env
    finally:
        for broker in env.brokers.values():
            await broker.close()
        await namesrv.close()


__all__ = ["NAMESRV", "Env", "FakeStore", "arun", "cluster", "eventually"]
