"""The broker's client registry is one, whatever the door (issue 26 items 1 and 5).

``ClientService.client_alive`` registers a remoting heartbeat (with the client's connection)
and a v5 session (``ClientSession.heartbeat``: no connection, its address) into the same
``broker.service.client_registry.ConsumerManager``, checked and bounded the same way: a refused
announcement leaves nothing behind, and the members with a channel are told when their group
changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.errors import InvalidGroupError, OverLimitError
from ledgermq.broker.service.client_registry import ConsumerManager
from ledgermq.broker.service.clients import ClientService
from ledgermq.messaging import ClientKind, ClientSession, ConsumerData, Heartbeat

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState

GROUP = "readers"
TOPIC = "orders"


@dataclass
class Channel:
    """A remoting member's connection, as the registry sees it."""

    address: str
    closed: bool = False


@dataclass
class Told:
    """The door's ``notify``: which member heard of which group's change."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, channel: Channel, group: str) -> None:
        self.calls.append((channel.address, group))


def _service(told: Told, **settings: int) -> tuple[ClientService, ConsumerManager[Channel]]:
    """A follower's service (no group creation) over a fresh registry; ``settings``: the
    bounds, else BrokerConfig's defaults."""
    defaults = BrokerConfig.__dataclass_fields__
    bounds = ("heartbeat_max_groups", "heartbeat_max_subscriptions", "auto_create_group_max")
    config = SimpleNamespace(**{k: settings.get(k, defaults[k].default) for k in bounds})
    state = SimpleNamespace(config=config, is_master=False, now_ms=lambda: 1_000)
    registry: ConsumerManager[Channel] = ConsumerManager(told)
    return ClientService(cast("BrokerState", state), registry), registry


def _remoting_heartbeat(client_id: str, *groups: str) -> Heartbeat:
    consumers = tuple(
        ConsumerData(g, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", {TOPIC: "*"})
        for g in groups
    )
    return Heartbeat(client_id, (), consumers)


def _v5_session(client_id: str, group: str = GROUP) -> ClientSession:
    return ClientSession(
        client_id=client_id, address="10.0.0.9:7000", kind=ClientKind.CONSUMER, group=group,
        subscriptions={TOPIC: ("*", "TAG")}, publishes=(), language="JAVA", version="5.0.7",
    )  # fmt: skip


def test_a_remoting_client_and_a_v5_client_are_members_of_one_registry() -> None:
    told = Told()
    service, registry = _service(told)
    channel = Channel("10.0.0.1:5000")

    async def both() -> None:
        await service.client_alive(_remoting_heartbeat("remoting-1", GROUP), channel, "JAVA", 453)
        session = _v5_session("v5-1")
        await service.client_alive(
            session.heartbeat("GRPC_PRODUCER"), None, "JAVA", 0, session.address
        )

    asyncio.run(both())
    assert registry.client_ids(GROUP) == ["remoting-1", "v5-1"]
    members = registry.groups[GROUP].members
    assert members["v5-1"].client_address == "10.0.0.9:7000"
    assert members["v5-1"].connection is None
    assert members["remoting-1"].client_address == "10.0.0.1:5000"
    assert registry.subscription(GROUP, TOPIC) == ("*", "TAG")
    assert registry.groups[GROUP].consume_type == "CONSUME_POP"
    # the remoting member heard of its own join and of the v5 client's (the one with a channel)
    assert told.calls == [("10.0.0.1:5000", GROUP), ("10.0.0.1:5000", GROUP)]
    service.client_gone("v5-1", GROUP)
    assert registry.client_ids(GROUP) == ["remoting-1"]
    assert told.calls[-1] == ("10.0.0.1:5000", GROUP)


def test_a_refused_announcement_registers_nothing_at_either_door() -> None:
    service, registry = _service(Told(), heartbeat_max_groups=2)
    many = _remoting_heartbeat("remoting-1", "g1", "g2", "g3")
    with pytest.raises(OverLimitError, match="heartbeatMaxGroups"):
        asyncio.run(service.client_alive(many, Channel("10.0.0.1:5000"), "JAVA", 453))
    bad = _v5_session("v5-1", group="orders.v1")
    with pytest.raises(InvalidGroupError):
        asyncio.run(service.client_alive(bad.heartbeat("GRPC_PRODUCER"), None, "JAVA", 0))
    assert registry.groups == {}
    assert registry.producer_groups == {}


def test_a_v5_producer_session_is_a_producer_of_the_group_it_is_given() -> None:
    session = dataclasses.replace(_v5_session("v5-p"), kind=ClientKind.PRODUCER, group="")
    assert session.heartbeat("GRPC_PRODUCER") == Heartbeat("v5-p", ("GRPC_PRODUCER",), ())
