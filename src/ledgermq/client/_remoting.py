"""The client's shared machinery (RocketMQ's ``MQClientInstance`` + ``MQClientAPIImpl``).

One ``ClientInstance`` per producer, consumer or admin object. It owns:

- the connection pool (one connection per broker / NameServer address);
- the NameServer list, used in turn: a NameServer that fails is skipped for the next one;
- the route cache: a topic's route is looked up on first use, refreshed every
  ``route_refresh_interval_s`` (30 s) for every topic used, and at once on demand (after a send
  fails, after TOPIC_NOT_EXIST or SERVICE_NOT_AVAILABLE); listeners hear about routes that
  changed (a push consumer rebalances);
- route freshness (ours, issue 27): every ``route_poll_interval_s`` (1 s) the client asks the
  NameServer for its route version (GET_ROUTE_VERSION, a few bytes) and refreshes every cached
  route when it moved, so a new master, a transferred leader, new queues and a recovered group
  are used within about a second, not at the next 30 s refresh. A NameServer that does not know
  the request (RocketMQ's) is not asked again: the 30 s refresh remains. ``master_listeners``
  hear of every group whose master changed in a fresh route (a producer stops avoiding it), and
  ``learn_master`` patches the cached routes when a replica itself turned out to be the master
  (the NameServers down, the producer found it among the group's members); ``detect_master``
  (RocketMQ 5's fault detector, for that case) asks a group's other members every 0.5 s, with
  GET_BROKER_RUNTIME_INFO, whether one of them is the master now, for as long as the cached
  route still names the master that failed;
- heartbeats (34): every ``heartbeat_interval_s`` (30 s), and at once to a broker that enters the
  routes, to every broker in the routes of the groups' topics (masters only when there is no
  consumer), carrying the groups and subscriptions (``HeartbeatData``);
- what brokers ask of the client on the same connection: NOTIFY_CONSUMER_IDS_CHANGED (40) makes
  the consumer of that group rebalance now; GET_CONSUMER_RUNNING_INFO (307, an admin's
  ``consumerStatus`` passed on by the broker) is answered with the consumer's
  ``ConsumerRunningInfo``; anything else is answered REQUEST_CODE_NOT_SUPPORTED.

Errors are mapped in one place, ``check_response``: an answer whose code is not one the caller
expects becomes ``MQResponseError(remark, code, address)`` (``TopicNotFoundError`` for 17); its
``retriable`` / ``refresh_route`` flags follow the code. Transport failures arrive as the
``NetworkError`` subclasses of ``ledgermq.net`` and say how far the request got.

Client id: ``ip@instanceName[@unitName]`` as in RocketMQ, where the default instance name is
``pid#n`` with ``n`` counting the client objects of this process (RocketMQ 5 uses
``pid#nanoTime``): two consumers of one group in one process are two members of the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import os
import random
import socket
from typing import TYPE_CHECKING, Final, Protocol

from ledgermq.clock import Clock, SystemClock
from ledgermq.errors import (
    BadRequestError,
    ConfigError,
    ConnectError,
    LedgerMQError,
    MQResponseError,
    NetworkError,
    TopicNotFoundError,
)
from ledgermq.net import ConnectionPool, TcpNetwork
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.headers import (
    GetConsumerRunningInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from ledgermq.wire.namesrv_headers import GetRouteInfoRequestHeader
from ledgermq.wire.route import MASTER_ID, TopicRouteData

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

    from ledgermq.client.credentials import Credentials
    from ledgermq.net import Connection, Network, TlsClientConfig
    from ledgermq.wire.running_info import ConsumerRunningInfo

__all__ = [
    "ClientInstance",
    "ConsumerHandle",
    "check_response",
    "master_may_have_moved",
    "parse_namesrv_addr",
]

logger = logging.getLogger("ledgermq.client")

_instance_counter = itertools.count(1)
_SUCCESS: Final = (MQResponseCode.SUCCESS,)
_DETECT_FIRST_S: Final = 0.1
"""``detect_master``'s first ask after a master failed; the n-th comes n times this later."""
_DETECT_EVERY_S: Final = 0.5
"""...up to this interval between asks."""


