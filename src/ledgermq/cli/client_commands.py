"""``ledgermq admin ...``: the client library from the shell (``produce`` and ``consume`` are in
``produce_consume.py``).

Every command takes the NameServer list with ``-n`` (``host:port;host:port``), as RocketMQ's
``mqadmin`` does, defaulting to ``$NAMESRV_ADDR`` or ``127.0.0.1:9876``. Output is one line per
message or a table; errors are one line on stderr (main.py).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ledgermq.cli.credentials_args import add_credential_args, credentials_from
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.client import Admin
from ledgermq.net import run

_DEFAULT_NAMESRV = "127.0.0.1:9876"


def _namesrv_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namesrv-addr",
        default=os.environ.get("NAMESRV_ADDR", _DEFAULT_NAMESRV),
        help="NameServers, 'host:port;host:port' (default: $NAMESRV_ADDR or 127.0.0.1:9876)",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = commands.add_parser("admin", help="topics, clusters, consumer progress, leadership")
    _namesrv_arg(admin)
    add_credential_args(admin)
    add_tls_args(admin)
    sub = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND", required=True)
    create = sub.add_parser("topic-create", help="create or update a topic on every master")
    create.add_argument("-t", "--topic", required=True)
    create.add_argument("-q", "--queues", type=int, default=8, help="read and write queues")
    create.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    create.add_argument("-b", "--broker", action="append", help="only these broker groups")
    create.add_argument("--order", action="store_true", help="an ordered topic")
    create.add_argument(
        "--wait",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for broker groups (and their masters) to register, as right "
        "after a cluster starts (default 30; 0 fails at once)",
    )
    create.set_defaults(handler=cmd_topic_create)
    sub.add_parser("topic-list", help="every topic the NameServer knows").set_defaults(
        handler=cmd_topic_list
    )
    route = sub.add_parser("topic-route", help="which broker groups serve a topic")
    route.add_argument("-t", "--topic", required=True)
    route.set_defaults(handler=cmd_topic_route)
    stats = sub.add_parser("topic-stats", help="min / max offset of every queue of a topic")
    stats.add_argument("-t", "--topic", required=True)
    stats.set_defaults(handler=cmd_topic_stats)
    delete = sub.add_parser("topic-delete", help="delete a topic from brokers and NameServers")
    delete.add_argument("-t", "--topic", required=True)
    delete.set_defaults(handler=cmd_topic_delete)
    sub.add_parser("cluster-list", help="broker groups, their replicas and roles").set_defaults(
        handler=cmd_cluster_list
    )
    progress = sub.add_parser("consumer-progress", help="a group's offsets and lag per queue")
    progress.add_argument("-g", "--group", required=True)
    progress.add_argument("-t", "--topic")
    progress.set_defaults(handler=cmd_consumer_progress)
    transfer = sub.add_parser("transfer-leader", help="move a broker group's master")
    transfer.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
    transfer.add_argument("--to", required=True, help="the replica to lead, e.g. n1")
    transfer.set_defaults(handler=cmd_transfer)
    for subcommand in sub.choices.values():
        add_credential_args(subcommand, inherited=True)
        add_tls_args(subcommand, inherited=True)


def _seconds(text: str) -> float:
    """A non-negative number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


async def _with_admin(args: argparse.Namespace, work: Any) -> int:
    admin = Admin(args.namesrv_addr, credentials=credentials_from(args), tls=tls_from(args))
    await admin.start()
    try:
        result: int = await work(admin)
        return result
    finally:
        await admin.close()


def _table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# ---------------------------------------------------------------------- admin
def cmd_topic_create(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        brokers = await admin.create_topic(
            args.topic,
            args.queues,
            cluster=args.cluster,
            broker_names=args.broker,
            order=args.order,
            wait_s=args.wait,
        )
        print(f"topic {args.topic} ({args.queues} queues) on {', '.join(brokers)}")
        return 0

    return run(_with_admin(args, work))


def cmd_topic_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        for topic in sorted(await admin.topic_list()):
            print(topic)
        return 0

    return run(_with_admin(args, work))


def cmd_topic_route(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        route = await admin.topic_route(args.topic)
        rows: list[tuple[object, ...]] = []
        queues = {q.broker_name: q for q in route.queue_datas}
        for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
            q = queues.get(broker.broker_name)
            addrs = " ".join(f"{i}={a}" for i, a in sorted(broker.broker_addrs.items()))
            rows.append(
                (
                    broker.broker_name,
                    q.read_queue_nums if q else "-",
                    q.write_queue_nums if q else "-",
                    q.perm if q else "-",
                    addrs,
                )
            )
        _table(("broker", "read", "write", "perm", "replicas (0 = master)"), rows)
        return 0

    return run(_with_admin(args, work))


def cmd_topic_stats(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        stats = await admin.topic_stats(args.topic)
        _table(
            ("broker", "queue", "min", "max"),
            [(s.broker_name, s.queue_id, s.min_offset, s.max_offset) for s in sorted(
                stats, key=lambda s: (s.broker_name, s.queue_id))],
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_topic_delete(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        await admin.delete_topic(args.topic)
        print(f"topic {args.topic} deleted")
        return 0

    return run(_with_admin(args, work))


def cmd_cluster_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        info = await admin.cluster_info()
        rows: list[tuple[object, ...]] = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                broker = info.broker_addr_table.get(name)
                if broker is None:
                    continue
                for broker_id, address in sorted(broker.broker_addrs.items()):
                    try:
                        table = await admin.broker_runtime_info(address)
                    except Exception as exc:  # noqa: BLE001 - shown in the table
                        table = {"brokerRole": f"unreachable ({type(exc).__name__})"}
                    rows.append(
                        (
                            cluster,
                            name,
                            broker_id,
                            address,
                            table.get("brokerRole", "?"),
                            table.get("dLegerSelfId", "?"),
                            table.get("dLegerTerm", "?"),
                            table.get("committedIndex", "?"),
                        )
                    )
        _table(("cluster", "broker", "id", "address", "role", "replica", "term", "committed"), rows)
        return 0

    return run(_with_admin(args, work))


def cmd_consumer_progress(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        rows = await admin.consumer_progress(args.group, args.topic)
        _table(
            ("topic", "broker", "queue", "broker offset", "consumer offset", "lag"),
            [(r.topic, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, r.lag)
             for r in sorted(rows)],
        )  # fmt: skip
        print(f"total lag: {sum(r.lag for r in rows)}")
        return 0

    return run(_with_admin(args, work))


def cmd_transfer(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        await admin.transfer_leadership(args.broker, args.to)
        print(f"{args.to} leads broker group {args.broker}")
        return 0

    return run(_with_admin(args, work))
