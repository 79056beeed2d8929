"""Clients: what a consumer's presence and subscription mean to the broker, whatever the door.

A door keeps its own registry of connected clients (the remoting one is
``broker.remoting.consumers``); what their heartbeats and checks mean lives here: a consumer
group seen on the master gets its subscription config and retry topic
(``ClientManageProcessor``), and a subscription is checked exactly as a pull would check it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.broker.state.topics import retry_topic
from ledgermq.broker.storage.filter.subscription import PullFilter, resolve

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["ClientService"]


class ClientService:
    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def now_ms(self) -> int:
        return self._state.now_ms()

    def consumer_group_seen(self, group: str) -> None:
        """A consumer of ``group`` is alive: on the master, create the group's subscription
        config and retry topic in the background if either is missing."""
        state = self._state
        if state.is_master and (
            group not in state.metadata.groups or state.topics.find(retry_topic(group)) is None
        ):
            state.spawn(self._prepare_group(group))

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
