"""What the gRPC door asks of a backend beyond the messaging contract (issue 26 item 4).

The contract itself (``messaging.backend.Backend`` and its values) is protocol-neutral; one
servicer (``proxy.door``) translates the v5 protocol to it, whoever stores the messages: a
replica's own services (``proxy.local_backend``) or the brokers' masters over remoting
(``proxy.remote_backend``). What remains here is gRPC's own: the Telemetry streams of v5
producers (where check-backs go), and refusals as ``proxy.refusal.Refusal``, which carries the
status to answer (``proxy.status`` / ``proxy.remote_status`` are the tables that say it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ledgermq.messaging.backend import Backend

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.messaging.consuming import AckEntry
    from ledgermq.proxy.refusal import Refusal
    from ledgermq.proxy.telemetry import TelemetryStreams

__all__ = ["GrpcBackend"]


class GrpcBackend(Backend, Protocol):
    """A ``Backend`` the gRPC door serves through (module docstring)."""

    @property
    def streams(self) -> TelemetryStreams:
        """The open Telemetry streams of v5 producers: where check-backs go."""
        ...

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> list[Refusal | None]:
        """Acknowledge each entry; one result per entry, in order (None: acknowledged)."""
        ...
