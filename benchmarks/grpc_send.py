"""gRPC send and receive beside remoting: ``python benchmarks/grpc_send.py [--duration S]``.

Starts a NameServer and one 3-replica broker group as real processes on loopback
(``ledgermq.testing.broker_cluster``; each replica with its gRPC door), then measures, with
1 KiB messages, one message per call:

- ``grpc single``: 16 concurrent ``SendMessage`` calls on one HTTP/2 channel to the master's gRPC
  door (our generated stub, ``grpc.aio``; what RocketMQ 5 clients send, without their client
  overhead), queues taken in turn;
- ``grpc sequential``: one call at a time;
- the same two workloads through the remoting door with our Python ``Producer``, for the side by
  side (``benchmarks/broker.py`` has the remoting workloads in full);
- ``grpc receive``: ``--receivers`` loops of ReceiveMessage (POP, batches of 32, 60 s invisible)
  then one AckMessage for the batch, from a topic filled beforehand, each receive and each ack
  a change of the replicated POP state; beside ``remoting pull``, our PullConsumer reading a
  topic filled the same way in batches of 32 for the same time (offsets are the consumer's
  own: no change per batch on the broker).

Each row also has the CPU per acknowledged (send) or consumed (receive) message of the
cluster's processes (replicas and NameServer, summed) and of this process. Prints a table and
writes benchmarks/results/grpc_send.json (``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import logging
import os
import sys
import tempfile
import time
import uuid

import grpc.aio

from ledgermq.bench.broker import (
    ConsumeOptions,
    ProduceOptions,
    fill_topic,
    run_consume,
    run_produce,
)
from ledgermq.bench.cpu import CpuMeter
from ledgermq.bench.stats import LatencyRecorder, RunResult, format_table, write_json
from ledgermq.client import Admin
from ledgermq.proxy.protocol import definition_pb2, service_pb2, service_pb2_grpc
from ledgermq.testing.broker_cluster import BrokerCluster

GROUP = "broker-a"
BODY = b"x" * 1024


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per workload")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each window")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight (single)")
    parser.add_argument("--receivers", type=int, default=4, help="ReceiveMessage loops")
    parser.add_argument(
        "--fill", type=int, default=100_000, help="messages put in the receive topic first"
    )
    parser.add_argument(
        "--json",
        default=os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "results", "grpc_send.json"
        ),
    )
    return parser.parse_args()


def _request(topic: str, queue_id: int) -> service_pb2.SendMessageRequest:
    request = service_pb2.SendMessageRequest()
    message = request.messages.add()
    message.topic.name = topic
    message.body = BODY
    props = message.system_properties
    props.message_id = uuid.uuid4().hex.upper()
    props.message_type = definition_pb2.NORMAL
    props.queue_id = queue_id
    props.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    return request


async def run_grpc_send(
    address: str,
    topic: str,
    *,
    callers: int,
    duration_s: float,
    warmup_s: float,
    mode: str,
    meter: CpuMeter | None = None,
) -> RunResult:
    """``callers`` loops of SendMessage (one message each) to ``address`` for ``duration_s``
    after ``warmup_s``; acknowledgements inside the window count."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = await stub.QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic))
        )
        if route.status.code != definition_pb2.Code.OK:
            raise SystemExit(f"no route of {topic}: {route.status.message}")
        queues = itertools.cycle(sorted({q.id for q in route.message_queues}))
        loop = asyncio.get_running_loop()
        start = loop.time() + warmup_s
        end = start + duration_s
        latencies = LatencyRecorder()
        acked = errors = 0

        async def caller() -> None:
            nonlocal acked, errors
            while loop.time() < end:
                sent = time.perf_counter()
                answer = await stub.SendMessage(_request(topic, next(queues)), timeout=10)
                done = loop.time()
                if answer.status.code != definition_pb2.Code.OK:
                    errors += 1
                    continue
                if start <= done <= end:
                    latencies.record(time.perf_counter() - sent)
                    acked += 1

        async def window() -> None:
            if meter is None:
                return
            await asyncio.sleep(max(0.0, start - loop.time()))
            meter.start()
            await asyncio.sleep(max(0.0, end - loop.time()))
            meter.stop()

        await asyncio.gather(*(caller() for _ in range(callers)), window())
    server_us = client_us = None
    if meter is not None and meter.usage is not None:
        server_us, client_us = meter.usage.per_message_us(acked)
    return RunResult(
        system="ledgermq", mode=mode, clients=callers, batch=1, body_bytes=len(BODY),
        flush="ASYNC_FLUSH", entries=acked, seconds=duration_s,
        entries_per_s=acked / duration_s, p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99), max_ms=latencies.max_ms(), errors=errors,
        server_cpu_us=server_us, client_cpu_us=client_us,
    )  # fmt: skip


RECEIVE_BATCH = 32


