"""``ledgermq proxy -n NAMESRV``: the stand-alone gRPC proxy (RocketMQ's "cluster" mode), until
SIGTERM or SIGINT.

RocketMQ 5 clients talk to it at one address that never moves; it forwards to each broker
group's current master over remoting (``proxy.cluster``). Once listening it prints
``proxy listening on HOST:PORT`` on stdout, with the real port when ``--listen HOST:0`` asked
for any free one, so scripts and tests can read it. ``--access-key`` / ``--secret-key`` sign
its requests to a cluster with ACL on; ``--tls`` and friends dial brokers that serve TLS.
``--metrics-listen HOST:PORT`` serves Prometheus ``/metrics`` (the process figures) there, and
the line ends ``(metrics http://HOST:PORT/metrics)``.

TLS on the proxy's own gRPC port takes RocketMQ's ``tls.server.*`` keys (``tls.server.mode``,
``tls.server.certPath``, ``tls.server.keyPath``, ``tls.server.trustCertPath``,
``tls.server.need.client.auth``, ``tls.server.keyPassword``, ``tls.test.mode.enable``) from a
file of ``key=value`` lines (``-c proxy.conf``) and ``--set KEY=VALUE`` on top, as a broker's
gRPC door takes them; ``aclEnable=true`` checks each client's ``authorization`` metadata
against RocketMQ's ``plain_acl.yml`` (found under ``rocketmqHome``'s ``conf/`` or at
``aclFilePath``, as the broker finds it); ``enableTopicMessageTypeCheck`` (default true, the
Java proxy's) checks each send against its topic's ``message.type``. The other keys of RocketMQ
5's ``ProxyConfig`` are named in one warning and ignored (``grpcServerPort`` and ``namesrvAddr``
with the flag that sets them here); any other key is an error that names it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Final

from ledgermq.cli.admin_common import namesrv_arg
from ledgermq.cli.credentials_args import add_credential_args, credentials_from
from ledgermq.cli.metrics_args import add_metrics_listen_arg, start_metrics
from ledgermq.cli.serving import address_in_use, wait_for_stop
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError, LedgerMQError, NetworkError
from ledgermq.ledger.config import load_properties
from ledgermq.net import run
from ledgermq.net.tls import TLS_KEYS, tls_server_from_properties
from ledgermq.proxy.cluster import DEFAULT_LISTEN, ClusterProxy
from ledgermq.rocketmq_keys import PROXY_FILE_KEYS, check_keys, ignored_warning, suggestions
from ledgermq.security.acl_files import AclFiles, default_acl_paths
from ledgermq.security.gate import AclGate
from ledgermq.wire.message import DEFAULT_MAX_MESSAGE_BYTES

_KEYS = ("tls.server.", "tls.test.mode.enable", "aclEnable", "aclFilePath", "rocketmqHome",
         "enableTopicMessageTypeCheck", "maxMessageSize")  # fmt: skip
"""The settings the proxy's own port takes."""

_FLAG_FOR: Final = {"grpcServerPort": "--listen HOST:PORT", "namesrvAddr": "-n"}
"""RocketMQ 5 proxy keys whose job a flag of ``ledgermq proxy`` does."""

_log = logging.getLogger(__name__)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    proxy = commands.add_parser(
        "proxy",
        help="run a stand-alone gRPC proxy for RocketMQ 5 clients (until SIGTERM)",
        description="Serve apache.rocketmq.v2.MessagingService at one stable address and "
        "forward to the broker groups' current masters over remoting, so RocketMQ 5 clients "
        "survive a master failover without a route refresh.",
    )
    namesrv_arg(proxy)
    # The older spelling, kept working but not shown: one name for the flag in every command.
    proxy.add_argument("--namesrv", dest="namesrv_addr", default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)  # fmt: skip
    proxy.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
        help=f"where to serve gRPC (default {DEFAULT_LISTEN}, RocketMQ's grpcServerPort; "
        "port 0: any free one)",
    )  # fmt: skip
    proxy.add_argument(
        "--advertise", metavar="HOST",
        help="the host routes name for this proxy (default the listen host; this host's "
        "address when listening on 0.0.0.0)",
    )  # fmt: skip
    proxy.add_argument(
        "--config", "-c", metavar="FILE",
        help="key=value settings of the proxy's own gRPC port: tls.server.* (RocketMQ's keys)",
    )  # fmt: skip
    proxy.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="one setting on top of --config (repeatable), e.g. --set tls.server.mode=enforcing",
    )  # fmt: skip
    add_metrics_listen_arg(proxy)
    add_credential_args(proxy)
    add_tls_args(proxy)
    proxy.set_defaults(handler=cmd_proxy)


