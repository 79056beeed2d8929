"""Clients: what a consumer's presence and subscription mean to the broker, whatever the door.

A door keeps its own registry of connected clients (the remoting one is
``broker.remoting.consumers``); what their heartbeats and checks mean lives here: a consumer
group seen on the master gets its subscription config and retry topic
(``ClientManageProcessor``), and a subscription is checked exactly as a pull would check it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import ServiceError
from ledgermq.broker.state.topics import retry_topic
from ledgermq.broker.storage.filter.subscription import PullFilter, resolve
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from ledgermq.broker.state.broker_state import BrokerState

__all__ = ["ClientService"]

_PREPARE_WAIT_S: Final = 2.0
"""How long a heartbeat waits for a new group's retry topic before it is answered anyway (a
client's heartbeat times out after 3 s)."""


async def _outcome_of(task: asyncio.Future[None]) -> None:
    """Await ``task`` so that ``BrokerState.spawn`` logs its failure."""
    await task


class ClientService:
    def __init__(self, state: BrokerState) -> None:
        self._state = state

    def now_ms(self) -> int:
        return self._state.now_ms()

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
