"""NATS JetStream in the peers benchmark: 3 ``nats-server`` processes, one R3 file stream.

An acknowledgement (PubAck) means the message is stored by a majority of the stream's Raft
group; nats-server 2.9 fsyncs every 2 minutes (``sync_interval``) and has no per-ack sync, so it
is compared with LedgerMQ ``ASYNC_FLUSH``. Two load generators: ``nats-py`` (PyPI; in this
process, like our client) and a small Go loader (``go/main.go``) built at run time with
Debian's ``golang-go`` and ``golang-github-nats-io-go-nats-dev``, which tells what NATS does when
the client is not the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from benchmarks.peers.servers import (
    INSTALL_HINT,
    PeerUnavailableError,
    ServerProcess,
    find_binary,
)
from benchmarks.peers.workloads import BODY_BYTES, drive_produce, result_of
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.processes import HOST, free_ports
from ledgermq.bench.stats import LatencyRecorder
from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from benchmarks.peers.workloads import Workload
    from ledgermq.bench.stats import RunResult

__all__ = ["DURABILITY", "GO_SOURCE", "NatsSystem", "build_go_loader"]

DURABILITY: Final = "stored on a majority, fsync every 2 min"
STREAM: Final = "BENCH"
GO_SOURCE: Final = Path(__file__).with_name("go") / "main.go"
GO_PATH: Final = "/usr/share/gocode"
"""Where Debian's golang-*-dev packages put their sources (GOPATH mode, no module download)."""
_START_TIMEOUT_S: Final = 20.0
_SBIN: Final = ("/usr/sbin", "/usr/local/sbin")
_CONSUME_LIMIT_S: Final = 30.0


