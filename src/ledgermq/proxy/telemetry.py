"""The open Telemetry streams of v5 producers, and the topics each publishes: where a
check-back of a gRPC half message goes, in either mode (a replica's own check-backs,
``proxy.transactions``; a master's relayed by the stand-alone proxy,
``proxy.cluster_transactions``).

A producer's settings only claim its topics: with the ACL on, each stream keeps what its
account may publish (``proxy.grpc_access.signed_in_publisher``), and a check-back, which
carries the half message, goes only to a stream that claims the topic and may publish it
(issue 25 item 5).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable

    from ledgermq.proxy.protocol import service_pb2

__all__ = ["Outbox", "TelemetryStreams"]

Outbox: TypeAlias = "asyncio.Queue[service_pb2.TelemetryCommand | None]"
"""Commands to one client's Telemetry stream (None: the stream ends)."""
_MayPublish: TypeAlias = "Callable[[str], bool]"


class TelemetryStreams:
    """The streams (module docstring)."""

    def __init__(self) -> None:
        self._streams: dict[int, tuple[frozenset[str], Outbox, _MayPublish | None]] = {}
        self._ids = itertools.count()

    def open(self, outbox: Outbox, may_publish: _MayPublish | None = None) -> int:
        """A new stream, whose commands to the client go into ``outbox``; its key.
        ``may_publish`` (the ACL is on): whether the stream's account may publish a topic."""
        key = next(self._ids)
        self._streams[key] = (frozenset(), outbox, may_publish)
        return key

    def publishes(self, key: int, topics: Iterable[str]) -> None:
        """The producer on stream ``key`` publishes ``topics`` (its settings)."""
        entry = self._streams.get(key)
        if entry is not None:
            self._streams[key] = (frozenset(topics), entry[1], entry[2])

    def close(self, key: int) -> None:
        self._streams.pop(key, None)

    def relay(self, topic: str, command: service_pb2.TelemetryCommand) -> bool:
        """Hand ``command`` to the newest stream publishing ``topic`` that may; False if none."""
        for topics, outbox, may_publish in reversed(list(self._streams.values())):
            if topic in topics and (may_publish is None or may_publish(topic)):
                outbox.put_nowait(command)
                return True
        return False
