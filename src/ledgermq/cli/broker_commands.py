"""``ledgermq broker -c broker.conf``: run one broker replica until SIGTERM / SIGINT.

Settings come from a RocketMQ ``broker.conf`` (its key names, ``dLegerPeers`` and friends), with
``--set key=value`` flags and a few common ones on top. Once serving it prints
``Broker NAME replica ID serving on HOST:PORT (ledger HOST:PORT)`` on stdout, so scripts and
tests can read the port when ``listenPort=0``. A replica whose store fails stops by itself and
exits with ``EXIT_STORE_FAILED`` (74), so that its supervisor restarts it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import TYPE_CHECKING, Final

from ledgermq.broker.config import DEFAULT_LISTEN_PORT, BrokerConfig
from ledgermq.broker.server import BrokerServer
from ledgermq.cli.serving import EXIT_STORE_FAILED, address_in_use, wait_for_stop
from ledgermq.errors import ConfigError, LedgerMQError, NetworkError
from ledgermq.ledger.config import load_properties
from ledgermq.net import run
from ledgermq.proxy.local import GrpcDoor

if TYPE_CHECKING:
    import argparse

_DEFAULT: Final = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
"""The settings a broker has when neither a flag nor broker.conf gives one (for ``--help``)."""

_FLAGS = {
    "listen_port": "listenPort",
    "namesrv_addr": "namesrvAddr",
    "store_dir": "storePathRootDir",
    "self_id": "dLegerSelfId",
    "peers": "dLegerPeers",
    "broker_name": "brokerName",
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("broker", help="run one broker replica (until SIGTERM)")
    # Each flag is unset by default so that the file's key applies: the help says which key
    # it overrides and what applies when neither gives one (the generic "(default: ...)" of
    # DefaultsHelpFormatter only shows set defaults).
    parser.add_argument(
        "--config",
        "-c",
        help="broker.conf (RocketMQ key=value settings; default: none, flags and defaults only)",
    )
    parser.add_argument(
        "--listen-port",
        type=int,
        help=f"remoting port, over listenPort (default {DEFAULT_LISTEN_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--namesrv-addr",
        "-n",
        help='NameServers, "host:port;host:port", over namesrvAddr (default: none, the broker '
        "registers with no NameServer)",
    )
    parser.add_argument("--store-dir", help="storePathRootDir, the data folder (default ~/store)")
    parser.add_argument(
        "--self-id", help=f"dLegerSelfId, this replica's id (default {_DEFAULT['dleger_self_id']})"
    )
    parser.add_argument(
        "--peers",
        help='dLegerPeers, "n0-host:port;n1-host:port;..." (no default: here or in the file)',
    )
    parser.add_argument(
        "--broker-name",
        help=f"brokerName, also the ledger group (default {_DEFAULT['broker_name']})",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any broker.conf setting over the file, e.g. --set flushDiskType=SYNC_FLUSH "
        "(repeatable; default: none)",
    )
    parser.set_defaults(handler=cmd_broker)


def broker_settings(args: argparse.Namespace) -> dict[str, str]:
    values = load_properties(args.config) if args.config else {}
    for attr, key in _FLAGS.items():
        value = getattr(args, attr)
        if value is not None:
            values[key] = str(value)
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        values[key.strip()] = value.strip()
    return values


def cmd_broker(args: argparse.Namespace) -> int:
    config = BrokerConfig.from_properties(broker_settings(args))
    return run(_serve(config, args.config))


async def _serve(config: BrokerConfig, config_file: str | None) -> int:
    server = BrokerServer(config, grpc_door=GrpcDoor, config_file=config_file)
    ledger_host, ledger_port = config.ledger_config().address
    try:
        await server.start()
    except BaseException as exc:
        # What did start (the ledger replica, its store threads) must stop, or the process
        # would hang at exit instead of reporting the error.
        with contextlib.suppress(Exception):
            await server.close()
        if not isinstance(exc, NetworkError) or not address_in_use(exc):
            raise
        if exc.address is not None and exc.address.endswith(f":{ledger_port}"):
            fix = "give this replica another ledger port in --peers (dLegerPeers)"
        else:
            fix = "choose another remoting port with --listen-port (listenPort)"
        raise LedgerMQError(f"{exc}; another process uses it: stop it, or {fix}") from exc
    metrics = server.ledger.metrics_port
    shown = (
        f", metrics http://{config.ledger_config().metrics_host}:{metrics}/metrics"
        if metrics
        else ""
    )
    print(
        f"Broker {config.broker_name} replica {config.dleger_self_id} serving on "
        f"{server.address} (ledger {ledger_host}:{ledger_port}{shown}"
        + (f"; gRPC {server.grpc_address})" if server.grpc_address else ")"),
        flush=True,
    )
    await wait_for_stop(server.wait_closed())
    # A master stopping on SIGTERM first hands its group to the most caught-up follower (at
    # most 2 s), so that a rolling restart costs a transfer, not an election timeout.
    await server.ledger.hand_over_leadership()
    await server.close()
    if server.failure is not None:
        print(
            f"ledgermq: broker {config.broker_name} replica {config.dleger_self_id} stopped: "
            f"its store failed ({server.failure}); exit status {EXIT_STORE_FAILED}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_STORE_FAILED
    return 0
