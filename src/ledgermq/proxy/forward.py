"""The stand-alone proxy's way to a broker group's master: remoting, through the client package.

``Forwarder.call`` sends one remoting request to the current master of a broker group, found
in the topic's route (``ClientInstance.topic_route``, cached; the NameServers are asked again
on failure). What a master failover looks like from here, and what is done about it:

- the dead master's address refuses connections or the request times out (``NetworkError``);
- a replica that stepped down, or a new master not yet serving, answers SERVICE_NOT_AVAILABLE
  (14) or another code ``MQResponseError`` calls ``retriable`` (SYSTEM_ERROR: a quorum wait
  that timed out; SYSTEM_BUSY);
- the route names no master of the group for a while (an election under way).

Each of these makes the forwarder refresh the route (from a NameServer) and try again after a
back-off (50 ms doubling to 1 s), until the caller's deadline; the last failure is raised then.
A request whose outcome is unknown (sent, then the connection died or it timed out) is retried
only when the caller says ``idempotent=False`` is acceptable: a send is (at-least-once, the
contract our ``Producer`` keeps: a message may be stored twice, never lost once acknowledged),
POP is (a message handed out and never seen comes back after its invisible time), an ack is
(the broker takes a second ack of the same handle as done; should it answer NO_MESSAGE, the
caller takes that as done when an earlier attempt's outcome was unknown).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import (
    ConnectError,
    LedgerMQError,
    MQResponseError,
    NetworkError,
    NoRouteError,
    TopicNotFoundError,
)
from ledgermq.wire import MQResponseCode
from ledgermq.wire.route import MASTER_ID, is_writable

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from ledgermq.client import ClientInstance
    from ledgermq.wire import RemotingCommand
    from ledgermq.wire.route import TopicRouteData

__all__ = ["Forwarded", "Forwarder", "WriteQueue", "write_queues"]

_log = logging.getLogger(__name__)

_FIRST_BACKOFF_S: Final = 0.05
_MAX_BACKOFF_S: Final = 1.0
_SUCCESS: Final = (MQResponseCode.SUCCESS,)


@dataclass(frozen=True, slots=True)
class WriteQueue:
    """One writable queue of a topic: its broker group and queue id."""

    broker_name: str
    queue_id: int


def write_queues(route: TopicRouteData) -> list[WriteQueue]:
    """The topic's writable queues, broker groups in name order (stable across refreshes, so
    a message group hashed onto them keeps its queue while the route keeps its shape)."""
    queues: list[WriteQueue] = []
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if is_writable(data.perm):
            queues.extend(WriteQueue(data.broker_name, i) for i in range(data.write_queue_nums))
    return queues


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A master's answer, and how many attempts it took (1: no failover met)."""

    response: RemotingCommand
    attempts: int
    unknown_before: bool
    """An earlier attempt's outcome was unknown (the request may have been served twice)."""


class Forwarder:
    """Remoting requests to broker groups' masters, across failovers (module docstring)."""

    def __init__(self, client: ClientInstance, *, max_backoff_s: float = _MAX_BACKOFF_S) -> None:
        """``max_backoff_s``: the longest wait between two attempts (the back-off doubles up
        to it); a replica's door, whose clients wait for it, looks again more often."""
        self.client = client
        self._max_backoff_s = max_backoff_s
        self.after_failover: Callable[[], None] = lambda: None
        """Called when a request succeeded after failed attempts (a new master, likely)."""

    async def route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The topic's route (``TopicNotFoundError`` when no NameServer knows it)."""
        return await self.client.topic_route(topic, refresh=refresh)

    async def master(self, topic: str, broker_name: str) -> str:
        route = await self.client.topic_route(topic)
        address = _master_of(route, broker_name)
        if address is None:
            route = await self.client.topic_route(topic, refresh=True)
            address = _master_of(route, broker_name)
        if address is None:
            raise NoRouteError(
                f"broker group {broker_name} has no master in the route of {topic} now "
                "(an election may be under way)"
            )
        return address

    async def call(
        self,
        topic: str,
        broker_name: str,
        code: int,
        fields: Mapping[str, str],
        body: bytes = b"",
        *,
        deadline_s: float,
        timeout_s: float = 3.0,
        expect: Collection[int] = _SUCCESS,
        retry_unknown: bool = True,
    ) -> Forwarded:
        """``code`` to ``broker_name``'s master until an expected answer or ``deadline_s``
        (seconds from now). Raises the last failure: ``MQResponseError`` (a code not
        expected and not retriable, or the last retriable one), ``NetworkError``,
        ``NoRouteError``, ``TopicNotFoundError``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        backoff = _FIRST_BACKOFF_S
        attempts = 0
        unknown = False
        while True:
            attempts += 1
            address = "(none)"
            try:
                address = await self.master(topic, broker_name)
                left = end - loop.time()
                response = await self.client.invoke(
                    address, code, fields, body,
                    timeout_s=max(0.2, min(timeout_s, left)), expect=expect,
                )  # fmt: skip
                if attempts > 1:
                    self.after_failover()
                return Forwarded(response, attempts, unknown)
            except TopicNotFoundError:
                raise
            except (NetworkError, NoRouteError, MQResponseError) as exc:
                if isinstance(exc, MQResponseError) and not exc.retriable:
                    raise
                maybe_served = isinstance(exc, NetworkError) and not isinstance(exc, ConnectError)
                if maybe_served and not retry_unknown:
                    raise
                unknown = unknown or maybe_served
                if loop.time() + backoff >= end:
                    exc.add_note(f"(the proxy tried {attempts} times to reach the master)")
                    raise
                _log.info("%s of %s to %s (%s) failed: %s; looking for the master again",
                          code, topic, broker_name, address, exc)  # fmt: skip
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff_s)
            try:
                await self.client.topic_route(topic, refresh=True)
            except TopicNotFoundError:
                pass  # a NameServer that has just restarted: the cached route stays
            except LedgerMQError as exc:
                _log.debug("route refresh of %s failed: %s", topic, exc)


def _master_of(route: TopicRouteData, broker_name: str) -> str | None:
    for data in route.broker_datas:
        if data.broker_name == broker_name:
            return data.broker_addrs.get(MASTER_ID)
    return None