def proxy_settings(args: argparse.Namespace) -> dict[str, str]:
    """The ``-c`` file's settings with ``--set`` on top; ``ConfigError`` for a key this proxy
    does not take, or a ``--set`` without ``=``."""
    values = load_properties(args.config) if args.config else {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    ignored = sorted(k for k in values if not k.startswith(_KEYS) and k in PROXY_FILE_KEYS)
    unknown = sorted(k for k in values if not k.startswith(_KEYS) and k not in PROXY_FILE_KEYS)
    if unknown:
        taken = [k for k in TLS_KEYS if k.startswith(_KEYS)] + [k for k in _KEYS if "." not in k]
        named = []
        for key in unknown:
            close = suggestions(key, taken, {*taken, *PROXY_FILE_KEYS})
            named.append(f"{key} (did you mean {' or '.join(close)}?)" if close else key)
        raise ConfigError(
            f"the proxy does not take {', '.join(named)}: its settings are the tls.server.* "
            "keys of its own gRPC port, aclEnable / aclFilePath / rocketmqHome, "
            "enableTopicMessageTypeCheck and maxMessageSize (NameServers: -n; its own account "
            "for the brokers: --access-key)"
        )
    if ignored:
        check_keys({key: values[key] for key in ignored}, (), PROXY_FILE_KEYS, "proxy")  # refusals
        flags = [f"{key}: use {_FLAG_FOR[key]}" for key in ignored if key in _FLAG_FOR]
        _log.warning(
            "%s%s", ignored_warning(ignored, "proxy"), f" ({'; '.join(flags)})" if flags else ""
        )
        for key in ignored:
            del values[key]
    return values


def _flag(values: dict[str, str], key: str, default: bool) -> bool:
    text = values.get(key, str(default)).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, not {values[key]!r}")
    return text == "true"


def _max_message_size(values: dict[str, str]) -> int:
    """``maxMessageSize`` in bytes (RocketMQ's 4 MiB by default; set it as the brokers have it:
    the clients are told it, and a larger body is refused before it is forwarded)."""
    text = values.get("maxMessageSize", str(DEFAULT_MAX_MESSAGE_BYTES)).strip()
    try:
        size = int(text)
    except ValueError:
        raise ConfigError(f"maxMessageSize must be a number of bytes, not {text!r}") from None
    if size < 1024:
        raise ConfigError(f"maxMessageSize {size} is below 1024 bytes")
    return size


def proxy_acl(values: dict[str, str]) -> AclGate | None:
    """The ACL of the proxy's own port, when ``aclEnable`` is true; ``ConfigError`` for a bad
    value or no ACL file (``AclFiles``)."""
    if not _flag(values, "aclEnable", default=False):
        return None
    path = values.get("aclFilePath", "").strip()
    paths = [path] if path else default_acl_paths(values.get("rocketmqHome") or None)
    return AclGate(AclFiles(paths, SystemClock()), "proxy")


def cmd_proxy(args: argparse.Namespace) -> int:
    settings = proxy_settings(args)
    proxy = ClusterProxy(
        args.namesrv_addr,
        args.listen,
        advertise=args.advertise,
        credentials=credentials_from(args),
        tls=tls_from(args),
        tls_server=tls_server_from_properties(settings),
        acl=proxy_acl(settings),
        check_message_type=_flag(settings, "enableTopicMessageTypeCheck", default=True),
        max_message_size=_max_message_size(settings),
    )
    return run(_serve(proxy, args.listen, args.metrics_listen))


async def _serve(proxy: ClusterProxy, listen: str, metrics_listen: str | None = None) -> int:
    try:
        await proxy.start()
    except NetworkError as exc:
        if not address_in_use(exc):
            raise
        raise LedgerMQError(f"{exc}; choose another --listen") from exc
    metrics = None
    try:
        metrics = start_metrics(metrics_listen)
        host = listen.rpartition(":")[0]
        shown = f" (metrics {metrics.url})" if metrics is not None else ""
        print(f"proxy listening on {host}:{proxy.port}{shown}", flush=True)
        await wait_for_stop()
    finally:
        if metrics is not None:
            await asyncio.to_thread(metrics.close)  # joins its thread: not on the loop
        await proxy.close()
    return 0
