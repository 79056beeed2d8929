"""``ledgermq quickstart``: a NameServer and one 3-replica broker group on loopback, in one command.

Everything runs in this process (one event loop), with its data under a local folder
(``./ledgermq-data`` by default; delete it to start afresh). Once the group has elected a
master, the quickstart sends a few messages through the Python client and reads them back, so a
broken install shows at once; then it prints the addresses and serves until Ctrl-C (or for
``--run-for`` seconds). Any RocketMQ client can use it: point it at the NameServer address.

Ports follow RocketMQ's DLedger sample configs: NameServer 9876, brokers 30911 / 30921 / 30931,
ledger replicas 40911 / 40912 / 40913, gRPC 8081 / 8082 / 8083 (RocketMQ proxy's), the web
console on 8080 (RocketMQ Dashboard's) and each replica's Prometheus ``/metrics`` on 5557 / 5558 /
5559 (RocketMQ exporter's 5557 first; ``deploy/prometheus/prometheus.yml`` scrapes them);
``--port-offset`` moves them all (and is refused when a port would leave 1..65535). The console
is started only when its extra is installed (``pip install 'ledgermq[console]'``); without it,
or when its port is taken, the quickstart says so in one line and runs without it, and so for
the metrics ports (``--no-metrics`` leaves them out): the brokers are what it is for. Any other
port already in use is an error that names the server it was for and says that
``--port-offset`` moves the ports.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.config import BrokerConfig
from ledgermq.broker.server import BrokerServer
from ledgermq.broker.state.topics import AUTO_CREATE_TOPIC
from ledgermq.cli.secure_setup import SecureSetup, prepare_secure
from ledgermq.cli.serving import address_in_use, wait_for_stop
from ledgermq.client import Admin, Producer, PullConsumer
from ledgermq.console import MISSING_EXTRA, console_available
from ledgermq.errors import LedgerMQError, NetworkError
from ledgermq.namesrv import NameServer, NameServerConfig
from ledgermq.net import run
from ledgermq.net.tls import TlsServerConfig
from ledgermq.proxy.local import GrpcDoor
from ledgermq.store.backup import detect_segment_sizes
from ledgermq.store.entry_format import INDEX_UNIT_SIZE

if TYPE_CHECKING:
    from ledgermq.console.server import ConsoleServer

DEFAULT_DIR: Final = "ledgermq-data"
HOST: Final = "127.0.0.1"
NODES: Final = ("n0", "n1", "n2")
QUICKSTART_DATA_SEGMENT_BYTES: Final = 16 << 20
"""16 MiB commit-log files: the smallest size that still holds four messages of the default
``maxMessageSize`` (4 MiB), so nothing a client may send is refused, while retention frees space
in 16 MiB steps and recovery scans at most 48 MiB (its last three files). The files are sparse
either way (blocks in proportion to the data); DLedger's 1 GiB stays the broker's default."""
QUICKSTART_INDEX_SEGMENT_BYTES: Final = 4 << 20
"""4 MiB ledger index files: 131,072 entries of 32 bytes."""
_CHECK_TOPIC: Final = "QuickstartTopic"
_CHECK_MESSAGES: Final = 100
NAMESRV_PORT: Final = 9876
BROKER_PORTS: Final = (30911, 30921, 30931)
LEDGER_PORTS: Final = (40911, 40912, 40913)
CONSOLE_PORT: Final = 8080
GRPC_PORTS: Final = (8081, 8082, 8083)
"""gRPC ports (RocketMQ 5 clients): 8081, RocketMQ proxy's default, for the first replica."""
METRICS_PORTS: Final = (5557, 5558, 5559)
"""Each replica's Prometheus ``/metrics`` (its broker's and ledger's series and the process
figures): 5557, RocketMQ exporter's default, for the first replica. The NameServer and the
console run in this process, so these process figures are theirs too."""
_ALL_PORTS: Final = (
    NAMESRV_PORT, *BROKER_PORTS, *LEDGER_PORTS, CONSOLE_PORT, *GRPC_PORTS, *METRICS_PORTS,
)  # fmt: skip
MIN_PORT_OFFSET: Final = 1 - min(_ALL_PORTS)
MAX_PORT_OFFSET: Final = 65535 - max(_ALL_PORTS)
"""Every port moved by ``--port-offset`` must stay a TCP port (1..65535): a larger one would
wrap around in the kernel while the printed addresses said otherwise."""


