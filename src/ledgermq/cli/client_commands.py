"""``ledgermq admin ...``: the client library from the shell (``produce`` and ``consume`` are in
``produce_consume.py``).

Every command takes the NameServer list with ``-n`` (``host:port;host:port``), as RocketMQ's
``mqadmin`` does, defaulting to ``$NAMESRV_ADDR`` or ``127.0.0.1:9876``. Output is one line per
message or a table; errors are one line on stderr (main.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import emit as _emit
from ledgermq.cli.admin_common import json_arg as _json_arg
from ledgermq.cli.admin_common import name_absent, namesrv_arg, replicas_of
from ledgermq.cli.admin_common import with_admin as _with_admin
from ledgermq.cli.broker_config_commands import register_broker_config
from ledgermq.cli.consumer_status_commands import register_consumer_status
from ledgermq.cli.credentials_args import add_credential_args
from ledgermq.cli.leader_commands import register_leaders
from ledgermq.cli.membership_commands import register_membership
from ledgermq.cli.quarantine_commands import register_quarantine
from ledgermq.cli.replica_status_commands import register_replica_status
from ledgermq.cli.tls_args import add_tls_args
from ledgermq.client.key_search import newest_by_key
from ledgermq.errors import ConfigError, LedgerMQError, TopicNotFoundError
from ledgermq.net import run
from ledgermq.wire import read_message_id
from ledgermq.wire.topic_attributes import parse_changes
from ledgermq.wire.trace import TRACE_TOPIC

if TYPE_CHECKING:
    from ledgermq.client import Admin
    from ledgermq.wire import MessageExt


def _namesrv_arg(parser: argparse.ArgumentParser, *, inherited: bool = False) -> None:
    namesrv_arg(parser, inherited=inherited)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = commands.add_parser("admin", help="topics, clusters, consumer progress, leadership")
    _namesrv_arg(admin)
    add_credential_args(admin)
    _json_arg(admin)
    add_tls_args(admin)
    sub = admin.add_subparsers(dest="admin_command", metavar="ADMIN_COMMAND", required=True)
    _topic_parser(sub, "topic-create", "create or update a topic on every master")
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
    _topic_parser(
        sub, "topic-update", "change a topic's queue counts (a shrink: -w first, -r once drained)"
    )
    progress = sub.add_parser(
        "consumer-progress",
        help="a group's offsets and lag per queue; without -g every group and its total lag",
    )
    progress.add_argument("-g", "--group", help="the consumer group (default: every group)")
    progress.add_argument("-t", "--topic")
    progress.set_defaults(handler=cmd_consumer_progress)
    register_leaders(sub)
    register_replica_status(sub)
    register_membership(sub)
    _register_groups_and_brokers(sub)
    _register_offsets(sub)
    for subcommand in sub.choices.values():
        _namesrv_arg(subcommand, inherited=True)
        add_credential_args(subcommand, inherited=True)
        add_tls_args(subcommand, inherited=True)
        _json_arg(subcommand, inherited=True)
    _mqadmin_aliases(sub)


def _topic_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, what: str
) -> None:
    """``topic-create`` and ``topic-update``: one command under two names (RocketMQ's
    ``updateTopic`` does both)."""
    create = sub.add_parser(name, help=what)
    create.add_argument("-t", "--topic", required=True)
    create.add_argument(
        "-q", "--queues", type=int, help="read and write queues (default 8 for a new topic)"
    )
    create.add_argument(
        "-r",
        "--read-queues",
        type=int,
        help="queues consumers read (readQueueNums; default: -q, else the topic's own)",
    )
    create.add_argument(
        "-w",
        "--write-queues",
        type=int,
        help="queues producers write (writeQueueNums; default: -q, else the topic's own, "
        "at most the read count)",
    )
    create.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    create.add_argument("-b", "--broker", action="append", help="only these broker groups")
    create.add_argument("--order", action="store_true", help="an ordered topic")
    create.add_argument(
        "-a",
        "--attributes",
        type=_attribute_changes,
        help="attribute changes as RocketMQ's updateTopic -a: '+message.type=FIFO' (the "
        "type a v5 client's messages must have: NORMAL, FIFO, DELAY, TRANSACTION, MIXED); "
        "'-key' removes one",
    )
    create.add_argument(
        "--wait",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for broker groups (and their masters) to register, as "
        "right after a cluster starts (default 30; 0 fails at once)",
    )
    create.set_defaults(handler=cmd_topic_create)


MQADMIN_NAMES: dict[str, str] = {
    "updateTopic": "topic-create",
    "deleteTopic": "topic-delete",
    "topicList": "topic-list",
    "topicRoute": "topic-route",
    "topicStatus": "topic-stats",
    "clusterList": "cluster-list",
    "consumerProgress": "consumer-progress",
    "consumerConnection": "consumer-connection",
    "producerConnection": "producer-connection",
    "consumerStatus": "consumer-status",
    "updateSubGroup": "subgroup-update",
    "deleteSubGroup": "subgroup-delete",
    "brokerStatus": "broker-status",
    "getBrokerConfig": "broker-config",
    "updateBrokerConfig": "broker-config update",
    "wipeWritePerm": "wipe-write-perm",
    "addWritePerm": "add-write-perm",
    "resetOffsetByTime": "reset-offset",
    "statsAll": "stats-all",
    "queryMsgById": "message",
    "queryMsgByUniqueKey": "message",
    "queryMsgByKey": "message",
    "queryMsgByOffset": "message",
}
"""RocketMQ ``mqadmin`` command -> ``ledgermq admin`` command. Each mqadmin name is a hidden
alias (``ledgermq admin topicList`` works; ``--help`` lists only our names); the options are
ours (README: "mqadmin names")."""


def _mqadmin_aliases(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Make each of ``MQADMIN_NAMES`` parse as its command without showing it in ``--help``
    (argparse's ``aliases=`` would list them all beside every command)."""
    for alias, name in MQADMIN_NAMES.items():
        command, *action = name.split()
        parser = sub.choices[command]
        if action:  # a subcommand's action: "broker-config update"
            (actions,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            parser = actions.choices[action[0]]
        sub._name_parser_map[alias] = parser


def _boolean(text: str) -> bool:
    """``true`` / ``false`` (argparse type)."""
    value = text.strip().lower()
    if value not in {"true", "false"}:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return value == "true"


def _register_offsets(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    reset = sub.add_parser(
        "reset-offset", help="move a stopped consumer group's offsets in a topic"
    )
    reset.add_argument("-g", "--group", required=True)
    reset.add_argument("-t", "--topic", required=True)
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-time", type=_time_ms, metavar="TIME",
                       help="the first message stored at or after TIME (epoch ms, ISO 8601, "
                       "or yyyy-MM-dd#HH:mm:ss:SSS)")  # fmt: skip
    where.add_argument("--earliest", action="store_true", help="every queue's first message")
    where.add_argument("--latest", action="store_true", help="past every queue's last message")
    reset.add_argument(
        "--force", action="store_true", help="even while clients of the group are online"
    )
    reset.set_defaults(handler=cmd_reset_offset)
    resend = sub.add_parser(
        "resend-dlq", help="give a dead-lettered message back to its consumer group"
    )
    resend.add_argument("-g", "--group", required=True)
    resend.add_argument("--id", required=True, help="the message's offset msgId in %%DLQ%%GROUP")
    resend.set_defaults(handler=cmd_resend_dlq)
    stats = sub.add_parser(
        "stats-all", help="backlog and messages in / out per second of every topic and group"
    )
    stats.add_argument("--window", type=_seconds, default=1.0, help="seconds measured (1)")
    stats.add_argument("--system", action="store_true", help="system topics too")
    stats.set_defaults(handler=cmd_stats_all)


def _register_groups_and_brokers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    groups = sub.add_parser("consumer-groups", help="every subscription group and its settings")
    groups.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    groups.set_defaults(handler=cmd_consumer_groups)
    update = sub.add_parser(
        "subgroup-update", help="create or update a subscription group on every master"
    )
    update.add_argument("-g", "--group", required=True)
    update.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    update.add_argument("-b", "--broker", action="append", help="only these broker groups")
    update.add_argument("--retry-max-times", type=int, help="deliveries before the DLQ (16)")
    update.add_argument("--retry-queue-nums", type=int, help="queues of its retry topic (1)")
    update.add_argument("--consume-enable", type=_boolean, help="true / false: may it consume")
    update.add_argument("--orderly", type=_boolean, help="true / false: orderly consumption")
    update.add_argument("--broadcast", type=_boolean, help="true / false: broadcasting allowed")
    update.add_argument(
        "--from-min", type=_boolean, help="true / false: a new group starts at the first offset"
    )
    update.set_defaults(handler=cmd_subgroup_update)
    delete = sub.add_parser("subgroup-delete", help="delete a subscription group's settings")
    delete.add_argument("-g", "--group", required=True)
    delete.add_argument("-c", "--cluster", help="only this cluster's broker groups")
    delete.add_argument("-b", "--broker", action="append", help="only these broker groups")
    delete.set_defaults(handler=cmd_subgroup_delete)
    connection = sub.add_parser(
        "consumer-connection", help="the clients of a consumer group online now"
    )
    connection.add_argument("-g", "--group", required=True)
    connection.set_defaults(handler=cmd_consumer_connection)
    producers = sub.add_parser(
        "producer-connection", help="the clients of a producer group connected now"
    )
    producers.add_argument("-g", "--group", required=True, help="the producer group")
    producers.add_argument(
        "-t", "--topic", help="accepted for mqadmin's producerConnection; every master is asked"
    )
    producers.set_defaults(handler=cmd_producer_connection)
    register_consumer_status(sub)
    register_quarantine(sub)
    status = sub.add_parser("broker-status", help="every replica's role, term, log and counters")
    status.add_argument("-b", "--broker", help="only this broker group")
    status.add_argument("-c", "--cluster", help="only this cluster")
    status.set_defaults(handler=cmd_broker_status)
    for name, help_text, handler in (
        ("wipe-write-perm", "route a broker group read-only (drain it)", cmd_wipe_write_perm),
        ("add-write-perm", "route a drained broker group writable again", cmd_add_write_perm),
    ):
        perm = sub.add_parser(name, help=f"{help_text}, on every NameServer")
        perm.add_argument("-b", "--broker", required=True, help="broker group (brokerName)")
        perm.set_defaults(handler=handler)
    register_broker_config(sub)
    message = sub.add_parser("message", help="messages by id, by key, or by time range in a topic")
    how = message.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "-i",
        "--id",
        help="either message id: the msgId a producer prints (its UNIQ_KEY, looked up in every "
        "topic unless --topic is given) or the offsetMsgId (where it is stored)",
    )
    how.add_argument("-k", "--key", help="a KEYS value (or UNIQ_KEY); needs --topic")
    how.add_argument(
        "-o",
        "--offset",
        type=int,
        metavar="OFFSET",
        help="the message at this queue offset (mqadmin queryMsgByOffset); needs --topic, "
        "--broker and --queue",
    )
    how.add_argument(
        "--from",
        dest="begin",
        type=_time_ms,
        metavar="TIME",
        help="stored from TIME (needs --topic): epoch ms, ISO 8601 (2026-11-25T10:00:00, local "
        "time unless it has a zone) or RocketMQ's yyyy-MM-dd#HH:mm:ss:SSS",
    )
    message.add_argument("--to", dest="end", type=_time_ms, metavar="TIME", help="until TIME (now)")
    message.add_argument(
        "-t", "--topic", help="the topic (with --key, --from or --offset; narrows --id)"
    )
    message.add_argument("-b", "--broker", help="broker group (brokerName), with --offset")
    message.add_argument("-q", "--queue", type=int, metavar="ID", help="queue id, with --offset")
    message.add_argument("--max", type=int, default=32, help="at most this many (default 32)")
    message.add_argument(
        "--body", choices=("text", "hex", "none"), default="text", help="how to show bodies"
    )
    message.add_argument(
        "--trace-topic",
        default=TRACE_TOPIC,
        help=f"where the trace records are (a broker's msgTraceTopicName; default {TRACE_TOPIC})",
    )
    message.set_defaults(handler=cmd_message)