def parse_namesrv_addr(namesrv_addr: str) -> list[str]:
    """``"host:port;host:port"`` (also ``,`` separated) -> a list; ConfigError if empty."""
    addresses = [a.strip() for a in namesrv_addr.replace(",", ";").split(";") if a.strip()]
    if not addresses:
        raise ConfigError(f"no NameServer address in {namesrv_addr!r}; expected host:port[;...]")
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"NameServer address {address!r} is not host:port")
    return addresses


@functools.cache
def local_ip() -> str:
    """This host's outward IPv4 address (no packet is sent), or 127.0.0.1."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("10.255.255.255", 1))
        address = sock.getsockname()[0]
        if isinstance(address, str) and address != "0.0.0.0":  # noqa: S104 - a result, not a bind
            return address
    return "127.0.0.1"


def check_response(
    response: RemotingCommand, address: str, expect: Collection[int] = _SUCCESS
) -> RemotingCommand:
    """``response`` if its code is expected; else the typed error for it (the one mapping)."""
    if response.code in expect:
        return response
    remark = response.remark or "(no remark)"
    try:
        name = MQResponseCode(response.code).name
    except ValueError:
        name = "unknown code"
    message = f"{address} answered {response.code} {name}: {remark}"
    if response.code == MQResponseCode.TOPIC_NOT_EXIST:
        raise TopicNotFoundError(message, response.code, address)
    raise MQResponseError(message, response.code, address)


def master_may_have_moved(exc: LedgerMQError) -> bool:
    """A master did not take a request because it is not the master any more
    (SERVICE_NOT_AVAILABLE) or could not be reached: another member may be the master now."""
    if isinstance(exc, MQResponseError):
        return exc.code == MQResponseCode.SERVICE_NOT_AVAILABLE
    return isinstance(exc, ConnectError)


class ConsumerHandle(Protocol):
    """What the instance needs from a consumer it serves."""

    @property
    def group(self) -> str: ...

    def heartbeat_data(self) -> dict[str, object]:
        """This consumer's entry of ``consumerDataSet``."""
        ...

    def topics(self) -> Collection[str]:
        """Topics whose brokers must hear the heartbeat."""
        ...

    def on_consumer_ids_changed(self) -> None:
        """The broker says the group's membership changed: rebalance soon."""
        ...

    def on_route_changed(self, topic: str) -> None: ...

    def running_info(self) -> ConsumerRunningInfo:
        """This consumer's answer to GET_CONSUMER_RUNNING_INFO (307)."""
        ...


