"""RabbitMQ quorum queues in the peers benchmark: 3 nodes on one host, one quorum queue.

A publisher confirm on a quorum queue is sent once the message is fsynced on a majority of the
queue's Raft members, so it is compared with LedgerMQ ``SYNC_FLUSH``. The nodes follow the
recipe for several nodes on one host: a private ``HOME`` (one ``.erlang.cookie`` for the nodes
and ``rabbitmqctl``), our own ``epmd`` on a free port (started in the foreground, so it is one of
our processes rather than a daemon that outlives the run), ports, data and log directories per
node, no plugins. Node 1 starts, nodes 2 and 3 start and join it (``stop_app``, ``join_cluster``,
``start_app``). Everything started carries a marker in its environment and is swept by it on
close, whatever ``rabbitmqctl`` or Erlang forked.

Load: aio-pika (in this process, like our client) with publisher confirms, one channel per
producer. A "batch" is ``batch`` publishes whose confirms are awaited together, not an AMQP
batch (AMQP 0-9-1 has none).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import subprocess
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers.servers import (
    MARKER_VARIABLE,
    PeerUnavailableError,
    ServerProcess,
    find_binary,
    kill_marked,
    marked_pids,
    new_mark,
)
from benchmarks.peers.workloads import BODY_BYTES, drive_produce, result_of
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.processes import HOST, free_ports
from ledgermq.bench.stats import LatencyRecorder
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from benchmarks.peers.workloads import Workload
    from ledgermq.bench.stats import RunResult

__all__ = ["DURABILITY", "QUEUE", "RabbitSystem"]

DURABILITY: Final = "fsynced on a majority"
QUEUE: Final = "bench"
RABBIT_SCRIPTS: Final = "/usr/lib/rabbitmq/bin"
"""Debian's scripts that run as the calling user (``/usr/sbin``'s wrappers switch to the
``rabbitmq`` user and its system-wide node)"""
INSTALL_LINE: Final = "apt-get install rabbitmq-server"
_NODES: Final = 3
_START_TIMEOUT_S: Final = 60.0
_CTL_TIMEOUT_S: Final = 60.0
_CONSUME_LIMIT_S: Final = 30.0
_PREFETCH: Final = 256
_ACK_EVERY: Final = 128


class RabbitSystem:
    """A 3-node RabbitMQ cluster with one quorum queue, driven by aio-pika."""

    key: str = "RabbitMQ quorum (aio-pika)"
    client: str = "aio-pika (Python), publisher confirms"
    durability: str = DURABILITY
    baseline: str | None = "LedgerMQ SYNC_FLUSH"

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._servers: list[ServerProcess] = []
        self._env: dict[str, str] = {}
        self._amqp_ports: list[int] = []
        self._mark = ""
        self._workdir: Path | None = None

    def _scripts(self) -> tuple[str, str, str] | None:
        """(rabbitmq-server, rabbitmqctl, epmd) or None when one is missing."""
        extra = () if self._path else (RABBIT_SCRIPTS,)
        server = find_binary("rabbitmq-server", self._path or RABBIT_SCRIPTS, ())
        ctl = find_binary("rabbitmqctl", self._path or RABBIT_SCRIPTS, ())
        epmd = find_binary("epmd", self._path, extra)
        if server is None or ctl is None or epmd is None:
            return None
        return server, ctl, epmd

    def unavailable(self) -> str | None:
        if self._scripts() is None:
            return f"RabbitMQ quorum: skipped, rabbitmq-server is not installed ({INSTALL_LINE})"
        if importlib.util.find_spec("aio_pika") is None:
            return "RabbitMQ quorum: skipped, aio-pika is not installed (pip install aio-pika)"
        return None

    # ------------------------------------------------------------------ cluster
    def start(self, workdir: Path) -> None:
        scripts = self._scripts()
        if scripts is None:
            raise PeerUnavailableError(self.unavailable() or "rabbitmq-server is not installed")
        server_script, ctl, epmd = scripts
        self._workdir = workdir
        self._mark = new_mark()
        home = workdir / "home"
        home.mkdir(parents=True)
        cookie = home / ".erlang.cookie"
        cookie.write_text("LEDGERMQPEERSBENCH")
        cookie.chmod(0o400)
        plugins = workdir / "enabled_plugins"
        plugins.write_text("[].\n")
        (workdir / "rabbitmq-env.conf").write_text("")
        (workdir / "rabbitmq.conf").write_text("")
        epmd_port, *ports = free_ports(1 + 2 * _NODES)
        self._amqp_ports = ports[:_NODES]
        dist_ports = ports[_NODES:]
        ctl_base = _free_range(10)
        self._env = {
            **os.environ,
            MARKER_VARIABLE: self._mark,
            "HOME": str(home),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": HOST,
            "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
            "RABBITMQ_CTL_DIST_PORT_MIN": str(ctl_base),
            "RABBITMQ_CTL_DIST_PORT_MAX": str(ctl_base + 9),
        }
        daemon = ServerProcess("epmd", workdir / "epmd.log")
        self._servers.append(daemon)
        daemon.spawn([epmd, "-port", str(epmd_port), "-address", HOST], self._env)
        daemon.wait_port(epmd_port, _START_TIMEOUT_S)
        for i in range(_NODES):
            node = ServerProcess(f"rabbit{i + 1}", workdir / f"rabbit{i + 1}.log")
            self._servers.append(node)
            node.spawn([server_script], self._node_env(i, dist_ports[i]))
            if i == 0:  # the others join it: it must be up first
                node.wait_port(self._amqp_ports[0], _START_TIMEOUT_S)
        for i in range(1, _NODES):
            self._servers[i + 1].wait_port(self._amqp_ports[i], _START_TIMEOUT_S)
            node_name = _node_name(i)
            for command in (["stop_app"], ["join_cluster", _node_name(0)], ["start_app"]):
                self._ctl(ctl, node_name, command)
        for i in range(_NODES):
            self._servers[i + 1].wait_port(self._amqp_ports[i], _START_TIMEOUT_S)
        asyncio.run(self._declare_queue())

    def _node_env(self, index: int, dist_port: int) -> dict[str, str]:
        assert self._workdir is not None
        base = self._workdir / f"rabbit{index + 1}"
        return {
            **self._env,
            "RABBITMQ_NODENAME": _node_name(index),
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(self._amqp_ports[index]),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        }

    def _ctl(self, ctl: str, node: str, command: list[str]) -> None:
        try:
            done = subprocess.run(
                [ctl, "-n", node, *command],
                env=self._env,
                capture_output=True,
                text=True,
                check=False,
                timeout=_CTL_TIMEOUT_S,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise LedgerMQError(f"rabbitmqctl -n {node} {' '.join(command)} timed out") from exc
        if done.returncode != 0:
            raise LedgerMQError(
                f"rabbitmqctl -n {node} {' '.join(command)} failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-500:]}\n{self._tails()}"
            )

    def _tails(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.log_tail()}" for s in self._servers)

    def _url(self, index: int = 0) -> str:
        return f"amqp://guest:guest@{HOST}:{self._amqp_ports[index]}/"

    async def _declare_queue(self) -> None:
        import aio_pika

        connection = await aio_pika.connect(self._url())
        try:
            channel = await connection.channel()
            await channel.declare_queue(
                QUEUE,
                durable=True,
                arguments={"x-queue-type": "quorum", "x-quorum-initial-group-size": _NODES},
            )
        except Exception as exc:
            raise LedgerMQError(
                f"RabbitMQ quorum queue not declared: {exc}\n{self._tails()}"
            ) from exc
        finally:
            await connection.close()

    def server_pids(self) -> list[int]:
        """Every process of the cluster: the nodes' sessions (beam.smp, erl_child_setup,
        inet_gethost) and epmd; the marker also finds what left its session."""
        pids = {pid for server in self._servers for pid in server.pids()}
        if self._mark:
            pids.update(marked_pids(self._mark))
        pids.discard(os.getpid())
        return sorted(pids)

    # ------------------------------------------------------------------ workloads
    async def run(self, workload: Workload, duration_s: float) -> RunResult | None:
        import aio_pika

        meter = CpuMeter(self.server_pids())
        connection = await aio_pika.connect(self._url())
        try:
            if workload.consume:
                return await self._consume(connection, workload, meter)
            body = b"x" * BODY_BYTES
            channels = [
                await connection.channel(publisher_confirms=True) for _ in range(workload.producers)
            ]

            def sender(channel: Any) -> Callable[[int], Awaitable[None]]:
                exchange = channel.default_exchange

                async def send(count: int) -> None:
                    if count == 1:
                        await exchange.publish(aio_pika.Message(body), routing_key=QUEUE)
                        return
                    await asyncio.gather(
                        *(
                            exchange.publish(aio_pika.Message(body), routing_key=QUEUE)
                            for _ in range(count)
                        )
                    )

                return send

            senders = [sender(channel) for channel in channels]
            await senders[0](1)  # warm the connection and the queue
            return await drive_produce(
                self.key, workload, senders, duration_s=duration_s, meter=meter
            )
        finally:
            await connection.close()

    async def _consume(self, connection: Any, workload: Workload, meter: CpuMeter) -> RunResult:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=_PREFETCH)
        queue = await channel.declare_queue(QUEUE, passive=True)
        target = int(queue.declaration_result.message_count)
        latencies = LatencyRecorder()  # no per-send latency for a push consumer
        received = 0
        done = asyncio.Event()
        if target == 0:
            done.set()

        async def on_message(message: Any) -> None:
            nonlocal received
            received += 1
            if received % _ACK_EVERY == 0 or received >= target:
                await message.ack(multiple=True)
            if received >= target:
                done.set()

        loop = asyncio.get_running_loop()
        meter.start()
        begin = loop.time()
        tag = await queue.consume(on_message)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), _CONSUME_LIMIT_S)
        seconds = loop.time() - begin
        meter.stop()
        await queue.cancel(tag)
        return result_of(
            self.key,
            workload,
            messages=received,
            seconds=seconds,
            latencies=latencies,
            meter=meter,
            clients=1,
            batch=_PREFETCH,
            note=(
                f"one consumer, prefetch {_PREFETCH}, acks every {_ACK_EVERY}, "
                f"{received:,} of {target:,} messages"
            ),
        )

    def close(self) -> None:
        for server in reversed(self._servers):
            server.kill()
        self._servers.clear()
        if self._mark:
            kill_marked(self._mark)


def _node_name(index: int) -> str:
    return f"rabbit{index + 1}@localhost"


def _free_range(count: int) -> int:
    """The first of ``count`` consecutive ports free right now (for ``rabbitmqctl``'s own
    distribution port, which it picks from a range)."""
    import socket

    for _ in range(50):
        (base,) = free_ports(1)
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind((HOST, port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return base
    raise LedgerMQError(f"no {count} consecutive free ports on {HOST}")
