"""Clients: what a client's presence and subscription mean to the broker, whatever the door.

Both doors register their clients here, in the broker's one registry
(``broker.service.client_registry``): a remoting HEART_BEAT and a v5 client's session alike
(``client_alive``, a ``messaging.sessions.Heartbeat``), checked and bounded the same way; a
consumer group seen on the master gets its subscription config and retry topic
(``ClientManageProcessor``), and a subscription is checked exactly as a pull would check it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.errors import OverLimitError, ServiceError
from ledgermq.broker.names import require_group_name, require_topic_name
from ledgermq.broker.state.topics import retry_topic
from ledgermq.broker.storage.filter.subscription import PullFilter, resolve
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from ledgermq.broker.service.client_registry import ClientChannel, ConsumerManager
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.messaging.sessions import Heartbeat

__all__ = ["ClientService"]

_PREPARE_WAIT_S: Final = 2.0
"""How long a heartbeat waits for a new group's retry topic before it is answered anyway (a
client's heartbeat times out after 3 s)."""


async def _outcome_of(task: asyncio.Future[None]) -> None:
    """Await ``task`` so that ``BrokerState.spawn`` logs its failure."""
    await task


class ClientService:
    """``registry``: the broker's clients (module docstring)."""

    def __init__(self, state: BrokerState, registry: ConsumerManager[Any]) -> None:
        self._state = state
        self.registry = registry

    def now_ms(self) -> int:
        return self._state.now_ms()

    async def client_alive(
        self,
        heartbeat: Heartbeat,
        channel: ClientChannel | None,
        language: str,
        version: int,
        address: str = "",
    ) -> None:
        """Register or renew a client, whatever its door: checked and bounded first
        (``check_heartbeat``, ``check_registry``: nothing of a refused heartbeat is kept), then
        every consumer group seen gets its config and retry topic (``consumer_group_seen``)
        and the members of groups whose membership changed are told. ``channel``: where a
        remoting client is reached (None: a v5 client, known by its ``address``)."""
        self.check_heartbeat(
            heartbeat.producer_groups,
            [(data.group, data.subscriptions.keys()) for data in heartbeat.consumers],
        )
        registry = self.registry
        wanted = {data.group for data in heartbeat.consumers}
        self.check_registry(
            client_groups=len(registry.groups_of(heartbeat.client_id) | wanted),
            new_groups=len(wanted - registry.groups.keys()),
            online_groups=len(registry.groups),
        )
        changed = registry.register(heartbeat, channel, language, version, self.now_ms(), address)
        for data in heartbeat.consumers:
            await self.consumer_group_seen(data.group)
        registry.notify_changed(changed)

    def client_gone(self, client_id: str, group: str | None) -> None:
        """The client leaves consumer group ``group`` (None: none) and every producer group;
        the group's other members are told."""
        registry = self.registry
        registry.notify_changed(registry.unregister(client_id, group))

    def check_heartbeat(
        self, producer_groups: Sequence[str], consumers: Sequence[tuple[str, Collection[str]]]
    ) -> None:
        """Refuse a heartbeat (remoting HEART_BEAT, a v5 client's settings) before any of it is
        registered or created: at most ``heartbeatMaxGroups`` groups and
        ``heartbeatMaxSubscriptions`` subscribed topics (``OverLimitError``), every group and
        topic a valid name (``InvalidGroupError`` / ``InvalidTopicError``). ``consumers``:
        (group, subscribed topics) per consumer group.

        Without this a heartbeat created groups and retry topics with any name (issue 25: one
        named ``orders.v1`` later wrote a record no replica could index) and kept 100,000
        subscriptions per client in memory."""
        config = self._state.config
        groups = len(producer_groups) + len(consumers)
        if groups > config.heartbeat_max_groups:
            raise OverLimitError(
                f"the heartbeat names {groups} groups; the broker takes at most "
                f"{config.heartbeat_max_groups} per heartbeat (heartbeatMaxGroups)"
            )
        subscriptions = sum(len(topics) for _, topics in consumers)
        if subscriptions > config.heartbeat_max_subscriptions:
            raise OverLimitError(
                f"the heartbeat carries {subscriptions} subscriptions; the broker takes at most "
                f"{config.heartbeat_max_subscriptions} per client (heartbeatMaxSubscriptions)"
            )
        for group in producer_groups:
            require_group_name(group)
        for group, topics in consumers:
            require_group_name(group)
            for topic in topics:
                require_topic_name(topic)

    def check_registry(self, *, client_groups: int, new_groups: int, online_groups: int) -> None:
        """Refuse a heartbeat that would make its client a member of more than
        ``heartbeatMaxGroups`` consumer groups (its earlier heartbeats' groups count until they
        expire), or add groups to a registry already holding ``autoCreateGroupMax`` online
        consumer groups (``OverLimitError``): a door's registry of clients stays bounded however
        many heartbeats with new names arrive."""
        config = self._state.config
        if client_groups > config.heartbeat_max_groups:
            raise OverLimitError(
                f"the client would be a member of {client_groups} consumer groups; the broker "
                f"takes at most {config.heartbeat_max_groups} per client (heartbeatMaxGroups)"
            )
        if new_groups and online_groups + new_groups > config.auto_create_group_max:
            raise OverLimitError(
                f"the broker already tracks {online_groups} online consumer groups; it takes "
                f"no new one beyond {config.auto_create_group_max} (autoCreateGroupMax)"
            )

    async def consumer_group_seen(self, group: str) -> None:
        """A consumer of ``group`` is alive: on the master, create the group's subscription
        config and retry topic if either is missing, and return once they exist and the
        NameServers know the retry topic (or after ``_PREPARE_WAIT_S``; the creation goes on).

        The Java broker creates them while it handles the heartbeat and registers before it
        answers. Answering first let a client ask for the retry topic's route before any
        NameServer had it: ali-ons logs that as an error (TOPIC_NOT_EXIST for
        ``%RETRY%<group>``), seen in the ali-ons ACL test on a loaded machine."""
        state = self._state
        if state.is_master and (
            group not in state.metadata.groups or state.topics.find(retry_topic(group)) is None
        ):
            task = asyncio.ensure_future(self._prepare_group(group))
            state.spawn(_outcome_of(task))
            with contextlib.suppress(TimeoutError, ServiceError, LedgerMQError):
                await asyncio.wait_for(asyncio.shield(task), _PREPARE_WAIT_S)

    async def _prepare_group(self, group: str) -> None:
        """A consumer group's subscription config and retry topic (``ClientManageProcessor``)."""
        await self._state.topics.ensure_group(group)
        await self._state.topics.ensure_retry_topic(group)

    def check_subscription(self, expression: str, expression_type: str | None) -> PullFilter:
        """The filter a pull with this subscription would use; raises what the pull would
        (``UnsupportedError``, ``InvalidFilterError``)."""
        return resolve(
            expression,
            expression_type,
            property_filter=self._state.config.enable_property_filter,
        )
