"""What a consumer that works one request at a time holds (``PullConsumer``, ``PopConsumer``):
its group, its ``ClientInstance`` and the group's ``QueueApi``, started and shut down with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from ledgermq.client._queue_api import QueueApi
from ledgermq.client._remoting import ClientInstance
from ledgermq.errors import ConfigError
from ledgermq.wire.names import group_name_problem

if TYPE_CHECKING:
    from ledgermq.client.credentials import Credentials
    from ledgermq.clock import Clock
    from ledgermq.net import Network
    from ledgermq.net.tls import TlsClientConfig

__all__ = ["GroupClient"]


class GroupClient:
    """A consumer group's own client, started with ``start`` or ``async with``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        request_timeout_s: float = 3.0,
        network: Network | None = None,
        client_id: str | None = None,
        instance_name: str | None = None,
        clock: Clock | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
        route_refresh_interval_s: float = 30.0,
    ) -> None:
        if (problem := group_name_problem(group)) is not None:
            raise ConfigError(f"consumer group: {problem}")  # Validators.checkGroup
        self.group = group
        self.request_timeout_s = request_timeout_s
        self._client = ClientInstance(
            namesrv_addr,
            credentials=credentials,
            tls=tls,
            client_id=client_id,
            instance_name=instance_name,
            network=network,
            clock=clock,
            request_timeout_s=request_timeout_s,
            route_refresh_interval_s=route_refresh_interval_s,
        )
        self._api = QueueApi(self._client, group)

    @property
    def client_id(self) -> str:
        return self._client.client_id

    async def start(self) -> None:
        await self._client.start(background=False)

    async def shutdown(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
