"""The proxy asks the NameServers for a route with the typed header (``wire.namesrv_headers``,
issue 26 item 2), the one the NameServer reads it with, signed as it is sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ledgermq.proxy.routes import RouteFinder, TopicNotFound
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import GetRouteInfoRequestHeader


class _Pool:
    """A ``ConnectionPool`` whose NameServer knows no topic."""

    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []

    async def request(self, address: str, command: RemotingCommand, timeout_s: float) -> Any:
        self.sent.append(command)
        return command.response(MQResponseCode.TOPIC_NOT_EXIST)


def test_the_route_lookup_is_the_typed_header() -> None:
    pool = _Pool()
    finder = RouteFinder(
        pool,  # type: ignore[arg-type]
        ["ns1:9876"],
        lambda: "10.0.0.1:10911",
        8081,
        sign=lambda fields: fields | {"AccessKey": "ak"},
    )
    with pytest.raises(TopicNotFound):
        asyncio.run(finder.route("T"))
    [command] = pool.sent
    assert command.code == MQRequestCode.GET_ROUTEINFO_BY_TOPIC
    assert command.ext_fields == {"topic": "T", "AccessKey": "ak"}
    assert GetRouteInfoRequestHeader.from_ext_fields(command.ext_fields).topic == "T"