def _seconds(text: str) -> float:
    """A non-negative number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more seconds")
    return value


def _attribute_changes(text: str) -> str:
    """``--attributes``: refused by argparse with the parser's sentence when malformed."""
    try:
        parse_changes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


# ---------------------------------------------------------------------- admin
_PARTIAL = 2
"""Exit status of a write that spans groups and was done on some of them only (the others are
named on stderr); reads exit 0 when any group answered, 1 when none did."""


def cmd_topic_create(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        reads, writes, held_by = await _queue_counts(admin, args)
        if min(reads, writes) < 1 or writes > reads:
            raise ConfigError(
                f"topic {args.topic}: {reads} read and {writes} write queues; a topic needs at "
                "least one queue of each, and no more write queues than read queues (messages "
                "in a queue above the read count would be read by no consumer)"
            )
        only = args.broker
        if only is None and args.cluster is None and args.admin_command == "topic-update":
            only = held_by or None  # an update stays on the groups that hold the topic
        absent: dict[str, str] = {}
        brokers = await admin.create_topic(
            args.topic,
            reads,
            cluster=args.cluster,
            broker_names=only,
            order=args.order,
            attributes=args.attributes,
            wait_s=args.wait,
            read_queue_nums=reads,
            write_queue_nums=writes,
            absent=absent,
        )
        if args.json:
            out = {
                "topic": args.topic,
                "queues": writes,
                "readQueueNums": reads,
                "writeQueueNums": writes,
                "brokers": brokers,
            }
            print(json.dumps(out | ({"notCreatedOn": absent} if absent else {})))
        else:
            counts = (
                f"{reads} queues" if reads == writes else f"{reads} read / {writes} write queues"
            )
            print(f"topic {args.topic} ({counts}) on {', '.join(brokers)}")
        name_absent(absent, f"topic {args.topic}'s groups (run the command again once it has a "
                    "master: it is idempotent)")  # fmt: skip
        return _PARTIAL if absent else 0

    return run(_with_admin(args, work))


async def _queue_counts(admin: Admin, args: argparse.Namespace) -> tuple[int, int, list[str]]:
    """(read, write) queue counts from -q / -r / -w, and the groups that hold the topic now. A
    count not given is the topic's own (the largest over its groups), or 8 for a new topic; the
    write count never exceeds the read count unless asked to (the broker then says why not)."""
    reads, writes = args.read_queues, args.write_queues
    if args.queues is not None:
        reads = args.queues if reads is None else reads
        writes = args.queues if writes is None else writes
    own_reads = own_writes = None
    held_by: list[str] = []
    if reads is not None and writes is not None and args.admin_command != "topic-update":
        return reads, writes, held_by  # a create that names its counts needs no lookup
    try:
        route = await admin.topic_route(args.topic)
    except TopicNotFoundError:
        pass
    else:
        held_by = sorted({q.broker_name for q in route.queue_datas})
        if route.queue_datas:
            own_reads = max(q.read_queue_nums for q in route.queue_datas)
            own_writes = max(q.write_queue_nums for q in route.queue_datas)
    if reads is None:
        reads = own_reads if own_reads is not None else (writes or 8)
    if writes is None:
        writes = min(own_writes, reads) if own_writes is not None else reads
    return reads, writes, held_by


def cmd_topic_list(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        topics = sorted(await admin.topic_list())
        if args.json:
            print(json.dumps(topics, indent=2))
        else:
            for topic in topics:
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
        _emit(
            args,
            ("broker", "read", "write", "perm", "replicas (0 = master)"),
            ("brokerName", "readQueueNums", "writeQueueNums", "perm", "replicas"),
            rows,
        )
        return 0

    return run(_with_admin(args, work))


def cmd_topic_stats(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        absent: dict[str, str] = {}
        stats = await admin.topic_stats(args.topic, absent=absent)
        name_absent(absent, "these statistics")
        _emit(
            args,
            ("broker", "queue", "min", "max"),
            ("brokerName", "queueId", "minOffset", "maxOffset"),
            [(s.broker_name, s.queue_id, s.min_offset, s.max_offset) for s in sorted(
                stats, key=lambda s: (s.broker_name, s.queue_id))],
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_topic_delete(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        if args.topic not in await admin.topic_list():  # not "deleted" for a typo, rc 1
            raise TopicNotFoundError(
                f"topic {args.topic} does not exist: no NameServer knows it "
                "(admin topic-list shows the topics)"
            )
        absent: dict[str, str] = {}
        await admin.delete_topic(args.topic, absent=absent)
        if args.json:
            out = {"deleted": args.topic} | ({"notDeletedOn": absent} if absent else {})
            print(json.dumps(out))
        else:
            print(f"topic {args.topic} deleted")
        name_absent(absent, f"this deletion of {args.topic} (it keeps the topic and registers "
                    "it again once it has a master: delete it again then)")  # fmt: skip
        return _PARTIAL if absent else 0

    return run(_with_admin(args, work))


def cmd_consumer_progress(args: argparse.Namespace) -> int:
    if args.group is None:
        return _every_group_progress(args)

    async def work(admin: Admin) -> int:
        absent: dict[str, str] = {}
        rows = await admin.consumer_progress(args.group, args.topic, absent=absent)
        name_absent(absent, "this progress")
        _emit(
            args,
            ("topic", "broker", "queue", "broker offset", "consumer offset", "lag"),
            ("topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "lag"),
            [(r.topic, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, r.lag)
             for r in sorted(rows)],
        )  # fmt: skip
        if not args.json:
            print(f"total lag: {sum(r.lag for r in rows)}")
        return 0

    return run(_with_admin(args, work))


def _every_group_progress(args: argparse.Namespace) -> int:
    """One row per consumer group: its topics, queues and total lag (``--topic``: only the
    groups consuming it, their lag in it)."""

    async def work(admin: Admin) -> int:
        rows: list[tuple[object, ...]] = []
        absent: dict[str, str] = {}
        lags = await admin.consumer_lags(absent=absent)
        name_absent(absent, "this progress")
        for group, every in lags.items():
            progress = [p for p in every if args.topic in (None, p.topic)]
            if args.topic is not None and not progress:
                continue
            topics = sorted({p.topic for p in progress})
            rows.append(
                (group, ",".join(topics) or "-", len(progress), sum(p.lag for p in progress))
            )
        _emit(
            args,
            ("group", "topics", "queues", "lag"),
            ("group", "topics", "queues", "lag"),
            rows,
        )
        return 0

    return run(_with_admin(args, work))


# ---------------------------------------------------------------------- groups
_GROUP_SETTINGS = (
    ("retry_max_times", "retryMaxTimes"),
    ("retry_queue_nums", "retryQueueNums"),
    ("consume_enable", "consumeEnable"),
    ("orderly", "consumeMessageOrderly"),
    ("broadcast", "consumeBroadcastEnable"),
    ("from_min", "consumeFromMinEnable"),
)


def cmd_consumer_groups(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        absent: dict[str, str] = {}
        groups = await admin.consumer_groups(cluster=args.cluster, absent=absent)
        name_absent(absent, "this list")
        rows: list[tuple[object, ...]] = []
        for group, by_broker in groups.items():
            for broker, config in sorted(by_broker.items()):
                rows.append(
                    (
                        group,
                        broker,
                        config.get("consumeEnable", True),
                        config.get("consumeMessageOrderly", False),
                        config.get("consumeBroadcastEnable", True),
                        config.get("retryMaxTimes", 16),
                    )
                )
        _emit(
            args,
            ("group", "broker", "consume", "orderly", "broadcast", "retry max"),
            ("group", "brokerName", "consumeEnable", "consumeMessageOrderly",
             "consumeBroadcastEnable", "retryMaxTimes"),
            rows,
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_subgroup_update(args: argparse.Namespace) -> int:
    settings = {
        field: getattr(args, name)
        for name, field in _GROUP_SETTINGS
        if getattr(args, name) is not None
    }

    async def work(admin: Admin) -> int:
        absent: dict[str, str] = {}
        brokers = await admin.update_group(
            args.group, cluster=args.cluster, broker_names=args.broker, absent=absent, **settings
        )
        if args.json:
            out = {"group": args.group, "brokers": brokers, "settings": settings}
            print(json.dumps(out | ({"notUpdatedOn": absent} if absent else {})))
        else:
            print(f"subscription group {args.group} on {', '.join(brokers)}")
        name_absent(absent, f"this update of {args.group} (run it again once it has a master)")
        return _PARTIAL if absent else 0

    return run(_with_admin(args, work))


def cmd_subgroup_delete(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        absent: dict[str, str] = {}
        brokers = await admin.delete_group(
            args.group, cluster=args.cluster, broker_names=args.broker, absent=absent
        )
        if args.json:
            out = {"deleted": args.group, "brokers": brokers}
            print(json.dumps(out | ({"notDeletedOn": absent} if absent else {})))
        else:
            print(f"subscription group {args.group} deleted on {', '.join(brokers)}")
        name_absent(absent, f"this deletion of {args.group} (run it again once it has a master)")
        return _PARTIAL if absent else 0

    return run(_with_admin(args, work))


def cmd_reset_offset(args: argparse.Namespace) -> int:
    to: str | int = "earliest" if args.earliest else "latest" if args.latest else args.to_time

    async def work(admin: Admin) -> int:
        rows = await admin.reset_offset(args.group, args.topic, to, force=args.force)
        _emit(
            args,
            ("broker", "queue", "before", "after"),
            ("brokerName", "queueId", "before", "after"),
            [(r.broker_name, r.queue_id, "-" if r.before is None else r.before, r.after)
             for r in rows],
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_stats_all(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        rows = await admin.stats_all(window_s=args.window, include_system=args.system)
        _emit(
            args,
            ("topic", "consumer group", "backlog", "in tps", "out tps"),
            ("topic", "group", "backlog", "inTps", "outTps"),
            [(r.topic, r.group or "-", r.backlog, round(r.in_tps, 1), round(r.out_tps, 1))
             for r in rows],
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_resend_dlq(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        result = await admin.resend_from_dlq(args.group, args.id)
        if args.json:
            print(json.dumps({"msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
                              "topic": f"%RETRY%{args.group}"}))  # fmt: skip
        else:
            print(f"resent to %RETRY%{args.group} as {result.offset_msg_id}")
        return 0

    return run(_with_admin(args, work))


def cmd_consumer_connection(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        rows = await admin.consumer_connections(args.group)
        if not rows and not args.json:
            print(f"no client of consumer group {args.group} is online")
            return 1
        _emit(
            args,
            ("broker", "client id", "address", "language", "version", "model", "topics"),
            ("brokerName", "clientId", "clientAddr", "language", "version", "messageModel",
             "topics"),
            [(r.broker_name, r.client_id, r.client_addr, r.language, r.version,
              r.message_model, ",".join(r.topics)) for r in rows],
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_producer_connection(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        rows = await admin.producer_connections(args.group)
        if not rows and not args.json:
            print(f"no client of producer group {args.group} is connected")
            return 1
        _emit(
            args,
            ("broker", "client id", "address"),
            ("brokerName", "clientId", "clientAddr"),
            [(r.broker_name, r.client_id, r.client_addr) for r in rows],
        )
        return 0

    return run(_with_admin(args, work))


# ---------------------------------------------------------------------- brokers
_STATUS_KEYS = (
    "brokerRole",
    "dLegerSelfId",
    "dLegerTerm",
    "dLegerLeader",
    "ledgerEndIndex",
    "committedIndex",
    "dispatchedIndex",
    "putMessages",
    "getMessages",
)


def cmd_broker_status(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        replicas = await replicas_of(admin, args.cluster, args.broker)
        rows: list[tuple[object, ...]] = []
        for name, by_id in replicas.items():
            for broker_id, address in by_id.items():
                try:
                    table = await admin.broker_runtime_info(address)
                except LedgerMQError as exc:
                    table = {"brokerRole": f"unreachable ({type(exc).__name__})"}
                rows.append((name, broker_id, address, *(table.get(k, "?") for k in _STATUS_KEYS)))
        _emit(
            args,
            ("broker", "id", "address", "role", "replica", "term", "leader", "end", "committed",
             "dispatched", "put", "get"),
            ("brokerName", "brokerId", "address", *_STATUS_KEYS),
            rows,
        )  # fmt: skip
        return 0

    return run(_with_admin(args, work))


def cmd_wipe_write_perm(args: argparse.Namespace) -> int:
    return _write_perm(args, wipe=True)


def cmd_add_write_perm(args: argparse.Namespace) -> int:
    return _write_perm(args, wipe=False)


def _write_perm(args: argparse.Namespace, *, wipe: bool) -> int:
    async def work(admin: Admin) -> int:
        call = admin.wipe_write_perm if wipe else admin.add_write_perm
        counts = await call(args.broker)
        _emit(
            args,
            ("name server", "topics"),
            ("namesrvAddr", "wipeTopicCount" if wipe else "addTopicCount"),
            sorted(counts.items()),
        )
        if not args.json:
            state = "read-only (wiped)" if wipe else "writable"
            print(f"broker group {args.broker} is routed {state} on every NameServer")
        return 0

    return run(_with_admin(args, work))


# ---------------------------------------------------------------------- messages
def _body_preview(body: bytes, how: str) -> str:
    if how == "hex":
        return body.hex()
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return f"(binary, {len(body)} bytes; --body hex shows it)"


def _message_record(message: MessageExt, how: str) -> dict[str, object]:
    record: dict[str, object] = {
        "msgId": message.properties.get("UNIQ_KEY", ""),
        "offsetMsgId": message.offset_msg_id,
        "topic": message.topic,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "bornTimestamp": message.born_timestamp,
        "bornHost": message.born_host,
        "storeTimestamp": message.store_timestamp,
        "storeHost": message.store_host,
        "reconsumeTimes": message.reconsume_times,
        "bodyBytes": len(message.body),
        "properties": dict(sorted(message.properties.items())),
    }
    if how != "none":
        record["body"] = _body_preview(message.body, how)
    return record


def _time_ms(text: str) -> int:
    """Epoch ms, ISO 8601, or RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` (argparse type)."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        if "#" in value:  # RocketMQ's tools: 2026-11-25#10:00:00:000, local time
            moment = datetime.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f").astimezone()
        else:
            moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: use epoch ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(moment.timestamp() * 1000)  # a naive time is local, as in RocketMQ's tools


def _trace_line(event: dict[str, object]) -> str:
    """One trace event as a line: when, what, who, how long, result."""
    when = event.get("timestamp_ms", -1)
    stamp = (
        datetime.datetime.fromtimestamp(int(when) / 1000, tz=datetime.UTC).isoformat(
            timespec="milliseconds"
        )
        if isinstance(when, int) and when >= 0
        else "?"
    )
    kind, group, cost = event.get("kind"), event.get("group"), event.get("cost_ms")
    ok = bool(event.get("success"))
    if kind == "Pub":
        host = event.get("store_host")
        return f"{stamp} sent by {group} to {host} in {cost} ms, {'ok' if ok else 'FAILED'}"
    if kind == "SubBefore":
        return f"{stamp} delivered to {group} (attempt {int(str(event.get('retry_times'))) + 1})"
    return f"{stamp} consumed by {group} in {cost} ms, {'ok' if ok else 'RECONSUME_LATER'}"


def cmd_message(args: argparse.Namespace) -> int:
    if (args.key is not None or args.begin is not None) and not args.topic:
        raise ConfigError("--key and --from need --topic: messages are looked up per topic")
    if args.offset is not None and not (args.topic and args.broker and args.queue is not None):
        raise ConfigError("--offset needs --topic, --broker and --queue: it names one queue's slot")
    if args.end is not None and args.begin is None:
        raise ConfigError("--to goes with --from")
    if args.id is not None:
        read_message_id(args.id)  # an id that can be neither kind: one sentence, no lookup

    async def work(admin: Admin) -> int:
        if args.id is not None:
            messages = await admin.find_message(args.id, topic=args.topic, max_num=args.max)
        elif args.offset is not None:
            messages = [await admin.message_at(args.topic, args.broker, args.queue, args.offset)]
        elif args.key is not None:  # past the 64 a broker answers at once, oldest first
            newest = await newest_by_key(admin, args.topic, args.key, args.max)
            messages = sorted(newest, key=lambda m: (m.store_timestamp, m.commit_log_offset))
        else:
            end = args.end if args.end is not None else int(time.time() * 1000)
            messages = await admin.messages_between(
                args.topic, args.begin, end, max_messages=args.max
            )
        records = [_message_record(m, args.body) for m in messages]
        for record in records:
            events = await admin.message_trace(
                str(record["msgId"] or record["offsetMsgId"]), trace_topic=args.trace_topic
            )
            record["trace"] = [dataclasses.asdict(e) for e in events]
        if args.json:
            print(json.dumps(records, indent=2))
        elif not records:
            what = f"has key {args.key!r}" if args.key is not None else "was stored then"
            print(f"no message of topic {args.topic} {what}")
            return 1
        else:
            for record in records:
                for name, value in record.items():
                    if name == "trace":
                        for event in value:  # type: ignore[attr-defined]
                            print(f"  trace {_trace_line(event)}")
                    elif name == "properties":
                        for key, text in value.items():  # type: ignore[attr-defined]
                            print(f"  property {key} = {text}")
                    else:
                        print(f"{name}: {value}")
                print()
        return 0

    return run(_with_admin(args, work))