def build_go_loader(outdir: Path, path: str | None = None) -> Path:
    """Build the Go loader into ``outdir``; PeerUnavailableError (saying what to install) if
    it cannot."""
    go = find_binary("go", path, () if path else ("/usr/lib/go/bin",))
    nats_go = Path(GO_PATH) / "src/github.com/nats-io/nats.go"
    if go is None or not nats_go.is_dir():
        raise PeerUnavailableError(
            "NATS (Go client): skipped, no Go toolchain or nats.go sources "
            "(apt-get install golang-go golang-github-nats-io-go-nats-dev)"
        )
    outdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(GO_SOURCE, outdir / "main.go")
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": GO_PATH,
        "GOCACHE": str(outdir / "cache"),
        "GOFLAGS": "",
    }
    built = subprocess.run(
        [go, "build", "-o", str(outdir / "natsload"), "main.go"],
        cwd=outdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if built.returncode != 0:
        raise PeerUnavailableError(f"NATS (Go client): skipped, the build failed:\n{built.stderr}")
    return outdir / "natsload"


class NatsSystem:
    """A 3-server NATS JetStream cluster with an R3 file stream, driven by ``client``
    (``"nats-py"`` or ``"go"``)."""

    durability: str = DURABILITY
    baseline: str | None = "LedgerMQ ASYNC_FLUSH"

    def __init__(self, client: str, path: str | None = None) -> None:
        if client not in ("nats-py", "go"):
            raise ValueError(f"NATS client must be nats-py or go, not {client!r}")
        self.kind = client
        self.key = f"NATS JetStream R3 ({client})"
        self.client = "nats-py (Python)" if client == "nats-py" else "nats.go 1.22 (Go loader)"
        self._path = path
        self._servers: list[ServerProcess] = []
        self._urls: list[str] = []
        self._loader: Path | None = None
        self._workdir: Path | None = None

    def unavailable(self) -> str | None:
        if find_binary("nats-server", self._path, () if self._path else _SBIN) is None:
            return f"NATS JetStream: skipped, nats-server is not installed ({INSTALL_HINT})"
        if importlib.util.find_spec("nats") is None:  # the Go rows create their stream with it
            return "NATS JetStream: skipped, nats-py is not installed (pip install nats-py)"
        return None

    def start(self, workdir: Path) -> None:
        binary = find_binary("nats-server", self._path, () if self._path else _SBIN)
        if binary is None:
            raise PeerUnavailableError(self.unavailable() or "nats-server is not installed")
        self._workdir = workdir
        if self.kind == "go":
            self._loader = build_go_loader(workdir / "go", self._path)
        ports = free_ports(9)
        clients, monitors, routes = ports[0:3], ports[3:6], ports[6:9]
        route_urls = ", ".join(f"nats-route://{HOST}:{p}" for p in routes)
        for i in range(3):
            conf = workdir / f"n{i}.conf"
            conf.write_text(
                f"server_name: n{i}\n"
                f"listen: {HOST}:{clients[i]}\n"
                f"http: {HOST}:{monitors[i]}\n"
                f"jetstream {{ store_dir: {workdir / f'data{i}'}, max_mem: 1G, max_file: 20G }}\n"
                f"cluster {{ name: peers, listen: {HOST}:{routes[i]}, routes: [{route_urls}] }}\n"
            )
            server = ServerProcess(f"nats-server n{i}", workdir / f"n{i}.log")
            self._servers.append(server)
            server.spawn([binary, "-c", str(conf)], os.environ)
        for server, port in zip(self._servers, clients, strict=True):
            server.wait_port(port, _START_TIMEOUT_S)
        self._urls = [f"nats://{HOST}:{p}" for p in clients]
        asyncio.run(self._create_stream())

    async def _create_stream(self) -> None:
        import nats
        from nats.js.api import StorageType

        deadline = asyncio.get_running_loop().time() + _START_TIMEOUT_S
        nc = await nats.connect(servers=self._urls)
        try:
            js = nc.jetstream()
            while True:  # JetStream needs its meta leader elected first
                try:
                    await js.add_stream(
                        name=STREAM, subjects=["bench.>"], num_replicas=3, storage=StorageType.FILE
                    )
                except Exception as exc:
                    if asyncio.get_running_loop().time() > deadline:
                        tails = "\n".join(f"--- {s.name}\n{s.log_tail()}" for s in self._servers)
                        raise LedgerMQError(f"NATS stream not created: {exc}\n{tails}") from exc
                    await asyncio.sleep(0.25)
                else:
                    return
        finally:
            await nc.close()

    def server_pids(self) -> list[int]:
        return [pid for server in self._servers for pid in server.pids()]

    async def run(self, workload: Workload, duration_s: float) -> RunResult | None:
        meter = CpuMeter(self.server_pids())
        if self.kind == "go":
            return await self._run_go(workload, duration_s, meter)
        return await self._run_py(workload, duration_s, meter)

    # ------------------------------------------------------------------ nats-py
    async def _run_py(self, workload: Workload, duration_s: float, meter: CpuMeter) -> RunResult:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig

        nc = await nats.connect(servers=self._urls)
        try:
            js = nc.jetstream(publish_async_max_pending=65536)
            if workload.consume:
                return await self._consume_py(js, workload, meter, AckPolicy, ConsumerConfig)
            subject = f"bench.{workload.name.replace(' ', '-').replace('@', '').replace('/', '')}"
            body = b"x" * BODY_BYTES
            await js.publish(subject, body)  # warm the connection and the stream

            async def send(count: int) -> None:
                if count == 1:
                    await js.publish(subject, body)
                    return
                futures = [await js.publish_async(subject, body) for _ in range(count)]
                await asyncio.gather(*futures)

            senders: list[Callable[[int], Awaitable[None]]] = [send] * workload.producers
            return await drive_produce(
                self.key, workload, senders, duration_s=duration_s, meter=meter
            )
        finally:
            await nc.close()

    async def _consume_py(
        self, js: Any, workload: Workload, meter: CpuMeter, ack_policy: Any, config: Any
    ) -> RunResult:
        sub = await js.pull_subscribe(
            "bench.>", durable="py-reader", config=config(ack_policy=ack_policy.NONE)
        )
        info = await js.stream_info(STREAM)
        target = int(info.state.messages)
        latencies = LatencyRecorder()
        received = 0
        loop = asyncio.get_running_loop()
        meter.start()
        begin = loop.time()
        while received < target and loop.time() - begin < _CONSUME_LIMIT_S:
            sent = loop.time()
            try:
                msgs = await sub.fetch(256, timeout=2)
            except TimeoutError:
                break
            latencies.record(loop.time() - sent)
            received += len(msgs)
        seconds = loop.time() - begin
        meter.stop()
        return result_of(
            self.key,
            workload,
            messages=received,
            seconds=seconds,
            latencies=latencies,
            meter=meter,
            clients=1,
            batch=256,
            note=f"one pull consumer, fetch 256, {received:,} of {target:,} messages",
        )

    # ------------------------------------------------------------------ Go loader
    async def _run_go(self, workload: Workload, duration_s: float, meter: CpuMeter) -> RunResult:
        assert self._loader is not None
        args = [str(self._loader), "-servers", ",".join(self._urls), "-size", str(BODY_BYTES)]
        if workload.consume:
            target = await self._stream_messages()
            args += ["-consume", str(target), "-duration", f"{_CONSUME_LIMIT_S}s"]
        else:
            subject = f"bench.go{workload.producers}x{workload.batch}"
            args += [
                "-subject", subject,
                "-producers", str(workload.producers),
                "-batch", str(workload.batch),
                "-rate", str(workload.rate or 0),
                "-duration", f"{duration_s}s",
            ]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        summary: dict[str, Any] = {}
        try:
            assert process.stdout is not None
            async for raw in process.stdout:
                line = raw.decode().strip()
                if line == "window-start":
                    meter.start()
                elif line == "window-end":
                    meter.stop()
                elif line.startswith("{"):
                    summary = json.loads(line)
            stderr = await process.stderr.read() if process.stderr else b""
            code = await process.wait()
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if code != 0 or not summary or meter.usage is None:
            raise LedgerMQError(f"the Go loader failed (exit {code}): {stderr.decode()[-500:]}")
        meter.usage = dataclasses.replace(meter.usage, client_s=float(summary["cpu_s"]))
        latencies = LatencyRecorder()  # the loader computed its percentiles itself
        result = result_of(
            self.key,
            workload,
            messages=int(summary["messages"]),
            seconds=float(summary["seconds"]),
            latencies=latencies,
            errors=int(summary["errors"]),
            meter=meter,
            clients=1 if workload.consume else None,
            batch=256 if workload.consume else None,
            note="one pull consumer, fetch 256" if workload.consume else "",
        )
        return dataclasses.replace(
            result,
            p50_ms=float(summary["p50_ms"]),
            p99_ms=float(summary["p99_ms"]),
            max_ms=float(summary["max_ms"]),
        )

    async def _stream_messages(self) -> int:
        import nats

        nc = await nats.connect(servers=self._urls)
        try:
            info = await nc.jetstream().stream_info(STREAM)
            return int(info.state.messages)
        finally:
            await nc.close()

    def close(self) -> None:
        for server in self._servers:
            server.kill()
        self._servers.clear()
