"""``ledgermq admin broker-config get | update``: a broker replica's settings, shown or changed.

``update`` is RocketMQ's ``mqadmin updateBrokerConfig -b ADDR | -c CLUSTER -k KEY -v VALUE``:
UPDATE_BROKER_CONFIG (25) to every replica named, masters and slaves alike, since each replica
keeps its own settings (they are not replicated through the ledger). Each answer is checked by
reading the replica's settings back (GET_BROKER_CONFIG, 26). A replica of the group that is down
is named too (it is in the others' ``dLegerPeers`` but did not answer): it keeps its old value,
and the command exits 1 so a script knows to run it again once the replica is back.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ledgermq.cli.admin_common import emit, json_arg, namesrv_arg, with_admin
from ledgermq.cli.credentials_args import add_credential_args
from ledgermq.cli.tls_args import add_tls_args
from ledgermq.errors import ConfigError, LedgerMQError, MQResponseError
from ledgermq.net import run

if TYPE_CHECKING:
    import argparse

    from ledgermq.client import Admin

__all__ = ["register_broker_config"]


def register_broker_config(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``broker-config`` with ``get`` (also the default: ``broker-config -b GROUP``) and
    ``update``."""
    config = sub.add_parser(
        "broker-config", help="a broker replica's settings: get (default) or update them live"
    )
    # The group's -b / --replica may come before the action (broker-config -b X get) or after
    # it (broker-config get -b X): the parent's land in their own fields, read when the
    # action's are not given.
    config.add_argument("-b", "--broker", dest="config_broker", help="broker group (brokerName)")
    config.add_argument(
        "--replica", dest="config_replica", type=int, help="replica id (default 0: the master)"
    )
    config.set_defaults(handler=cmd_broker_config, broker=None, replica=None)
    actions = config.add_subparsers(dest="config_action", metavar="ACTION")
    get = actions.add_parser("get", help="print one replica's settings (GET_BROKER_CONFIG)")
    get.add_argument("-b", "--broker", help="broker group (brokerName)")
    get.add_argument("--replica", type=int, help="replica id (default 0: the master)")
    get.set_defaults(handler=cmd_broker_config)
    update = actions.add_parser(
        "update",
        help="change a setting on every replica of a broker group or cluster, live "
        "(mqadmin updateBrokerConfig)",
    )
    where = update.add_mutually_exclusive_group()
    where.add_argument(
        "-b",
        "--broker",
        action="append",
        help="a broker group (brokerName) or one replica's address host:port (repeatable)",
    )
    where.add_argument("-c", "--cluster", help="every broker group of this cluster")
    update.add_argument("-k", "--key", required=True, help="the broker.conf key")
    update.add_argument("-v", "--value", required=True, help="its new value")
    update.set_defaults(handler=cmd_broker_config_update)
    for parser in (get, update):
        namesrv_arg(parser, inherited=True)
        add_credential_args(parser, inherited=True)
        add_tls_args(parser, inherited=True)
        json_arg(parser, inherited=True)


def cmd_broker_config(args: argparse.Namespace) -> int:
    args.broker = args.broker or args.config_broker
    args.replica = next((r for r in (args.replica, args.config_replica) if r is not None), 0)
    if not args.broker:
        raise ConfigError("broker-config needs -b GROUP (or: broker-config update -b ... -k -v)")

    async def work(admin: Admin) -> int:
        replicas = (await admin.broker_addresses()).get(args.broker)
        if not replicas or args.replica not in replicas:
            raise LedgerMQError(
                f"no replica {args.replica} of broker group {args.broker!r} is registered"
            )
        settings = await admin.broker_config(replicas[args.replica])
        if args.json:
            print(json.dumps(settings, indent=2, sort_keys=True))
        else:
            for key, value in sorted(settings.items()):
                print(f"{key}={value}")
        return 0

    return run(with_admin(args, work))


_HEADER = ("broker", "id", "replica", "address", "result", "value now", "remark")
_KEYS = ("brokerName", "brokerId", "selfId", "address", "result", "value", "remark")


