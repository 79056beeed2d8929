"""``ledgermq admin consumer-status -g GROUP [-i CLIENT]``: RocketMQ's ``mqadmin consumerStatus``.

Each online client of the group is asked, through the master it is connected to, for its own
account (GET_CONSUMER_RUNNING_INFO): consume type, message model, subscriptions, and per queue it
holds its offset, the master's max offset, the lag between them, what it has cached and when it
last pulled and consumed, and RocketMQ's warnings (a queue that looks blocked, an orderly queue
not locked, clients that subscribe differently). With ``--json``, one object per client. Exit
status 0 when every client answered; 1 when a client could not (it is listed with the reason)
or when no client of the group is online (said in one line: an offline group has no running
info to show).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import table, with_admin
from ledgermq.client.consumer_status import subscriptions_differ, warnings
from ledgermq.net import run
from ledgermq.wire.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUMER_START_TIMESTAMP,
)

if TYPE_CHECKING:
    import argparse

    from ledgermq.client import Admin
    from ledgermq.client.consumer_status import ClientStatus

__all__ = ["register_consumer_status"]


def register_consumer_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser(
        "consumer-status",
        help="what each online client of a consumer group says of itself: subscriptions, "
        "queues held, offsets and lag (mqadmin consumerStatus)",
    )
    status.add_argument("-g", "--group", required=True, help="the consumer group")
    status.add_argument("-i", "--client-id", help="only this client (see consumer-connection)")
    status.set_defaults(handler=cmd_consumer_status)


def cmd_consumer_status(args: argparse.Namespace) -> int:
    async def work(admin: Admin) -> int:
        clients = await admin.consumer_status(args.group, args.client_id)
        now_ms = int(time.time() * 1000)
        if args.json:
            print(json.dumps([_as_json(c, now_ms) for c in clients], indent=2))
        else:
            for i, client in enumerate(clients):
                if i:
                    print()
                _print_client(client, now_ms)
        differ = subscriptions_differ(clients)
        if differ is not None:
            listing = "; ".join(f"{cid}: {subs}" for cid, subs in differ.items())
            print(
                f"warning: the clients of consumer group {args.group} do not subscribe alike, "
                f"so queues go to clients that do not read them: {listing}",
                file=sys.stderr,
            )
        if not clients:
            print(
                f"no client of consumer group {args.group} is online: nothing to ask "
                "(consumer-progress shows its committed offsets)",
                file=sys.stderr if args.json else sys.stdout,
            )
            return 1
        return 0 if all(c.info is not None for c in clients) else 1

    return run(with_admin(args, work))


def _when(ms: int) -> str:
    """Local time of epoch ``ms``; ``-`` for 0 (never)."""
    if ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _settings(client: ClientStatus) -> dict[str, str]:
    """The settings shown for a client: its own words first, its heartbeat's otherwise."""
    props = client.info.properties if client.info is not None else {}
    return {
        "consumeType": (client.info.consume_type if client.info else "") or "-",
        "messageModel": props.get("messageModel", "-"),
        "consumeFromWhere": props.get("consumeFromWhere", "-"),
        "orderly": props.get(PROP_CONSUME_ORDERLY, "-"),
        "clientVersion": props.get(PROP_CLIENT_VERSION, "-"),
    }


def _print_client(client: ClientStatus, now_ms: int) -> None:
    print(f"client {client.client_id} at {client.client_addr} ({client.language}, asked via "
          f"{client.broker_name})")  # fmt: skip
    info = client.info
    if info is None:
        print(f"  no running info: {client.error}")
        return
    settings = _settings(client)
    started = int(info.properties.get(PROP_CONSUMER_START_TIMESTAMP, "0") or 0)
    print("  " + "  ".join(f"{k} {v}" for k, v in settings.items()) + f"  started {_when(started)}")
    subscriptions = ", ".join(
        f"{s.topic} ({s.expression_type} {s.expression})" for s in info.subscriptions
    )
    print(f"  subscriptions: {subscriptions or 'none'}")
    if not client.queues:
        print("  holds no queue (more clients than queues, or not rebalanced yet)")
        return
    rows: list[tuple[object, ...]] = [
        (q.topic, q.broker_name, q.queue_id, q.consumer_offset,
         "?" if q.broker_offset is None else q.broker_offset, "?" if q.lag is None else q.lag,
         q.cached, "yes" if q.locked else "no", _when(q.last_pull_ms), _when(q.last_consume_ms))
        for q in client.queues
    ]  # fmt: skip
    header = ("topic", "broker", "queue", "consumer offset", "broker offset", "lag", "cached",
              "locked", "last pull", "last consume")  # fmt: skip
    table(header, rows, indent="  ")
    for warning in warnings(client, now_ms):
        print(f"  warning: {warning}")


def _as_json(client: ClientStatus, now_ms: int) -> dict[str, object]:
    info = client.info
    out: dict[str, object] = {
        "clientId": client.client_id,
        "clientAddr": client.client_addr,
        "language": client.language,
        "version": client.version,
        "brokerName": client.broker_name,
    }
    if info is None:
        return out | {"error": client.error}
    return (
        out
        | _settings(client)
        | {
            "startTimestamp": int(info.properties.get(PROP_CONSUMER_START_TIMESTAMP, "0") or 0),
            "subscriptions": [
                {"topic": s.topic, "subString": s.expression, "expressionType": s.expression_type}
                for s in info.subscriptions
            ],
            "queues": [
                {
                    "topic": q.topic,
                    "brokerName": q.broker_name,
                    "queueId": q.queue_id,
                    "consumerOffset": q.consumer_offset,
                    "brokerOffset": q.broker_offset,
                    "lag": q.lag,
                    "cachedMsgCount": q.cached,
                    "locked": q.locked,
                    "lastPullTimestamp": q.last_pull_ms,
                    "lastConsumeTimestamp": q.last_consume_ms,
                }
                for q in client.queues
            ],
            "properties": dict(sorted(info.properties.items())),
            "warnings": warnings(client, now_ms),
        }
    )
