"""What the remoting door needs of the replica it serves, and no more.

Why a protocol rather than the replica's class: the door must not reach into the stores, the
role or the housekeeping (an import contract says so); it serves requests over the services and
asks the replica three things: its config as it is now, whether it has failed (every answer
after a fail-stop is a refusal), and to change its config live (UPDATE_BROKER_CONFIG).
``broker.replica.BrokerReplica`` is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ledgermq.broker.config import BrokerConfig

__all__ = ["House"]


class House(Protocol):
    @property
    def config(self) -> BrokerConfig:
        """The config in force (a live update replaces it)."""

    def failed(self) -> BaseException | None:
        """Why the replica stopped for good, None while it serves."""

    async def update_config(self, body: bytes) -> str:
        """UPDATE_BROKER_CONFIG's body applied: what was done; ``ConfigError`` if refused."""