def port_offset(text: str) -> int:
    """``--port-offset``: an integer that keeps every quickstart port within 1..65535."""
    try:
        offset = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not MIN_PORT_OFFSET <= offset <= MAX_PORT_OFFSET:
        raise argparse.ArgumentTypeError(
            f"{offset} would move the ports ({min(_ALL_PORTS)}..{max(_ALL_PORTS)}) to "
            f"{min(_ALL_PORTS) + offset}..{max(_ALL_PORTS) + offset}, outside 1..65535; "
            f"use an offset between {MIN_PORT_OFFSET} and {MAX_PORT_OFFSET}"
        )
    return offset


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "quickstart",
        help="run a NameServer and a 3-replica broker group on loopback (until Ctrl-C)",
    )
    parser.add_argument(
        "--dir", default=DEFAULT_DIR, help=f"data folder (default: ./{DEFAULT_DIR})"
    )
    parser.add_argument(
        "--port-offset",
        type=port_offset,
        default=0,
        help=f"add this to every port, {MIN_PORT_OFFSET}..{MAX_PORT_OFFSET} (default: 0)",
    )
    parser.add_argument(
        "--flush",
        choices=["ASYNC_FLUSH", "SYNC_FLUSH"],
        default="ASYNC_FLUSH",
        help="flushDiskType of the brokers (default: ASYNC_FLUSH)",
    )
    parser.add_argument(
        "--no-console",
        dest="console",
        action="store_false",
        help=f"do not start the web console (port {CONSOLE_PORT} plus the offset)",
    )
    parser.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="do not serve the replicas' Prometheus /metrics (ports "
        f"{'/'.join(map(str, METRICS_PORTS))} plus the offset)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="ACL, TLS on every port and peer authentication, with keys and certificates "
        "made in the data folder (needs the openssl command)",
    )
    parser.add_argument(
        "--run-for",
        type=float,
        default=None,
        help="stop after this many seconds, for scripts (default: serve until Ctrl-C)",
    )
    parser.set_defaults(handler=cmd_quickstart)


def cmd_quickstart(args: argparse.Namespace) -> int:
    data_dir = os.path.abspath(args.dir)
    os.makedirs(data_dir, exist_ok=True)
    return run(_quickstart(args, data_dir))


def broker_configs(
    data_dir: str,
    port_offset: int = 0,
    flush: str = "ASYNC_FLUSH",
    secure: SecureSetup | None = None,
) -> list[BrokerConfig]:
    """The three replicas of group ``broker-a``, as RocketMQ's conf/dledger samples; with
    ``secure``, with the ACL, TLS and the group secret on."""
    security: dict[str, Any] = {}
    if secure is not None:
        security = {
            "acl_enable": True,
            "acl_file_path": str(secure.acl_file),
            "acl_access_key": secure.admin.access_key,
            "acl_secret_key": secure.admin.secret_key,
            "dleger_peer_secret": secure.peer_secret,
            "tls": secure.broker_tls_settings(),
        }
    namesrv = f"{HOST}:{NAMESRV_PORT + port_offset}"
    peers = {node: (HOST, LEDGER_PORTS[i] + port_offset) for i, node in enumerate(NODES)}
    configs = [
        BrokerConfig(
            broker_cluster_name="RaftCluster",
            broker_name="broker-a",
            broker_ip1=HOST,
            listen_port=BROKER_PORTS[i] + port_offset,
            grpc_server_port=GRPC_PORTS[i] + port_offset,
            namesrv_addr=(namesrv,),
            store_path_root_dir=os.path.join(data_dir, node),
            dleger_peers=peers,
            dleger_self_id=node,
            flush_disk_type=flush,
            mapped_file_size_commit_log=QUICKSTART_DATA_SEGMENT_BYTES,
            index_file_size=QUICKSTART_INDEX_SEGMENT_BYTES,
            **security,
        )
        for i, node in enumerate(NODES)
    ]
    return [_with_segment_sizes(config) for config in configs]


def _with_segment_sizes(config: BrokerConfig) -> BrokerConfig:
    """``config`` with the segment sizes of the replica's existing ledger store, if it has one.

    A data folder made by an earlier quickstart (64 MiB files) keeps opening: the sizes of a
    store cannot change over its life.
    """
    store = config.ledger_config().store_dir
    if not os.path.isdir(os.path.join(store, "data")):
        return config
    data_bytes, index_entries = detect_segment_sizes(store)
    return dataclasses.replace(
        config,
        mapped_file_size_commit_log=data_bytes,
        index_file_size=index_entries * INDEX_UNIT_SIZE,
    )


async def _quickstart(args: argparse.Namespace, data_dir: str) -> int:
    # The replicas start one after another in this process, so the first ones cannot reach
    # the later ones for a moment; that is expected here, not worth a warning.
    peer_log = logging.getLogger("ledgermq.net.peer")
    level = peer_log.level
    peer_log.setLevel(logging.ERROR)
    try:
        return await _serve_quickstart(args, data_dir)
    finally:
        peer_log.setLevel(level)  # run in-process (tests): leave the logging as it was


