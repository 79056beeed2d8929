"""``ledgermq bench produce | consume``: throughput and latency against a running cluster.

(``ledgermq ledger bench`` measures the ledger alone, starting its own replicas;
``python benchmarks/broker.py`` starts a whole cluster and runs every workload of the README;
``ledgermq bench peers`` starts LedgerMQ and the peers that are installed, NATS JetStream first,
and runs those workloads side by side: its code is the clone's ``benchmarks/peers``, not part of
the installed package, so an installed ``ledgermq`` says in one line that it runs from a clone.)
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Final, Protocol, cast

from ledgermq.bench.broker import ConsumeOptions, ProduceOptions, run_consume, run_produce
from ledgermq.bench.checkout import clone_has, import_from_clone
from ledgermq.bench.stats import Progress, format_table, write_json
from ledgermq.cli.credentials_args import add_credential_args, credentials_from
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.net import run

if TYPE_CHECKING:
    from ledgermq.bench.stats import RunResult

_PEERS_MODULE: Final = "benchmarks.peers.run"
_PEERS: Final = "Peer benchmarks (ledgermq bench peers)"


class _PeersRun(Protocol):
    """What the CLI uses of the clone's ``benchmarks.peers.run``."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run_from_args(self, args: argparse.Namespace) -> int: ...


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser("bench", help="measure produce / consume on a running cluster")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH_COMMAND", required=True)
    for name, help_text in (
        ("produce", "send for a while; TPS and latency p50 / p99 / max"),
        ("consume", "read a topic from its start as fast as possible; TPS"),
    ):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument(
            "-n",
            "--namesrv-addr",
            default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
            help="NameServers (default: $NAMESRV_ADDR or 127.0.0.1:9876)",
        )
        add_credential_args(parser)
        add_tls_args(parser)
        parser.add_argument("-t", "--topic", default="BenchTopic", help="the topic")
        parser.add_argument("--duration", type=float, default=10.0, help="seconds to measure")
        parser.add_argument("--json", help="also write the result to this JSON file")
        if name == "produce":
            parser.add_argument("--size", type=int, default=1024, help="body bytes")
            parser.add_argument("--batch", type=int, default=1, help="messages per send")
            parser.add_argument("--producers", type=int, default=16, help="sends in flight")
            parser.add_argument("--rate", type=float, help="offer this many messages/s")
            parser.set_defaults(handler=cmd_bench_produce)
        else:
            parser.add_argument("--pull-batch", type=int, default=256, help="messages per pull")
            parser.add_argument("--max", type=int, help="stop after this many messages")
            parser.set_defaults(handler=cmd_bench_consume)
    help_text = (
        "LedgerMQ side by side with NATS JetStream and other Raft-replicated peers "
        "(starts them all on loopback; peers not installed are skipped; from a clone)"
    )
    if clone_has(_PEERS_MODULE):
        peers = sub.add_parser("peers", help=help_text)
        _peers_run().add_arguments(peers)
    else:
        # an installed package: whatever the words, cmd_bench_peers says where the command runs
        peers = sub.add_parser("peers", help=help_text, add_help=False, prefix_chars="\0")
        peers.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    peers.set_defaults(handler=cmd_bench_peers)


def _peers_run() -> _PeersRun:
    return cast("_PeersRun", import_from_clone(_PEERS_MODULE, _PEERS))


def _report(result: RunResult, json_path: str | None) -> int:
    print(format_table([result]))
    if json_path:
        write_json(json_path, [result], {"command": "ledgermq bench"})
    return 0


def cmd_bench_produce(args: argparse.Namespace) -> int:
    options = ProduceOptions(
        args.namesrv_addr,
        args.topic,
        body_bytes=args.size,
        batch=args.batch,
        producers=args.producers,
        duration_s=args.duration,
        rate=args.rate,
        credentials=credentials_from(args),
        tls=tls_from(args),
    )
    return _report(run(run_produce(options, Progress())), args.json)


def cmd_bench_consume(args: argparse.Namespace) -> int:
    options = ConsumeOptions(
        args.namesrv_addr,
        args.topic,
        duration_s=args.duration,
        pull_batch=args.pull_batch,
        max_messages=args.max,
        credentials=credentials_from(args),
        tls=tls_from(args),
    )
    return _report(run(run_consume(options, Progress())), args.json)


def cmd_bench_peers(args: argparse.Namespace) -> int:
    return _peers_run().run_from_args(args)
