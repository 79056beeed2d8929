"""``ledgermq ledger ...``: run a ledger replica and talk to a ledger group.

``serve`` takes DLedger's flags (``--group``, ``--id``, ``--peers``, ``--store-base-dir``, also
spelled ``--store-dir``) or a config file of DLedgerConfig keys (``--config``); flags win. The
client commands (``status``, ``append``, ``get``, ``transfer``) need ``--group`` and ``--peers``.
Errors are one line on stderr (main.py), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

from ledgermq.bench.ledger import DEFAULT_WORKLOADS, BenchOptions, run_bench
from ledgermq.cli.serving import EXIT_STORE_FAILED, wait_for_stop
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.errors import ConfigError, LedgerMQError, NetworkError
from ledgermq.ledger.client import AsyncLedgerClient
from ledgermq.ledger.config import build_config, load_properties
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

    from ledgermq.ledger.config import LedgerConfig
    from ledgermq.ledger.requests import Metadata


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ledger = commands.add_parser("ledger", help="run a ledger replica, or use a ledger group")
    sub = ledger.add_subparsers(dest="ledger_command", metavar="LEDGER_COMMAND", required=True)

    serve = sub.add_parser("serve", help="run one replica of a ledger group (until SIGTERM)")
    serve.add_argument("--config", "-c", help="file of DLedgerConfig key=value settings")
    serve.add_argument("--group", "-g", help="ledger group name")
    serve.add_argument("--id", "-i", dest="self_id", help="this replica's id, e.g. n0")
    serve.add_argument("--peers", "-p", help='"n0-host:port;n1-host:port;..." (self included)')
    serve.add_argument(
        "--store-base-dir",
        "--store-dir",
        "-s",
        dest="store_base_dir",
        help="base directory; the log goes to <dir>/dledger-<id>",
    )
    serve.add_argument(
        "--flush",
        choices=["async", "sync"],
        help="async (default): ack after the write, flush every 10 ms; "
        "sync: ack after fsync on a majority",
    )
    serve.add_argument(
        "--preferred-leader-id",
        dest="preferred",
        help="replica(s) that should lead when live, ';'-separated",
    )
    serve.add_argument(
        "--metrics-port", type=int, help="serve Prometheus /metrics on this port (0: any free port)"
    )
    serve.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        dest="heartbeat",
        help="heartBeatTimeIntervalMs (default 200)",
    )
    serve.set_defaults(handler=cmd_serve)

    def client_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--group", "-g", required=True, help="ledger group name")
        p.add_argument("--peers", "-p", required=True, help='"n0-host:port;n1-host:port;..."')
        p.add_argument(
            "--timeout", type=float, default=10.0, help="seconds to keep retrying (default 10)"
        )
        add_tls_args(p)
        return p

    status = client_parser("status", "every replica's view: role, term, leader, indexes")
    status.add_argument("--json", action="store_true", help="print JSON lines")
    status.set_defaults(handler=cmd_status)

    append = client_parser("append", "append entries; prints their indexes")
    append.add_argument("bodies", nargs="*", help="UTF-8 bodies; stdin lines when omitted")
    append.set_defaults(handler=cmd_append)

    get = client_parser("get", "print a committed entry")
    get.add_argument("index", type=int)
    get.add_argument("--raw", action="store_true", help="write the body bytes to stdout as is")
    get.set_defaults(handler=cmd_get)

    transfer = client_parser("transfer", "hand leadership to a named replica")
    transfer.add_argument("--to", required=True, help="the replica id to lead, e.g. n1")
    transfer.set_defaults(handler=cmd_transfer)

    bench = sub.add_parser(
        "bench",
        help="start 3 replicas on loopback and measure appends (and PySyncObj, etcd, and failover)",
    )
    bench.add_argument("--duration", type=float, default=5.0, help="measured seconds per mode")
    bench.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    bench.add_argument("--body-bytes", type=int, default=1024, help="bytes per entry (1024)")
    bench.add_argument(
        "--modes",
        nargs="+",
        metavar="MODE",
        help="subset of: " + ", ".join(sorted({f"{w.mode}-{w.flush}" for w in DEFAULT_WORKLOADS})),
    )
    bench.add_argument("--no-pysyncobj", action="store_true", help="skip the PySyncObj runs")
    bench.add_argument(
        "--no-etcd", action="store_true", help="skip the etcd runs (flush=sync workloads only)"
    )
    bench.add_argument("--failover-trials", type=int, default=5, help="0 to skip (default 5)")
    bench.add_argument("--json", help="write the results to this JSON file")
    bench.set_defaults(handler=cmd_bench)


# ---------------------------------------------------------------------------------- serve
def server_settings(args: argparse.Namespace) -> dict[str, str]:
    """The config file's settings with the flags on top, as DLedgerConfig key names."""
    values = load_properties(args.config) if args.config else {}
    flags = {
        "group": args.group,
        "selfId": args.self_id,
        "peers": args.peers,
        "storeBaseDir": args.store_base_dir,
        "flush": args.flush,
        "preferredLeaderIds": args.preferred,
        "metricsPort": None if args.metrics_port is None else str(args.metrics_port),
        "heartBeatTimeIntervalMs": None if args.heartbeat is None else str(args.heartbeat),
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    return values


def cmd_serve(args: argparse.Namespace) -> int:
    config = build_config(server_settings(args))
    return run(_serve(config))


async def _serve(config: LedgerConfig) -> int:
    server = LedgerServer(config)
    await server.start()
    host = config.address[0]
    print(
        f"ledgermq ledger: replica {config.self_id} of group {config.group} serving on "
        f"{host}:{server.port} (store {config.store_dir}, flush={config.flush}"
        + (f", metrics on :{server.metrics_port}" if server.metrics_port else "")
        + ")",
        flush=True,
    )
    await wait_for_stop(server.wait_closed())
    await server.hand_over_leadership()  # a leader hands over first (at most 2 s)
    await server.close()
    if server.failure is not None:
        print(
            f"ledgermq: error: replica {config.self_id} stopped: its store failed "
            f"({server.failure}); exit status {EXIT_STORE_FAILED}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_STORE_FAILED
    return 0


# ---------------------------------------------------------------------------------- clients
async def _with_client(
    args: argparse.Namespace, work: Any, request_timeout_s: float | None = None
) -> int:
    client = AsyncLedgerClient(
        args.group,
        args.peers,
        retry_timeout_s=args.timeout,
        request_timeout_s=3.0 if request_timeout_s is None else request_timeout_s,
        tls=tls_from(args),
    )
    try:
        result: int = await work(client)
    finally:
        await client.close()
    return result


def cmd_status(args: argparse.Namespace) -> int:
    async def view(client: AsyncLedgerClient, node: str) -> Metadata | str:
        try:
            return await client.metadata(node)
        except NetworkError as exc:
            return f"unreachable ({exc})"

    async def work(client: AsyncLedgerClient) -> int:
        nodes = sorted(client.peers)
        found = await asyncio.gather(*(view(client, node) for node in nodes))
        views = list(zip(nodes, found, strict=True))
        _print_status(views, as_json=args.json)
        return 0 if any(not isinstance(v, str) for _, v in views) else 1

    # An unreachable replica is reported, not waited for: all are asked at once, and each
    # request (connecting included) gets at most 2 s.
    args.timeout = min(args.timeout, 2.0)
    return run(_with_client(args, work, request_timeout_s=args.timeout))


def _print_status(views: list[tuple[str, Metadata | str]], *, as_json: bool) -> None:
    if as_json:
        for node, view in views:
            if isinstance(view, str):
                print(json.dumps({"id": node, "error": view}))
            else:
                print(view.to_json().decode())
        return
    print(
        f"{'id':<6} {'role':<10} {'term':>6} {'leader':<8} {'begin':>10} {'end':>10} "
        f"{'committed':>10}"
    )
    for node, view in views:
        if isinstance(view, str):
            print(f"{node:<6} {view}")
        else:
            print(
                f"{node:<6} {view.role:<10} {view.term:>6} {view.leader or '-':<8} "
                f"{view.begin_index:>10} {view.end_index:>10} {view.committed_index:>10}"
            )


def cmd_append(args: argparse.Namespace) -> int:
    bodies = [b.encode() for b in args.bodies] or [line.rstrip("\n").encode() for line in sys.stdin]
    if not bodies:
        raise LedgerMQError("nothing to append: give bodies as arguments or lines on stdin")

    async def work(client: AsyncLedgerClient) -> int:
        indexes = await client.append_batch(bodies)
        print(" ".join(map(str, indexes)))
        return 0

    return run(_with_client(args, work))


def cmd_get(args: argparse.Namespace) -> int:
    async def work(client: AsyncLedgerClient) -> int:
        entry = await client.get(args.index)
        if args.raw:
            sys.stdout.buffer.write(entry.body)
            sys.stdout.flush()
        else:
            text = entry.body.decode("utf-8", errors="backslashreplace")
            print(f"index={entry.index} term={entry.term} pos={entry.pos} body={text}")
        return 0

    return run(_with_client(args, work))


def cmd_transfer(args: argparse.Namespace) -> int:
    async def work(client: AsyncLedgerClient) -> int:
        await client.transfer_leadership(args.to)
        print(f"{args.to} leads group {args.group}")
        return 0

    with contextlib.suppress(KeyboardInterrupt):
        return run(_with_client(args, work))
    return 130


def cmd_bench(args: argparse.Namespace) -> int:
    workloads = list(DEFAULT_WORKLOADS)
    if args.modes:
        known = {f"{w.mode}-{w.flush}": w for w in DEFAULT_WORKLOADS}
        unknown = [m for m in args.modes if m not in known]
        if unknown:
            raise ConfigError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}")
        workloads = [known[m] for m in args.modes]
    if args.duration <= 0 or args.body_bytes < 0 or args.failover_trials < 0:
        raise ConfigError("--duration must be positive, --body-bytes and --failover-trials >= 0")
    run_bench(
        BenchOptions(
            workloads=workloads,
            body_bytes=args.body_bytes,
            duration_s=args.duration,
            warmup_s=args.warmup,
            pysyncobj=not args.no_pysyncobj,
            etcd=not args.no_etcd,
            failover_trials=args.failover_trials,
            json_path=args.json,
        )
    )
    return 0