async def _serve_quickstart(args: argparse.Namespace, data_dir: str) -> int:
    secure = prepare_secure(data_dir) if args.secure else None
    namesrv = NameServer(
        NameServerConfig(
            listen_host=HOST,
            listen_port=NAMESRV_PORT + args.port_offset,
            acl_enable=secure is not None,
            acl_path=str(secure.acl_file) if secure is not None else None,
            tls=secure.server_tls() if secure is not None else TlsServerConfig(),
        )
    )
    configs = broker_configs(data_dir, args.port_offset, args.flush, secure)
    brokers = [BrokerServer(c, grpc_door=GrpcDoor) for c in configs]
    clients: dict[str, Any] = (
        {} if secure is None else {"credentials": secure.admin, "tls": secure.client_tls()}
    )
    started = time.perf_counter()
    console: ConsoleServer | None = None
    try:
        try:
            await namesrv.start()
            for broker in brokers:
                await broker.start()
        except NetworkError as exc:
            if not address_in_use(exc):
                raise
            raise LedgerMQError(
                f"{exc} ({_port_owner(exc.address, args.port_offset)}); another process uses "
                f"it (an earlier quickstart?): stop it, or move every quickstart port with "
                f"--port-offset N (now {args.port_offset})"
            ) from exc
        namesrv_addr = f"{HOST}:{namesrv.port}"
        master = await _wait_for_master(brokers, 15.0)
        elected_s = time.perf_counter() - started
        await _wait_for_auto_create_route(namesrv_addr, 15.0, clients)
        sent_s, received_s = await _self_check(namesrv_addr, clients)
        console, console_line = await _start_console(args, namesrv_addr, clients)
        metrics_line = _serve_metrics(args, brokers)
        print(f"LedgerMQ quickstart: data in {data_dir}")
        print(f"  NameServer      {namesrv_addr}")
        for broker in brokers:
            role = "master" if broker is master else "slave"
            ledger_host, ledger_port = broker.config.ledger_config().address
            print(
                f"  broker-a {broker.config.dleger_self_id}    {broker.address}  ({role}; "
                f"ledger {ledger_host}:{ledger_port}; gRPC {broker.grpc_address})"
            )
        print(f"  Console         {console_line}")
        print(f"  Metrics         {metrics_line}")
        print(
            f"  master elected in {elected_s:.2f} s; self-check: {_CHECK_MESSAGES} messages sent "
            f"in {sent_s * 1000:.0f} ms and read back in {received_s * 1000:.0f} ms"
        )
        if secure is not None:
            print(
                f"  Security        ACL, TLS on every port, peer authentication; keys, "
                f"certificates and plain_acl.yml in {secure.directory}"
            )
            print(
                f"Use: export LEDGERMQ_CREDENTIALS_FILE={secure.directory / 'app.yml'} "
                f"LEDGERMQ_TLS_CA={secure.ca}"
            )
            print(
                f"     (admin commands: LEDGERMQ_CREDENTIALS_FILE={secure.directory / 'admin.yml'})"
            )
        print(f'Try: ledgermq produce -n "{namesrv_addr}" -t Demo hello')
        print(
            f'     ledgermq consume -n "{namesrv_addr}" -t Demo -g demo-group\n'
            f'     ledgermq proxy -n "{namesrv_addr}" --listen {HOST}:'
            f"{GRPC_PORTS[-1] + 1 + args.port_offset}  (one gRPC address across failovers)"
        )
        print("Serving until Ctrl-C." if args.run_for is None else f"Serving for {args.run_for} s.")
        await wait_for_stop(*(b.ledger.wait_closed() for b in brokers), timeout_s=args.run_for)
    finally:
        if console is not None:
            with contextlib.suppress(Exception):
                await console.close()
        for broker in brokers:
            with contextlib.suppress(Exception):
                await broker.close()
        await namesrv.close()
    return 0