class ClientInstance:
    """Connections, routes, heartbeats of one client (see the module docstring).

    Args:
        namesrv_addr: ``"host:port;host:port"``.
        client_id: the full client id; default ``ip@pid#n[@unit_name]``.
        instance_name: replaces ``pid#n`` in the default client id.
        unit_name: appended to the client id (RocketMQ's unit mode naming).
        network: ``TcpNetwork()`` by default; tests pass a ``MemoryNetwork``.
        clock: monotonic and wall time (default the system's).
        request_timeout_s: default timeout of one request (3 s).
        route_refresh_interval_s: period of the route refresh (30 s).
        heartbeat_interval_s: period of the heartbeat (30 s).
        route_poll_interval_s: period of the route version poll (1 s; 0: no poll).
        rng: randomness for the first NameServer choice and back-offs.
        credentials: sign every request (a cluster with ACL on).
        tls: dial NameServers and brokers with TLS (``TlsClientConfig``); ignored when
            ``network`` is given.
    """

    def __init__(
        self,
        namesrv_addr: str,
        *,
        client_id: str | None = None,
        instance_name: str | None = None,
        unit_name: str | None = None,
        network: Network | None = None,
        clock: Clock | None = None,
        request_timeout_s: float = 3.0,
        route_refresh_interval_s: float = 30.0,
        heartbeat_interval_s: float = 30.0,
        route_poll_interval_s: float = 1.0,
        rng: random.Random | None = None,
        credentials: Credentials | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr)
        self.credentials = credentials
        """When set, every request is signed (``Credentials.sign``)."""
        self.ip = local_ip()
        if client_id is None:
            instance = instance_name or f"{os.getpid()}#{next(_instance_counter)}"
            client_id = f"{self.ip}@{instance}" + (f"@{unit_name}" if unit_name else "")
        self.client_id = client_id
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.rng = rng if rng is not None else random.Random()  # noqa: S311 - not security
        self.request_timeout_s = request_timeout_s
        self.route_refresh_interval_s = route_refresh_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.route_poll_interval_s = route_poll_interval_s
        self.tls = tls
        """How this client dials TLS servers (None: plain)."""
        self.network_given = network
        """The network the caller gave (None: TCP), for helpers that make clients alike."""
        self._network: Network = network if network is not None else TcpNetwork(tls_client=tls)
        self.pool = ConnectionPool(self._network, self._on_server_request)
        self._namesrv_index = self.rng.randrange(len(self.namesrv_addrs))
        # topic -> its latest route; topics listed here are refreshed periodically.
        self._routes: dict[str, TopicRouteData] = {}
        self._route_locks: dict[str, asyncio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._detecting: dict[str, asyncio.Task[None]] = {}
        # The last route version a NameServer answered ("" before the first; None: the
        # NameServers do not offer it, the client relies on the periodic refresh).
        self._route_version: str | None = ""
        self.master_listeners: list[Callable[[str], None]] = []
        """Called with a broker group's name when a fresh route shows it with another master
        (or with one again): what was learned about its old master no longer applies."""
        self.producer_groups: set[str] = set()
        self.producer_topics: set[str] = set()
        self.consumers: dict[str, ConsumerHandle] = {}
        self.on_check_transaction: Callable[[Connection, RemotingCommand], None] | None = None
        """Handles a broker's CHECK_TRANSACTION_STATE (a ``TransactionProducer``'s checker)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._beaten: set[str] = set()
        """Brokers this client has heartbeated (or is heartbeating) as itself."""
        self._first_beats: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False

    def __repr__(self) -> str:
        return f"<ClientInstance {self.client_id} namesrv={';'.join(self.namesrv_addrs)}>"

    # ------------------------------------------------------------------ lifecycle
    async def start(self, *, background: bool = True) -> None:
        """Start the periodic route refresh and heartbeat (``background=False``: neither)."""
        if self._started:
            return
        self._started = True
        if background:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._route_loop(), name=f"routes {self.client_id}"),
                loop.create_task(self._heartbeat_loop(), name=f"heartbeat {self.client_id}"),
            ]
            if self.route_poll_interval_s > 0:
                self._tasks.append(
                    loop.create_task(
                        self._route_version_loop(), name=f"route version {self.client_id}"
                    )
                )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [
            *self._tasks,
            *self._refreshing.values(),
            *self._detecting.values(),
            *self._first_beats,
        ]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def now_ms(self) -> int:
        return self.clock.monotonic_ms()

    def wall_ms(self) -> int:
        return int(self.clock.wall_time_s() * 1000)

    # ------------------------------------------------------------------ requests
    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        expect: Collection[int] = _SUCCESS,
    ) -> RemotingCommand:
        """One request to ``address``; the answer if its code is in ``expect``, else the error."""
        fields = ext_fields or {}
        if self.credentials is not None:
            fields = self.credentials.sign(fields, body, code)
        command = RemotingCommand(code=code, opaque=0, ext_fields=fields, body=body)
        response = await self.pool.request(
            address, command, timeout_s if timeout_s is not None else self.request_timeout_s
        )
        return check_response(response, address, expect)

    async def invoke_oneway(
        self, address: str, code: int, ext_fields: Mapping[str, str], body: bytes = b""
    ) -> None:
        if self.credentials is not None:
            ext_fields = self.credentials.sign(ext_fields, body, code)
        command = RemotingCommand(code=code, opaque=0, ext_fields=ext_fields, body=body)
        await self.pool.oneway(address, command)

    async def invoke_namesrv(
        self,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        expect: Collection[int] = _SUCCESS,
    ) -> RemotingCommand:
        """A request to a NameServer: the current one, then the others in turn if it fails."""
        last: NetworkError | None = None
        n = len(self.namesrv_addrs)
        for _ in range(n):
            address = self.namesrv_addrs[self._namesrv_index % n]
            try:
                return await self.invoke(address, code, ext_fields, body, expect=expect)
            except NetworkError as exc:
                logger.info("name server %s failed (%s); trying the next one", address, exc)
                last = exc
                self._namesrv_index = (self._namesrv_index + 1) % n
        assert last is not None
        raise last

    # ------------------------------------------------------------------ routes
    def cached_route(self, topic: str) -> TopicRouteData | None:
        return self._routes.get(topic)

    async def topic_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The route of ``topic``, from the cache unless ``refresh``.

        Raises TopicNotFoundError (no NameServer knows the topic) or a NetworkError.
        """
        route = self._routes.get(topic)
        if route is not None and not refresh:
            return route
        lock = self._route_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            cached = self._routes.get(topic)
            if cached is not None and cached is not route:  # refreshed while we waited
                return cached
            return await self._fetch_route(topic)

    async def _fetch_route(self, topic: str) -> TopicRouteData:
        response = await self.invoke_namesrv(
            MQRequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext_fields()
        )
        new = TopicRouteData.from_json(response.body)
        old = self._routes.get(topic)
        self._routes[topic] = new
        self._beat_new_brokers()
        if old is not None and old != new:
            logger.info("route of %s changed: %s", topic, _route_summary(new))
            self._masters_changed(_master_changes(old, new))
            self._route_changed(topic)
        return new

    def _masters_changed(self, broker_names: Collection[str]) -> None:
        for name in broker_names:
            for listener in list(self.master_listeners):
                listener(name)

    def learn_master(self, broker_name: str, address: str) -> None:
        """``address``, a member of ``broker_name`` in the cached routes, is its master now (it
        took a write, or said so): patch every cached route so (it takes id 0, the old master
        its id) and tell the listeners. Used when the NameServers cannot say so (all down, or
        not yet told); their next answer replaces the patch."""
        patched: list[str] = []
        for topic, route in list(self._routes.items()):
            datas = list(route.broker_datas)
            for i, data in enumerate(datas):
                if data.broker_name != broker_name or data.master_addr == address:
                    continue
                addrs = dict(data.broker_addrs)
                old_ids = [k for k, v in addrs.items() if v == address]
                if not old_ids:
                    continue
                old_master = addrs.pop(MASTER_ID, None)
                del addrs[old_ids[0]]
                if old_master is not None:
                    addrs[old_ids[0]] = old_master
                addrs[MASTER_ID] = address
                datas[i] = dataclasses.replace(data, broker_addrs=dict(sorted(addrs.items())))
                self._routes[topic] = dataclasses.replace(route, broker_datas=tuple(datas))
                patched.append(topic)
        if patched:
            logger.warning(
                "broker group %s: %s is the master now (it took a write or said so); routes of "
                "%s patched until a NameServer says so",
                broker_name, address, ", ".join(sorted(patched)),
            )  # fmt: skip
            self._masters_changed([broker_name])
            for topic in patched:
                self._route_changed(topic)

    def request_route_refresh(self, topic: str) -> None:
        """Refresh ``topic``'s route soon, in the background (one refresh at a time per topic)."""
        if self._closed or topic in self._refreshing:
            return
        task = asyncio.get_running_loop().create_task(self._refresh_quietly(topic))
        self._refreshing[topic] = task
        task.add_done_callback(lambda _: self._refreshing.pop(topic, None))

    async def _refresh_quietly(self, topic: str) -> None:
        try:
            await self.topic_route(topic, refresh=True)
        except LedgerMQError as exc:
            logger.debug("route refresh of %s failed: %s", topic, exc)

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def _route_changed(self, topic: str) -> None:
        for consumer in list(self.consumers.values()):
            if topic in consumer.topics():
                consumer.on_route_changed(topic)

    def topics_in_use(self) -> set[str]:
        topics = set(self.producer_topics)
        for consumer in self.consumers.values():
            topics.update(consumer.topics())
        return topics

    async def refresh_all_routes(self) -> None:
        """Refresh every cached route. A NameServer that no longer knows a topic does not make
        the client forget its route: a NameServer that has just restarted knows nothing until
        the brokers register again (up to 30 s), and the brokers still serve the topic. The
        route stays until a NameServer has a new one; a topic really deleted is refused by its
        brokers (RocketMQ's client keeps its route the same way). Found by the chaos suite:
        a NameServer restart made every send fail for 20 s."""
        for topic in sorted(self.topics_in_use() | set(self._routes)):
            try:
                await self.topic_route(topic, refresh=True)
            except TopicNotFoundError as exc:
                if topic in self._routes:
                    logger.info("keeping the cached route of %s: %s", topic, exc)
            except LedgerMQError as exc:
                logger.debug("periodic route refresh of %s failed: %s", topic, exc)

    def detect_master(self, broker_name: str, failed: str, window_s: float) -> None:
        """In the background, for up to ``window_s``: while the cached routes still name
        ``failed`` as ``broker_name``'s master, ask its other members whether one is the master
        now, and ``learn_master`` it (one search per group at a time). The first asks come
        soon and then slow down (0.1 s, 0.2 s, ... then every 0.5 s): a master that stops hands
        its leadership over in about 0.2 s, and a group's own writes wait until a client finds
        the new master (a rolling restart's master gap was 0.5-1.04 s with a first ask at 0.5 s)."""
        if self._closed or broker_name in self._detecting:
            return
        task = asyncio.get_running_loop().create_task(
            self._detect_master(broker_name, failed, window_s)
        )
        self._detecting[broker_name] = task
        task.add_done_callback(lambda _: self._detecting.pop(broker_name, None))

    async def _detect_master(self, broker_name: str, failed: str, window_s: float) -> None:
        deadline = self.now_ms() + window_s * 1000
        for asked in itertools.count(1):
            if self.now_ms() >= deadline:
                return
            await asyncio.sleep(min(_DETECT_FIRST_S * asked, _DETECT_EVERY_S))
            members = self._members(broker_name)
            if members is None or members.get(MASTER_ID) != failed:
                return  # a fresh route names another master (or none), or the group is gone
            for address in sorted(set(members.values()) - {failed}):
                try:
                    response = await self.invoke(
                        address, MQRequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=0.5
                    )
                    table = json.loads(response.body or b"{}").get("table") or {}
                except (LedgerMQError, ValueError, AttributeError) as exc:
                    logger.debug("%s of %s: no runtime info (%s)", address, broker_name, exc)
                    continue
                if str(table.get("brokerId")) == str(MASTER_ID):
                    self.learn_master(broker_name, address)
                    return

    def _members(self, broker_name: str) -> Mapping[int, str] | None:
        """``broker_name``'s members in the cached routes (broker id -> address), or None."""
        for route in self._routes.values():
            for data in route.broker_datas:
                if data.broker_name == broker_name:
                    return data.broker_addrs
        return None

    async def poll_route_version(self) -> bool:
        """Ask the NameServer for its route version; refresh every route if it moved. True when
        it moved. A NameServer that does not know the request ends the polling."""
        if self._route_version is None or not (self.topics_in_use() or self._routes):
            return False
        try:
            response = await self.invoke_namesrv(
                MQRequestCode.GET_ROUTE_VERSION,
                expect=(MQResponseCode.SUCCESS, MQResponseCode.REQUEST_CODE_NOT_SUPPORTED),
            )
        except LedgerMQError as exc:
            logger.debug("route version poll failed: %s", exc)
            return False
        if response.code == MQResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            logger.info(
                "the NameServer does not offer route versions; routes are refreshed every %s s",
                self.route_refresh_interval_s,
            )
            self._route_version = None
            return False
        version = response.ext_fields.get("routeVersion", "")
        if version == self._route_version:
            return False
        self._route_version = version
        await self.refresh_all_routes()
        return True

    async def _route_version_loop(self) -> None:
        while self._route_version is not None:
            await asyncio.sleep(self.route_poll_interval_s)
            try:
                await self.poll_route_version()
            except Exception:
                logger.exception("route version poll failed; retrying next period")

    async def _route_loop(self) -> None:
        while True:
            await asyncio.sleep(self.route_refresh_interval_s)
            try:
                await self.refresh_all_routes()
            except Exception:
                logger.exception("route refresh failed; retrying next period")

    # ------------------------------------------------------------------ heartbeats
    def heartbeat_body(self) -> bytes:
        data = {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": g} for g in sorted(self.producer_groups)],
            "consumerDataSet": [self.consumers[g].heartbeat_data() for g in sorted(self.consumers)],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    def broker_addresses(
        self, topics: Collection[str] | None = None, *, masters_only: bool | None = None
    ) -> list[str]:
        """Addresses of the brokers in the cached routes of ``topics`` (default all).

        Masters only when this client has no consumer (RocketMQ's producer-only heartbeat),
        unless ``masters_only`` says.
        """
        if masters_only is None:
            masters_only = not self.consumers
        addresses: set[str] = set()
        for topic, route in self._routes.items():
            if topics is not None and topic not in topics:
                continue
            for data in route.broker_datas:
                for broker_id, addr in data.broker_addrs.items():
                    if broker_id == MASTER_ID or not masters_only:
                        addresses.add(addr)
        return sorted(addresses)

    def register_producer(self, group: str, topics: Iterable[str]) -> bool:
        """Heartbeat as a producer of ``group`` publishing ``topics`` from now on (a gateway's
        producers: the stand-alone proxy's v5 producers, so that masters check their half
        messages back here); True if a group or topic is new."""
        topics = set(topics)
        new = group not in self.producer_groups or not topics <= self.producer_topics
        self.producer_groups.add(group)
        self.producer_topics.update(topics)
        return new

    async def heartbeat_for(
        self, client_id: str, consumer_data: Sequence[Mapping[str, object]], topics: Collection[str]
    ) -> int:
        """HEART_BEAT on behalf of another client (a gateway's: the stand-alone proxy's v5
        consumers, so that the brokers list them as RocketMQ's proxy has them listed):
        ``consumer_data`` its entries of ``consumerDataSet``, to every broker of ``topics``
        (their routes are looked up when not cached); the number that answered."""
        for topic in topics:
            if topic not in self._routes:
                with contextlib.suppress(LedgerMQError):
                    await self.topic_route(topic)
        body = json.dumps(
            {"clientID": client_id, "producerDataSet": [], "consumerDataSet": list(consumer_data)},
            separators=(",", ":"),
        ).encode()
        return await self._heartbeat(body, self.broker_addresses(topics, masters_only=False))

    async def send_heartbeat(self) -> int:
        """Heartbeat every broker of the topics in use; the number that answered."""
        if not self.producer_groups and not self.consumers:
            return 0
        body = self.heartbeat_body()
        addresses = self.broker_addresses(self.topics_in_use())
        self._beaten.update(addresses)
        return await self._heartbeat(body, addresses)

    def _beat_new_brokers(self) -> None:
        """Heartbeat at once a broker that just entered the routes of the topics in use.

        The heartbeat at start reaches no broker (no route is known yet), so without this a
        client would be unknown to a broker until its first periodic heartbeat, up to
        ``heartbeat_interval_s`` (30 s) after its first send: ``admin producer-connection``
        did not list it. Java's client shows up within about a second (its first periodic
        heartbeat comes 1 s after start). Only a started client with background tasks (not an
        ``Admin``), once per broker address."""
        if not self._tasks or self._closed or not (self.producer_groups or self.consumers):
            return
        new = [a for a in self.broker_addresses(self.topics_in_use()) if a not in self._beaten]
        if not new:
            return
        self._beaten.update(new)
        task = asyncio.get_running_loop().create_task(self._first_beat(new))
        self._first_beats.add(task)
        task.add_done_callback(self._first_beats.discard)

    async def _first_beat(self, addresses: Sequence[str]) -> None:
        try:
            await self._heartbeat(self.heartbeat_body(), addresses)
        except Exception:
            logger.exception(
                "heartbeat to new brokers %s failed; the periodic one follows", addresses
            )

    async def _heartbeat(self, body: bytes, addresses: Sequence[str]) -> int:
        results = await asyncio.gather(
            *(self.invoke(a, MQRequestCode.HEART_BEAT, {}, body) for a in addresses),
            return_exceptions=True,
        )
        ok = 0
        for address, result in zip(addresses, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, LedgerMQError):
                    raise result
                logger.debug("heartbeat to %s failed: %s", address, result)
            else:
                ok += 1
        return ok

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            try:
                await self.send_heartbeat()
            except Exception:
                logger.exception("heartbeat failed; retrying next period")

    async def unregister(
        self, producer_group: str = "", consumer_group: str = "", *, client_id: str = ""
    ) -> None:
        """UNREGISTER_CLIENT (35) to every broker of the topics in use; failures are logged.
        ``client_id``: another client's, which this one heartbeats for (``heartbeat_for``)."""
        ext = UnregisterClientRequestHeader(
            client_id or self.client_id, producer_group or None, consumer_group or None
        ).to_ext_fields()
        for address in self.broker_addresses():
            try:
                await self.invoke(address, MQRequestCode.UNREGISTER_CLIENT, ext, timeout_s=1.0)
            except LedgerMQError as exc:
                logger.debug("unregister at %s failed: %s", address, exc)

    # ------------------------------------------------------------------ server -> client
    def _on_server_request(self, conn: Connection, command: RemotingCommand) -> None:
        if command.is_response:
            return  # a late answer of a request that timed out
        if command.code == MQRequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                group = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(
                    command.ext_fields
                ).consumer_group
            except BadRequestError as exc:  # no group of ours: nothing to rebalance
                logger.debug(
                    "broker %s: unreadable NOTIFY_CONSUMER_IDS_CHANGED: %s", conn.address, exc
                )
                group = ""
            consumer = self.consumers.get(group)
            logger.debug("broker %s: consumers of %s changed", conn.address, group)
            if consumer is not None:
                consumer.on_consumer_ids_changed()
            if not command.is_oneway and not conn.closed:
                conn.send(command.response(MQResponseCode.SUCCESS))
            return
        if (
            command.code == MQRequestCode.CHECK_TRANSACTION_STATE
            and self.on_check_transaction is not None
        ):
            self.on_check_transaction(conn, command)
            return
        if command.code == MQRequestCode.GET_CONSUMER_RUNNING_INFO:
            if not command.is_oneway and not conn.closed:
                conn.send(self._running_info(command))
            return
        if not command.is_oneway and not conn.closed:
            conn.send(
                command.response(
                    MQResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    remark=f"request code {command.code} is not supported by this client",
                )
            )

    def _running_info(self, command: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: the named group's consumer describes itself (RocketMQ's
        ``ClientRemotingProcessor.getConsumerRunningInfo``; no jstack: this is not a JVM). The
        question is read with the header the broker writes it with, so a malformed one (no
        ``clientId``, a group that breaks the naming rules) is answered with the broken rule,
        as the broker answers the admin's question."""
        try:
            header = GetConsumerRunningInfoRequestHeader.from_ext_fields(command.ext_fields)
        except BadRequestError as exc:
            return command.response(exc.code, remark=str(exc))
        group = header.consumer_group
        consumer = self.consumers.get(group)
        if consumer is None:
            return command.response(
                MQResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer Group <{group}> not exist in this consumer",
            )
        return command.response(MQResponseCode.SUCCESS, body=consumer.running_info().encode())


def _master_changes(old: TopicRouteData, new: TopicRouteData) -> list[str]:
    """Groups whose master in ``new`` is another than in ``old`` (a group that regained one
    counts; a group that lost it does not: there is nothing new to use)."""
    before = {b.broker_name: b.master_addr for b in old.broker_datas}
    return sorted(
        b.broker_name
        for b in new.broker_datas
        if b.master_addr is not None and before.get(b.broker_name) != b.master_addr
    )


def _route_summary(route: TopicRouteData) -> str:
    groups = ", ".join(
        f"{b.broker_name}={dict(sorted(b.broker_addrs.items()))}" for b in route.broker_datas
    )
    return groups or "(no broker)"
