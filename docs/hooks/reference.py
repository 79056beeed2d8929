"""The documentation site's Reference pages, generated from the code at every build.

A mkdocs hook (``hooks:`` in ``mkdocs.yml``): ``on_files`` adds the pages below to the site, made
from what the code itself defines, so that the reference cannot drift from the program:

- ``reference/cli.md``: every command and option, from the argparse parser ``ledgermq`` runs
  (``ledgermq.cli.main.build_parser``), each command's ``--help`` as the program prints it;
- ``reference/configuration.md``: every key of ``broker.conf`` (with its type, its default and
  whether ``broker-config update`` changes it live), of ``namesrv.conf``, of a ledger replica's
  config file and the ``tls.*`` keys, from the config classes and their key tables;
- ``reference/metrics.md``: every series a replica's ``/metrics`` serves, from the collectors;
- ``reference/protocol.md``: the remoting request codes (and what each needs from the ACL), the
  ledger's codes and the gRPC RPCs, from the enums and the vendored ``.proto`` descriptor;
- ``reference/errors.md``: the remoting response codes and the exception classes.

The page builders are plain functions returning Markdown (``PAGES``), so that a test
(``tests/docs/test_reference.py``) checks them without building the site.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import inspect
import itertools
import os
import textwrap
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["PAGES", "cli_commands", "on_files"]

_GENERATED = (
    '!!! note "Generated"\n    This page is generated from the code at every build of the site '
    "(`docs/hooks/reference.py`); edit the code, not this page.\n"
)


# ---------------------------------------------------------------------------------- CLI
def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The commands ``--help`` shows under ``parser`` (not the hidden mqadmin aliases)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [(shown.dest, action.choices[shown.dest]) for shown in action._choices_actions]
    return []


def cli_commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command of ``ledgermq`` as ``("ledgermq admin topic-create", parser)``, depth first,
    ``ledgermq`` itself first."""
    from ledgermq.cli.main import build_parser  # noqa: PLC0415 - imported when a page is built

    out: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        out.append((name, parser))
        for child, sub in _subcommands(parser):
            walk(f"{name} {child}", sub)

    walk("ledgermq", build_parser())
    return out


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps help to ``$COLUMNS``: the same width on every machine."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def cli_page() -> str:
    from ledgermq.cli.client_commands import MQADMIN_NAMES  # noqa: PLC0415

    commands = cli_commands()
    lines = [
        "# Command line",
        "",
        _GENERATED,
        (
            "Every command of `ledgermq`, with its options and their defaults, as `--help` prints "
            "them. Options go after the command they belong to; no long option may be abbreviated. "
            "The admin commands also answer to RocketMQ's `mqadmin` names (table at the end)."
        ),
        "",
    ]
    with _columns(100):
        for name, parser in commands:
            depth = min(name.count(" ") + 1, 4)
            lines += [f"{'#' * (depth + 1)} `{name}`", ""]
            lines += ["```text", parser.format_help().rstrip(), "```", ""]
    lines += [
        "## mqadmin names",
        "",
        "Hidden aliases of `ledgermq admin` commands (the options are LedgerMQ's):",
        "",
        "| mqadmin | ledgermq admin |",
        "|---|---|",
    ]
    lines += [f"| `{alias}` | `{name}` |" for alias, name in MQADMIN_NAMES.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- config
_BROKER_MEANINGS = {
    "brokerClusterName": "cluster the group registers in",
    "brokerName": "the broker group; all its replicas share it",
    "namesrvAddr": "NameServers, `host:port;host:port`",
    "storePathRootDir": (
        "this replica's data: `dledger-<id>/`, `consumequeue/`, `index/`, `config/`"
    ),
    "enableDLegerCommitLog": (
        "`false` is refused: every LedgerMQ broker is a ledger group (of one, at least)"
    ),
    "dLegerPeers": "`n0-host:port;n1-host:port;...`, the ledger ports (required)",
    "dLegerSelfId": "this replica; a letter and a number (slave broker id = number + 1)",
    "deleteWhen": "hours of the day at which expired files are deleted",
    "cleanFileForciblyEnable": "delete committed files early when the disk is nearly full",
    "diskMaxUsedSpaceRatio": "percent of disk above which expired files go at any hour",
    "mappedFileSizeCommitLog": "ledger data file size (equal on all replicas)",
    "mappedFileSizeConsumeQueue": (
        "ConsumeQueue file size (a multiple of 20; sparse, so a queue of ten messages takes 24 KiB)"
    ),
    "maxMessageSize": "largest message (or batch), bytes",
    "autoCreateTopicEnable": "create topics on first send (`TBW102`)",
    "autoCreateSubscriptionGroup": "create subscription groups on first use",
    "defaultTopicQueueNums": "queue cap of auto-created topics",
    "brokerPermission": "2 write, 4 read, 6 both",
    "longPollingEnable": "hold pulls until a message arrives (else `shortPollingTimeMills`)",
    "shortPollingTimeMills": "how long a pull that found nothing waits without long polling, ms",
    "registerNameServerPeriod": "ms between periodic registrations (role changes register at once)",
    "messageDelayLevel": "the delay levels (18)",
    "maxWaitAckTimeMs": (
        "a send not acknowledged by a quorum by then fails with SYSTEM_ERROR "
        "(it may still be stored)"
    ),
    "preferredLeaderId": "replica(s) that should be master when live (`;`-separated)",
    "msgTraceTopicName": "the trace topic `traceTopicEnable` creates",
    "aclSecretKey": "the secret of `aclAccessKey` (shown as `******`)",
}
"""What a ``broker.conf`` key means, for the keys whose field has no docstring of its own."""

_BROKER_DEFAULTS = {
    "grpcServerPort": "8081 with the default `listenPort` 10911, a free port with `listenPort` "
    "0, else `listenPort` - 1",
    "dLegerGroup": "`brokerName`",
    "storePathRootDir": "`~/store`",
    "dLegerPeers": "(required)",
}
"""Defaults the config derives from other keys (``BrokerConfig.from_properties``)."""


def _attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written under a dataclass's fields (a string just below the field)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _kind(annotation: object) -> str:
    text = str(annotation)
    return {
        "bool": "boolean",
        "int": "integer",
        "int | None": "integer",
        "float": "number",
        "str": "string",
        "str | None": "string",
    }.get(text, "list" if "tuple" in text or "Mapping" in text else text)


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value is None:
        return "(none)"
    if value in ("", (), {}):
        return "(empty)"
    return f"`{value}`"


def _default(f: dataclasses.Field[Any]) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def broker_keys() -> list[tuple[str, str, str, str, str]]:
    """Every ``broker.conf`` key LedgerMQ reads: (key, type, default, live, meaning)."""
    from ledgermq.broker.config import BrokerConfig, broker_file_key  # noqa: PLC0415
    from ledgermq.broker.live_config import LIVE_KEYS  # noqa: PLC0415

    docs = _attribute_docs(BrokerConfig)
    rows = []
    for f in dataclasses.fields(BrokerConfig):
        if f.name == "tls":
            continue  # the tls.* keys have a table of their own
        key = broker_file_key(f.name)
        default = _BROKER_DEFAULTS.get(key) or _show(_default(f))
        live = f"live: {LIVE_KEYS[key]}" if key in LIVE_KEYS else "restart"
        meaning = docs.get(f.name) or _BROKER_MEANINGS.get(key, "")
        rows.append((key, _kind(f.type), default, live, meaning))
    return rows


def namesrv_keys() -> list[tuple[str, str, str, str]]:
    """Every ``namesrv.conf`` key but ``tls.*``: (key, type, default, meaning)."""
    from ledgermq.namesrv.config import FILE_KEYS, NameServerConfig  # noqa: PLC0415

    meanings = _args_section(NameServerConfig.__doc__ or "")
    types = {f.name: f for f in dataclasses.fields(NameServerConfig)}
    rows = []
    for key, name in FILE_KEYS.items():
        if name == "tls":
            continue
        f = types[name]
        rows.append((key, _kind(f.type), _show(_default(f)), meanings.get(name, "")))
    return rows


def _args_section(doc: str) -> dict[str, str]:
    """``name: text`` entries of a Google-style ``Args:`` section, joined to one line each."""
    out: dict[str, str] = {}
    current = ""
    inside = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped == "Args:":
            inside = True
            continue
        if not inside or not stripped:
            continue
        head, sep, rest = stripped.partition(": ")
        if (
            sep
            and head.isidentifier()
            and line.startswith(" " * 8)
            and not line.startswith(" " * 12)
        ):
            current = head
            out[current] = rest
        elif current:
            out[current] += " " + stripped
    return out


def ledger_keys() -> list[tuple[str, str]]:
    """Every key of a ledger replica's config file (``ledgermq ledger serve --config``) but
    ``tls.*``: (key, what it sets)."""
    from ledgermq.ledger.config import FILE_KEYS  # noqa: PLC0415

    return [(key, name) for key, name in FILE_KEYS.items() if name != "tls"]


def _ledger_default(name: str) -> str:
    """The default of a ledger config field named as ``ledger.config.FILE_KEYS`` names it
    (``raft.x``: a ``RaftConfig`` field, ``retention.x``: a ``RetentionConfig`` one)."""
    from ledgermq.ledger.config import LedgerConfig  # noqa: PLC0415
    from ledgermq.raft.config import RaftConfig  # noqa: PLC0415
    from ledgermq.store.retention import RetentionConfig  # noqa: PLC0415

    owner, _, field_name = name.rpartition(".")
    cls = {"": LedgerConfig, "raft": RaftConfig, "retention": RetentionConfig}[owner]
    found = {f.name: f for f in dataclasses.fields(cls)}.get(field_name)
    if found is None:
        return ""
    if found.default is dataclasses.MISSING and found.default_factory is dataclasses.MISSING:
        return "(required)"
    return _show(_default(found))


def proxy_keys() -> list[str]:
    """The keys ``ledgermq proxy -c FILE`` takes for its own port (``tls.server.*`` spelt out)."""
    from ledgermq.cli.proxy_commands import _KEYS  # noqa: PLC0415
    from ledgermq.net.tls import TLS_KEYS  # noqa: PLC0415

    out = []
    for key in _KEYS:
        out += sorted(k for k in TLS_KEYS if k.startswith(key)) if key.endswith(".") else [key]
    return out


def tls_keys() -> list[str]:
    from ledgermq.net.tls import TLS_KEYS  # noqa: PLC0415

    return list(TLS_KEYS)


def config_page() -> str:
    from ledgermq.broker.config import broker_file_keys  # noqa: PLC0415
    from ledgermq.ledger.config import FILE_KEYS as LEDGER_FILE_KEYS  # noqa: PLC0415
    from ledgermq.rocketmq_keys import BROKER_FILE_KEYS, NAMESRV_FILE_KEYS  # noqa: PLC0415

    lines = [
        "# Configuration keys",
        "",
        _GENERATED,
        (
            "How the files are read, what is ignored and what is refused: "
            "[Configuration](../operations/configuration.md). *Live* keys change with "
            "`ledgermq admin broker-config update` while the broker runs; the others need a "
            "restart."
        ),
        "",
        "## broker.conf",
        "",
        "| key | type | default | live | meaning |",
        "|---|---|---|---|---|",
    ]
    for key, kind, default, live, meaning in broker_keys():
        lines.append(f"| `{key}` | {kind} | {_cell(default)} | {_cell(live)} | {_cell(meaning)} |")
    old = sorted(k for k in broker_file_keys() if k.startswith("maped"))
    lines += [
        "",
        (
            f"RocketMQ's older spellings {', '.join(f'`{k}`' for k in old)} are read too. "
            f"Besides these, the broker accepts the {len(BROKER_FILE_KEYS)} other keys of RocketMQ "
            "4.9's and 5.x's broker configuration classes (`src/ledgermq/rocketmq_keys.py`) and "
            "names them in one WARNING line at start; any other key is an error that names the "
            "closest known ones."
        ),
        "",
        "## namesrv.conf",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for key, kind, default, meaning in namesrv_keys():
        lines.append(f"| `{key}` | {kind} | {_cell(default)} | {_cell(meaning)} |")
    lines += [
        "",
        (
            "The NameServer also accepts, with one WARNING line, the "
            f"{len(NAMESRV_FILE_KEYS)} keys of RocketMQ's NameServer configuration classes."
        ),
        "",
        "## A ledger replica's config file",
        "",
        "`ledgermq ledger serve --config FILE` (DLedger's `DLedgerConfig` names; flags win):",
        "",
        "| key | default | sets |",
        "|---|---|---|",
    ]
    for key, name in ledger_keys():
        lines.append(f"| `{key}` | {_cell(_ledger_default(name))} | `{name}` |")
    lines += [
        "",
        (
            f"Unknown keys are refused at start ({len(LEDGER_FILE_KEYS)} keys are known, "
            "`tls.*` included)."
        ),
        "",
        "## ledgermq proxy",
        "",
        (
            "`ledgermq proxy -c FILE` (and `--set KEY=VALUE`) takes these keys for its own gRPC "
            "port ([The stand-alone proxy](../guides/proxy.md)); the other keys of RocketMQ 5's "
            "`ProxyConfig` are named in one WARNING line and ignored:"
        ),
        "",
    ]
    lines += [f"- `{key}`" for key in proxy_keys()]
    lines += [
        "",
        "## tls.*",
        "",
        (
            "RocketMQ's `TlsSystemConfig` names, read by the broker, the NameServer, a ledger "
            "replica and the proxy ([Security](../operations/security.md#tls)):"
        ),
        "",
    ]
    lines += [f"- `{key}`" for key in tls_keys()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- metrics
def metric_families() -> list[tuple[str, str, str, tuple[str, ...], str]]:
    """Every family a broker replica's ``/metrics`` serves: (name as scraped, type, help,
    label names, source)."""
    from ledgermq.broker.metrics import BrokerMetrics  # noqa: PLC0415
    from ledgermq.clock import SystemClock  # noqa: PLC0415
    from ledgermq.ledger.metrics import LedgerMetrics  # noqa: PLC0415

    ledger = LedgerMetrics("cluster", "broker", "n0")
    ledger.append_error("EXPIRED")  # labelled children exist once used: use each once
    ledger.set_replication_lag("n1", 0)
    ledger.set_replication_lags({"n1": 0, "n3": 0}, ["n3"])  # a learner's catch-up series
    broker = BrokerMetrics("cluster", "broker", "n0", SystemClock())
    out = []
    try:
        sources: list[tuple[str, Callable[[], Any]]] = [
            ("ledger", ledger.registry.collect),
            ("broker", broker.collect),
        ]
        for source, collect in sources:
            for family in collect():
                labels: set[str] = set(getattr(family, "_labelnames", ()))
                for sample in family.samples:
                    labels.update(sample.labels)
                labels -= {"le", "quantile"}
                name = family.name + ("_total" if family.type == "counter" else "")
                kind = "process" if family.name.startswith(("process_", "python_")) else source
                order = ("cluster", "broker", "replica")
                ordered = tuple(x for x in order if x in labels) + tuple(
                    sorted(labels - set(order))
                )
                out.append((name, family.type, family.documentation, ordered, kind))
    finally:
        ledger.close()
    return out


def metrics_page() -> str:
    lines = [
        "# Metrics",
        "",
        _GENERATED,
        (
            "What a broker replica's Prometheus endpoint serves (`metricsPort`): the broker's "
            "series, its ledger replica's and the process figures. A standalone ledger replica "
            "(`ledgermq ledger serve --metrics-port`) serves the ledger's and the process "
            "figures; the NameServer (`metricsPort`), `ledgermq proxy` and `ledgermq console` "
            "(`--metrics-listen`) serve the process figures. Counters are scraped with `_total`, "
            "histograms as `_bucket`, `_sum` and `_count`. How to scrape them and the Grafana "
            "dashboard: [Monitoring](../operations/monitoring.md)."
        ),
        "",
    ]
    titles = {
        "broker": "Broker",
        "ledger": "Ledger replica",
        "process": "Process (every server)",
    }
    families = metric_families()
    for source, title in titles.items():
        lines += [f"## {title}", "", "| metric | type | labels | meaning |", "|---|---|---|---|"]
        for name, kind, doc, labels, src in families:
            if src == source:
                shown = ", ".join(f"`{label}`" for label in labels)
                lines.append(f"| `{name}` | {kind} | {shown} | {_cell(doc)} |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- protocol
_RPC_ANSWERS_PAGE = "../guides/v5-clients.md#what-each-rpc-answers"


def grpc_methods() -> list[str]:
    """The RPCs of RocketMQ 5's ``MessagingService``, from the vendored descriptor."""
    from ledgermq.proxy.protocol import service_pb2  # noqa: PLC0415

    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    return [method.name for method in service.methods]


def protocol_page() -> str:
    from ledgermq.security.acl.resources import (  # noqa: PLC0415
        ACCOUNT_ONLY_CODES,
        ADMIN_CODES,
        RESOURCE_CODES,
    )
    from ledgermq.wire.codes import LedgerRequestCode, MQRequestCode  # noqa: PLC0415

    def need(code: MQRequestCode) -> str:
        if code in ADMIN_CODES:
            return "an admin account"
        if code in ACCOUNT_ONLY_CODES:
            return "a valid account"
        if code in RESOURCE_CODES:
            return "PUB / SUB on the topic or group it names"
        return "an admin account (unclassified)"

    lines = [
        "# Request codes and RPCs",
        "",
        _GENERATED,
        "## Remoting request codes",
        "",
        (
            "Every code of RocketMQ's remoting protocol LedgerMQ knows (`ledgermq.wire.codes`): "
            "the requests its brokers and NameServers serve (which server serves which: "
            "[The broker](../design/broker.md#requests-served)), and the few a broker sends to "
            "its clients (`CHECK_TRANSACTION_STATE`, `NOTIFY_CONSUMER_IDS_CHANGED`, "
            "`GET_CONSUMER_RUNNING_INFO` passed on). The ACL column is what a request needs "
            "when `aclEnable` is on ([Security](../operations/security.md)). A code not listed "
            "is answered `REQUEST_CODE_NOT_SUPPORTED`."
        ),
        "",
        "| code | name | ACL |",
        "|---|---|---|",
    ]
    lines += [f"| {int(c)} | `{c.name}` | {need(c)} |" for c in sorted(MQRequestCode, key=int)]
    lines += [
        "",
        "## Ledger request codes",
        "",
        "DLedger's codes, on the ledger port (replica to replica, and the ledger clients):",
        "",
        "| code | name |",
        "|---|---|",
    ]
    lines += [f"| {int(c)} | `{c.name}` |" for c in sorted(LedgerRequestCode, key=int)]
    lines += [
        "",
        "## gRPC (RocketMQ 5's `apache.rocketmq.v2.MessagingService`)",
        "",
        (
            "Served by every replica's gRPC door and by `ledgermq proxy`; what each answers is in "
            f"[RocketMQ 5 clients]({_RPC_ANSWERS_PAGE})."
        ),
        "",
    ]
    lines += [f"- `{name}`" for name in grpc_methods()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- errors
def _exceptions() -> list[tuple[str, str, str]]:
    from ledgermq import errors  # noqa: PLC0415

    out = []
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, Exception):
            doc = " ".join((cls.__doc__ or "").split())
            parent = cls.__mro__[1].__name__
            out.append((name, parent, doc))
    return out


def errors_page() -> str:
    from ledgermq.wire.codes import MQResponseCode  # noqa: PLC0415

    lines = [
        "# Errors",
        "",
        _GENERATED,
        (
            "Every refusal is one sentence naming the rule and the value involved; the command "
            "line prints it as one `ledgermq: error: ...` line with exit status 1 (2 for bad "
            "usage), never a traceback."
        ),
        "",
        "## Remoting response codes",
        "",
        "| code | name |",
        "|---|---|",
    ]
    lines += [f"| {int(c)} | `{c.name}` |" for c in sorted(MQResponseCode, key=int)]
    lines += [
        "",
        "## Exceptions (`ledgermq.errors`)",
        "",
        "What the Python API raises; each class says what the caller should do about it.",
        "",
        "| exception | is a | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{n}` | `{p}` | {_cell(d)} |" for n, p, d in _exceptions()]
    return "\n".join(lines) + "\n"


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/configuration.md": config_page,
    "reference/metrics.md": metrics_page,
    "reference/protocol.md": protocol_page,
    "reference/errors.md": errors_page,
}
"""Site path -> builder of the generated Reference pages."""


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the site."""
    from mkdocs.structure.files import File  # noqa: PLC0415

    for path, build in PAGES.items():
        files.append(File.generated(config, path, content=build()))
    return files