async def _start_console(
    args: argparse.Namespace, namesrv_addr: str, clients: dict[str, Any]
) -> tuple[ConsoleServer | None, str]:
    """The web console on ``CONSOLE_PORT`` plus the offset, and the line that tells where it
    is, or why it is not there (not wanted, its extra not installed, its port taken)."""
    if not args.console:
        return None, "not started (--no-console)"
    if not console_available():
        return None, f"not started: {MISSING_EXTRA}"
    from ledgermq.console.link import ClusterLink  # noqa: PLC0415 - the optional extra
    from ledgermq.console.server import ConsoleServer  # noqa: PLC0415

    # an ACL cluster's console asks each visitor for an admin account rather than acting for
    # anyone who opens it with the quickstart's: only the TLS settings are passed
    server = ConsoleServer(
        ClusterLink(namesrv_addr, tls=clients.get("tls")), HOST, CONSOLE_PORT + args.port_offset
    )
    try:
        await server.start()
    except NetworkError as exc:
        return None, f"not started: {exc} (--port-offset moves it; --no-console leaves it out)"
    if "credentials" in clients:
        return server, f"{server.url} (sign in with the admin account of secure/admin.yml)"
    return server, server.url


def _serve_metrics(args: argparse.Namespace, brokers: list[BrokerServer]) -> str:
    """Each replica's ``/metrics`` on ``METRICS_PORTS`` plus the offset, and the line that
    lists their URLs, or says why they are not there (not wanted, a port taken)."""
    if not args.metrics:
        return "not served (--no-metrics)"
    urls = []
    for broker, port in zip(brokers, METRICS_PORTS, strict=True):
        endpoint = broker.ledger.metrics.endpoint
        try:
            endpoint.serve(HOST, port + args.port_offset)
        except NetworkError as exc:
            for served in brokers:
                served.ledger.metrics.close()
            return f"not served: {exc} (--port-offset moves it; --no-metrics leaves them out)"
        urls.append(endpoint.url)
    if args.secure:  # say so: "TLS on every port" is not true of these
        return "  ".join(urls) + "  (plain HTTP on loopback: /metrics has no TLS or sign-in)"
    return "  ".join(urls)


def _port_owner(address: str | None, offset: int) -> str:
    """Which quickstart server a port of ``address`` belongs to, for the port-in-use error."""
    port = int(address.rpartition(":")[2]) if address else -1
    owners = {NAMESRV_PORT + offset: "the NameServer's port", CONSOLE_PORT + offset: "the console"}
    for i, node in enumerate(NODES):
        owners[BROKER_PORTS[i] + offset] = f"the remoting port of broker-a {node}"
        owners[LEDGER_PORTS[i] + offset] = f"the ledger port of broker-a {node}"
        owners[GRPC_PORTS[i] + offset] = f"the gRPC port of broker-a {node}"
    return owners.get(port, "a quickstart port")


async def _wait_for_master(brokers: list[BrokerServer], timeout_s: float) -> BrokerServer:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        for broker in brokers:
            if broker.state is not None and broker.state.is_master:
                return broker
        await asyncio.sleep(0.02)
    raise LedgerMQError(f"no broker became master within {timeout_s:.0f} s")


async def _wait_for_auto_create_route(
    namesrv_addr: str, timeout_s: float, clients: dict[str, Any]
) -> None:
    """Until the NameServer routes TBW102 to a master: a new master creates it and registers
    just after it is elected, and producers need it to create topics on first send."""
    admin = Admin(namesrv_addr, **clients)
    await admin.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while loop.time() < deadline:
            with contextlib.suppress(LedgerMQError):
                route = await admin.topic_route(AUTO_CREATE_TOPIC)
                if any(b.master_addr for b in route.broker_datas):
                    return
            await asyncio.sleep(0.05)
    finally:
        await admin.close()
    raise LedgerMQError(f"the master did not register with the NameServer in {timeout_s:.0f} s")


async def _self_check(namesrv_addr: str, clients: dict[str, Any]) -> tuple[float, float]:
    """Send messages and read them back through the client: proof that the install works."""
    producer = Producer("quickstart-producer", namesrv_addr, **clients)
    consumer = PullConsumer("quickstart-consumer", namesrv_addr, **clients)
    await producer.start()
    await consumer.start()
    try:
        started = time.perf_counter()
        bodies = {b"quickstart message %d" % i for i in range(_CHECK_MESSAGES)}
        await asyncio.gather(*(producer.send(_CHECK_TOPIC, body) for body in bodies))
        sent_s = time.perf_counter() - started
        started = time.perf_counter()
        received: set[bytes] = set()
        for queue in await consumer.fetch_queues(_CHECK_TOPIC):
            offset = await consumer.min_offset(queue)
            high = await consumer.max_offset(queue)
            while offset < high:
                result = await consumer.pull(queue, offset, max_nums=256)
                received.update(m.body for m in result.messages)
                offset = result.next_begin_offset
        received_s = time.perf_counter() - started
    finally:
        await producer.shutdown()
        await consumer.shutdown()
    missing = bodies - received
    if missing:
        raise LedgerMQError(f"self-check: {len(missing)} sent messages were not read back")
    return sent_s, received_s