def cmd_broker_config_update(args: argparse.Namespace) -> int:
    if getattr(args, "config_broker", None):  # absent under the alias updateBrokerConfig
        args.broker = [*(args.broker or ()), args.config_broker]
    if args.broker and args.cluster:
        raise ConfigError("broker-config update takes -b or -c, not both")
    if not args.broker and not args.cluster:
        raise ConfigError("broker-config update needs -b GROUP|HOST:PORT or -c CLUSTER")
    key, value = args.key.strip(), args.value.strip()
    if not key or any(c in key for c in "=:#! \t") or "\n" in value:
        raise ConfigError(f"-k {args.key!r} is not a broker.conf key")

    async def work(admin: Admin) -> int:
        targets, single = await _targets(admin, args)
        rows: list[tuple[object, ...]] = []
        for name, by_id in targets.items():
            rows.extend(await _update_group(admin, name, by_id, key, value, name not in single))
        refused = [r for r in rows if r[4] == "refused"]
        if refused and len(refused) == len(rows):
            remarks = sorted({str(r[6]) for r in refused})
            raise LedgerMQError(f"{key} refused by every replica: {' | '.join(remarks)}")
        emit(args, _HEADER, _KEYS, rows)
        return 0 if all(r[4] == "updated" for r in rows) else 1

    return run(with_admin(args, work))


async def _targets(
    admin: Admin, args: argparse.Namespace
) -> tuple[dict[str, dict[int, str]], set[str]]:
    """broker group -> replica id -> address of every replica the command names, and the
    groups named by a replica's address rather than whole (their other replicas are left)."""
    if args.cluster:
        groups = await admin.broker_addresses(args.cluster)
        if not groups:
            raise LedgerMQError(f"no broker group of cluster {args.cluster!r} is registered")
        return groups, set()
    registered = await admin.broker_addresses()
    targets: dict[str, dict[int, str]] = {}
    single: set[str] = set()
    for item in args.broker:
        if item in registered:
            targets[item] = registered[item]
            single.discard(item)
            continue
        found = [(n, i) for n, ids in registered.items() for i, a in ids.items() if a == item]
        if not found:
            what = "replica address" if ":" in item else "broker group"
            raise LedgerMQError(f"no {what} {item!r} is registered with the NameServers")
        name, broker_id = found[0]
        if targets.get(name) is not registered[name]:  # not already asked whole
            targets.setdefault(name, {})[broker_id] = item
            single.add(name)
    return targets, single


async def _update_group(
    admin: Admin, name: str, by_id: dict[int, str], key: str, value: str, whole: bool
) -> list[tuple[object, ...]]:
    """One row per replica asked, then, when the ``whole`` group was asked, one per
    ``dLegerPeers`` replica that did not answer."""
    rows: list[tuple[object, ...]] = []
    answered: set[str] = set()
    peers: list[str] = []
    for broker_id, address in sorted(by_id.items()):
        try:
            remark = await admin.update_broker_config(address, {key: value})
            result = "updated"
        except MQResponseError as exc:
            remark, result = str(exc), "refused"
        except LedgerMQError as exc:
            rows.append((name, broker_id, "?", address, "unreachable", "", str(exc)))
            continue
        try:
            settings = await admin.broker_config(address)
        except LedgerMQError as exc:
            rows.append((name, broker_id, "?", address, result, "?", f"{remark}; {exc}"))
            continue
        self_id = settings.get("dLegerSelfId", "?")
        answered.add(self_id)
        peers = peers or [p.partition("-")[0] for p in settings.get("dLegerPeers", "").split(";")]
        rows.append((name, broker_id, self_id, address, result, settings.get(key, ""), remark))
    if whole:
        rows.extend(
            (name, "-", peer, "-", "not reached", "", _DOWN)
            for peer in peers
            if peer and peer not in answered
        )
    return rows


_DOWN = "down or not registered: it keeps its old value; run the update again once it is back"
