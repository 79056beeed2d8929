"""A client whose master failed looks for the group's new master soon (issue 27 item 6).

A master that stops on SIGTERM hands its leadership over in about 0.2 s; until a client finds
the new master (or the NameServers say so, at the next route-version poll), the group takes no
writes from it. ``detect_master`` asked the other members first 0.5 s after the failure, which
made a rolling restart's master gap 0.5-1.04 s (`python -m ledgermq.testing.chaos.rolling`,
2026-11-29); it asks at 0.1 s now, then slows down to every 0.5 s.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

from ledgermq.client._remoting import ClientInstance
from ledgermq.net import MemoryNetwork
from ledgermq.testing.virtual_time import current_clock, current_loop, run
from ledgermq.wire import RemotingCommand
from ledgermq.wire.route import BrokerData, QueueData, TopicRouteData

if TYPE_CHECKING:
    from collections.abc import Callable

OLD, NEW, OTHER = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=(QueueData("broker-a", 4, 4, 6, 0),),
        broker_datas=(BrokerData("c", "broker-a", {0: OLD, 1: NEW, 2: OTHER}),),
    )


def _asks_until_found(new_master_from_s: float) -> tuple[list[float], str | None]:
    """When (virtual seconds after the failure) the client asked the members, and the master
    its cached route names at the end, if ``NEW`` is the master from ``new_master_from_s``."""

    async def scenario() -> tuple[list[float], str | None]:
        loop = current_loop()
        client = ClientInstance("127.0.0.1:9876", network=MemoryNetwork(), clock=current_clock())
        client._routes["T"] = _route()
        asks: list[float] = []
        start = loop.time()

        async def invoke(address: str, code: int, *args: Any, **kwargs: Any) -> RemotingCommand:
            asks.append(round(loop.time() - start, 3))
            is_master = address == NEW and loop.time() - start >= new_master_from_s
            table = {"brokerId": "0" if is_master else "1"}
            return RemotingCommand(code=0, opaque=0, body=json.dumps({"table": table}).encode())

        fake: Callable[..., Any] = invoke
        client.invoke = fake  # type: ignore[method-assign]
        client.detect_master("broker-a", OLD, window_s=30.0)
        await client._detecting["broker-a"]
        route = client.cached_route("T")
        assert route is not None
        return asks, route.broker_datas[0].broker_addrs.get(0)

    return run(scenario())


def test_a_new_master_is_found_within_a_few_hundred_ms_of_the_failure() -> None:
    asks, master = _asks_until_found(new_master_from_s=0.2)
    assert master == NEW
    assert asks[0] <= 0.1  # the first ask (0.5 s before)
    found_at = max(asks)
    assert found_at <= 0.35, asks  # 0.1 s, then 0.3 s: found (it was 0.5 s, then 1.0 s)


def test_the_asks_slow_down_to_one_every_half_second() -> None:
    asks, master = _asks_until_found(new_master_from_s=3.0)
    assert master == NEW
    rounds = sorted(set(asks))
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(rounds)]
    assert gaps[:3] == [0.2, 0.3, 0.4]
    assert all(gap == 0.5 for gap in gaps[4:])
    assert len(rounds) <= 9  # about 3 s of looking: not a busy loop
