"""Where a v5 client should go: a topic's route from the NameServers, with gRPC endpoints.

In local mode (RocketMQ's proxy inside each broker) a client talks gRPC to the broker replicas
themselves. A route names, for each broker group, every replica's gRPC door (the master's
first): any of them serves the group, a follower's forwarding the writes to the master
(``proxy.local_send``), so a client that loses the master goes on through another door of the
same route without waiting for a new one. The NameServer route names each replica's remoting
address; its gRPC port is that broker's ``grpcServerPort``, which may differ per replica
(several on one host). RocketMQ's ``LocalTopicRouteService`` assumes every broker uses this
proxy's port; here each replica is asked once instead (GET_BROKER_CONFIG, 26, whose body is
the broker.conf it runs with: ``grpcServerPort``), and the answer is kept per remoting address
for a minute. A replica's own address is answered without asking.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import LedgerMQError, NetworkError
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.namesrv_headers import GetRouteInfoRequestHeader
from ledgermq.wire.route import TopicRouteData

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ledgermq.net import ConnectionPool

__all__ = ["Endpoint", "RouteFinder", "TopicNotFound"]

_log = logging.getLogger(__name__)

_TIMEOUT_S: Final = 3.0
_PORT_KEPT_S: Final = 60.0
"""How long a master's gRPC port is kept before it is asked again (a replica restarted with
``grpcServerPort=0`` listens on a new one)."""
_GRPC_PORT_FIELD: Final = "grpcServerPort="


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


class TopicNotFound(LedgerMQError):  # noqa: N818 - named as the status it becomes
    """No NameServer knows the topic."""


class RouteFinder:
    """Routes from the NameServers (in turn), and each master's gRPC endpoint."""

    def __init__(
        self,
        pool: ConnectionPool,
        namesrv_addrs: Sequence[str],
        own_remoting: Callable[[], str],
        own_grpc_port: int,
        sign: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ) -> None:
        """``own_remoting``: this replica's remoting address (known once its port is open);
        ``sign``: signs a request's fields with the broker's own account (``aclAccessKey``),
        for NameServers and brokers that check ACL."""
        self._sign = sign or (lambda fields: fields)
        self._pool = pool
        self._namesrv = list(namesrv_addrs)
        self._next = 0
        self._own_remoting = own_remoting
        self._own_grpc_port = own_grpc_port
        self._grpc_ports: dict[str, tuple[int, float]] = {}
        """remoting address -> (its gRPC port, loop time it was learnt)"""

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route; ``TopicNotFound``, or the last ``NetworkError`` when no NameServer
        answers (``LedgerMQError`` when none is configured)."""
        if not self._namesrv:
            raise LedgerMQError("this broker has no namesrvAddr, so it cannot answer routes")
        last: NetworkError | None = None
        for _ in range(len(self._namesrv)):
            address = self._namesrv[self._next % len(self._namesrv)]
            command = RemotingCommand(
                code=MQRequestCode.GET_ROUTEINFO_BY_TOPIC,
                opaque=0,
                ext_fields=self._sign(GetRouteInfoRequestHeader(topic).to_ext_fields()),
            )
            try:
                response = await self._pool.request(address, command, _TIMEOUT_S)
            except NetworkError as exc:
                last = exc
                self._next += 1
                continue
            if response.code == MQResponseCode.TOPIC_NOT_EXIST:
                raise TopicNotFound(f"topic {topic} does not exist")
            if response.code != MQResponseCode.SUCCESS:
                raise LedgerMQError(
                    f"NameServer {address} refused the route of {topic}: "
                    f"{response.code} {response.remark}"
                )
            return TopicRouteData.from_json(response.body)
        assert last is not None
        raise last

    async def group_endpoints(self, route: TopicRouteData) -> dict[str, list[Endpoint]]:
        """broker name -> the gRPC endpoints of every replica the route names (the master
        first, then the slaves by broker id), those whose gRPC port is known; a group with
        none is left out. Every replica's door serves its group (a follower's forwards the
        writes to the master: ``proxy.local_send``)."""
        found: dict[str, list[Endpoint]] = {}
        for broker in route.broker_datas:
            for _, address in sorted(broker.broker_addrs.items()):
                port = await self._grpc_port(address)
                if port is None or port < 0:
                    continue
                found.setdefault(broker.broker_name, []).append(
                    Endpoint(address.rpartition(":")[0], port)
                )
        return found

    async def _grpc_port(self, remoting_address: str) -> int | None:
        if remoting_address == self._own_remoting():
            return self._own_grpc_port
        now = asyncio.get_running_loop().time()
        known = self._grpc_ports.get(remoting_address)
        if known is not None and now - known[1] < _PORT_KEPT_S:
            return known[0]
        command = RemotingCommand(
            code=MQRequestCode.GET_BROKER_CONFIG, opaque=0, ext_fields=self._sign({})
        )
        try:
            response = await self._pool.request(remoting_address, command, _TIMEOUT_S)
        except NetworkError as exc:
            _log.info("broker %s did not say its gRPC port: %s", remoting_address, exc)
            return None
        if response.code != MQResponseCode.SUCCESS:
            _log.info("broker %s refused its config: %s", remoting_address, response.remark)
            return None
        for line in response.body.decode(errors="replace").splitlines():
            if line.startswith(_GRPC_PORT_FIELD):
                try:
                    port = int(line[len(_GRPC_PORT_FIELD) :])
                except ValueError:
                    return None
                self._grpc_ports[remoting_address] = (port, now)
                return port
        return None