async def run_grpc_receive(
    address: str,
    topic: str,
    group: str,
    *,
    receivers: int,
    duration_s: float,
    warmup_s: float,
    meter: CpuMeter | None = None,
) -> RunResult:
    """``receivers`` loops of ReceiveMessage + AckMessage on ``topic`` for ``duration_s`` after
    ``warmup_s``; messages acknowledged inside the window count, latency is receive + ack."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        loop = asyncio.get_running_loop()
        start = loop.time() + warmup_s
        end = start + duration_s
        latencies = LatencyRecorder()
        acked = errors = 0

        def receive_request() -> service_pb2.ReceiveMessageRequest:
            request = service_pb2.ReceiveMessageRequest(batch_size=RECEIVE_BATCH)
            request.group.name = group
            request.message_queue.topic.name = topic
            request.message_queue.id = -1
            request.invisible_duration.FromSeconds(60)
            request.long_polling_timeout.FromSeconds(1)
            return request

        async def receiver() -> None:
            nonlocal acked, errors
            while loop.time() < end:
                began = time.perf_counter()
                handles = [
                    (r.message.system_properties.message_id,
                     r.message.system_properties.receipt_handle)
                    async for r in stub.ReceiveMessage(receive_request(), timeout=10)
                    if r.HasField("message")
                ]  # fmt: skip
                if not handles:
                    continue
                ack = service_pb2.AckMessageRequest(
                    entries=[
                        service_pb2.AckMessageEntry(message_id=m, receipt_handle=h)
                        for m, h in handles
                    ]
                )
                ack.group.name = group
                ack.topic.name = topic
                answer = await stub.AckMessage(ack, timeout=10)
                done = loop.time()
                ok = sum(e.status.code == definition_pb2.Code.OK for e in answer.entries)
                errors += len(handles) - ok
                if start <= done <= end:
                    latencies.record(time.perf_counter() - began)
                    acked += ok

        async def window() -> None:
            if meter is None:
                return
            await asyncio.sleep(max(0.0, start - loop.time()))
            meter.start()
            await asyncio.sleep(max(0.0, end - loop.time()))
            meter.stop()

        await asyncio.gather(*(receiver() for _ in range(receivers)), window())
    server_us = client_us = None
    if meter is not None and meter.usage is not None:
        server_us, client_us = meter.usage.per_message_us(acked)
    return RunResult(
        system="ledgermq", mode="grpc receive", clients=receivers, batch=RECEIVE_BATCH,
        body_bytes=len(BODY), flush="ASYNC_FLUSH", entries=acked, seconds=duration_s,
        entries_per_s=acked / duration_s, p50_ms=latencies.percentile(50),
        p99_ms=latencies.percentile(99), max_ms=latencies.max_ms(), errors=errors,
        note="receive + ack per batch", server_cpu_us=server_us, client_cpu_us=client_us,
    )  # fmt: skip


async def _bench(cluster: BrokerCluster, args: argparse.Namespace) -> list[RunResult]:
    namesrv = cluster.namesrv_addr
    admin = Admin(namesrv)
    await admin.start()
    try:
        for topic in ("GrpcBench", "RemotingBench", "GrpcReceive", "RemotingPull"):
            await admin.create_topic(topic, 8)
            await admin.wait_for_route(topic)
    finally:
        await admin.close()
    master = await asyncio.to_thread(cluster.wait_master, GROUP)
    address = cluster.grpc_address(GROUP, master)
    meter = CpuMeter(cluster.server_pids())
    results = []
    for mode, callers in (("grpc single", args.concurrency), ("grpc sequential", 1)):
        results.append(
            await run_grpc_send(
                address,
                "GrpcBench",
                callers=callers,
                duration_s=args.duration,
                warmup_s=args.warmup,
                mode=mode,
                meter=meter,
            )
        )
    for mode, producers in (("remoting single", args.concurrency), ("remoting sequential", 1)):
        options = ProduceOptions(
            namesrv, "RemotingBench", batch=1, producers=producers,
            duration_s=args.duration, warmup_s=args.warmup, mode=mode,
        )  # fmt: skip
        result = await run_produce(options, meter=meter)
        results.append(dataclasses.replace(result, flush="ASYNC_FLUSH"))
    for topic in ("GrpcReceive", "RemotingPull"):
        await fill_topic(namesrv, topic, args.fill)
    received = await run_grpc_receive(
        address, "GrpcReceive", "bench-receivers", receivers=args.receivers,
        duration_s=args.duration, warmup_s=args.warmup, meter=meter,
    )  # fmt: skip
    results.append(received)
    pulled = await run_consume(
        ConsumeOptions(
            namesrv, "RemotingPull", duration_s=args.duration, pull_batch=RECEIVE_BATCH,
            mode="remoting pull",
        ),
        meter=meter,
    )  # fmt: skip
    results.append(pulled)
    return results


def main() -> int:
    args = _options()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="ledgermq-grpc-bench-") as tmp:
        cluster = BrokerCluster(
            tmp, replicas=3, extra_settings={"mappedFileSizeCommitLog": str(256 << 20)}
        )
        try:
            cluster.wait_routable()
            results = asyncio.run(_bench(cluster, args))
        finally:
            cluster.close()
    print(format_table(results))
    print(
        "server us/msg: CPU (user + kernel) of the 3 replicas and the NameServer, summed, per "
        "acknowledged message; loadgen us/msg: the same for this process"
    )
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    write_json(args.json, results, {"measured_at": time.strftime("%Y-%m-%d %H:%M:%S")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
