"""The stand-alone proxy's v5 clients as the masters' clients (part of ``proxy.remote_backend``).

As RocketMQ's proxy does in cluster mode, the proxy tells the masters about its clients with
remoting heartbeats, so the brokers' client registries (``consumer-connection``, the console's
group page, the metrics) list v5 clients too:

- a v5 consumer's session (its Telemetry settings, renewed by its Heartbeat) becomes a
  HEART_BEAT with the client's own id and its group and subscriptions, sent to every broker of
  the subscribed topics, at most every ``RENEW_S`` for an unchanged session (the brokers
  expire a client silent for 120 s); NotifyClientTermination becomes UNREGISTER_CLIENT;
- v5 producers publish under ``GRPC_PRODUCER_GROUP``: the proxy heartbeats the masters of their
  topics as a producer of that group, so a master checks a gRPC half message back over the
  proxy's connection (CHECK_TRANSACTION_STATE), and the proxy relays it to a producer's
  Telemetry stream (``proxy.telemetry``: with the ACL on, only to a stream whose account may
  publish the topic), whose checker answers with an EndTransaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import LedgerMQError
from ledgermq.messaging import ClientKind
from ledgermq.proxy.cluster_transactions import orphaned_command
from ledgermq.proxy.messages import GRPC_PRODUCER_GROUP
from ledgermq.proxy.telemetry import TelemetryStreams

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from ledgermq.messaging import ClientSession, ConsumerData
    from ledgermq.net import Connection
    from ledgermq.proxy.forward import Forwarder
    from ledgermq.wire import RemotingCommand

__all__ = ["RENEW_S", "RemoteSessions"]

_log = logging.getLogger(__name__)

RENEW_S: Final = 20.0
"""How often an unchanged v5 consumer's session is told to the brokers again."""
_FORGET_MS: Final = 130_000
"""A session not renewed for this long is forgotten here (the brokers forget it after 120 s)."""


def consumer_data(data: ConsumerData) -> dict[str, object]:
    """A consumer group's entry of a remoting heartbeat's ``consumerDataSet`` (RocketMQ's
    ``ConsumerData`` JSON), from a session's ``ClientSession.heartbeat``."""
    return {
        "groupName": data.group,
        "consumeType": data.consume_type,
        "messageModel": data.message_model,
        "consumeFromWhere": data.consume_from_where,
        "subscriptionDataSet": [
            {
                "topic": topic,
                "subString": expression,
                "expressionType": data.expression_types.get(topic, "TAG"),
                "classFilterMode": False,
                "tagsSet": [],
                "codeSet": [],
                "subVersion": 0,
            }
            for topic, expression in sorted(data.subscriptions.items())
        ],
        "unitMode": False,
    }


class RemoteSessions:
    """v5 sessions told to the masters, and their check-backs relayed (module docstring)."""

    def __init__(self, forwarder: Forwarder) -> None:
        self._forward = forwarder
        self.streams = TelemetryStreams()
        """v5 producers' Telemetry streams: where the masters' check-backs go."""
        self._told: dict[str, tuple[ClientSession, int]] = {}
        """client id -> its session as last told to the brokers, and when (monotonic ms)."""
        self._tasks: set[asyncio.Task[None]] = set()
        forwarder.client.on_check_transaction = self._on_check
        forwarder.after_failover = self._heartbeat_soon

    async def client_alive(self, session: ClientSession) -> None:
        client = self._forward.client
        if session.kind is ClientKind.PRODUCER:
            if client.register_producer(GRPC_PRODUCER_GROUP, session.publishes):
                self._heartbeat_soon()
            return
        consumers = session.heartbeat(GRPC_PRODUCER_GROUP).consumers
        if not consumers:
            return
        now = client.now_ms()
        told = self._told.get(session.client_id)
        if told is not None and told[0] == session and now - told[1] < RENEW_S * 1000:
            return
        self._told[session.client_id] = (session, now)
        for client_id in [c for c, (_, at) in self._told.items() if now - at > _FORGET_MS]:
            del self._told[client_id]  # silent for longer than the brokers keep a client
        data = [consumer_data(consumer) for consumer in consumers]
        # in the background: a broker that does not answer must not hold the client's call
        self._spawn(client.heartbeat_for(session.client_id, data, session.subscriptions))

    async def client_gone(self, client_id: str, group: str) -> None:
        if self._told.pop(client_id, None) is not None and group:
            await self._forward.client.unregister(consumer_group=group, client_id=client_id)

    def _heartbeat_soon(self) -> None:
        """Tell the masters now that this proxy is a producer of ``GRPC_PRODUCER_GROUP`` (the
        client's own heartbeat comes every 30 s): after a producer's settings, and after a
        failover, so that the new master's check-backs find the proxy."""
        if not self._forward.client.producer_groups:
            return
        self._spawn(self._heartbeat())

    def _spawn(self, work: Coroutine[Any, Any, object]) -> None:
        async def quietly() -> None:
            with contextlib.suppress(LedgerMQError):
                await work

        task = asyncio.get_running_loop().create_task(quietly())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _heartbeat(self) -> None:
        client = self._forward.client
        for topic in sorted(client.producer_topics):
            with contextlib.suppress(LedgerMQError):
                await client.topic_route(topic, refresh=True)
        await client.send_heartbeat()

    def _on_check(self, conn: Connection, command: RemotingCommand) -> None:
        """A master's CHECK_TRANSACTION_STATE, to a producer's Telemetry stream; one-way, so
        a check that finds no producer is simply not answered (the master asks again)."""
        orphan = orphaned_command(command)
        if orphan is None:
            _log.warning("a check-back from %s holds no half message", conn.address)
            return
        topic = orphan.recover_orphaned_transaction_command.message.topic.name
        if not self.streams.relay(topic, orphan):
            _log.info(
                "no producer of %s is connected for a check-back from %s", topic, conn.address
            )
