"""UPDATE_BROKER_CONFIG (request code 25): which ``broker.conf`` keys change while a broker runs.

RocketMQ's ``mqadmin updateBrokerConfig -k KEY -v VALUE`` sends the keys as Java properties text
in the request body; the broker sets them on its configuration objects and rewrites its
``broker.conf``, and GET_BROKER_CONFIG (26) shows the new values. Here a key changes live only
where every reader of it takes the current ``BrokerState.config`` on each use (sends, pulls,
heartbeats, topic auto-creation, the registration loop) or is told of the change (the ledger
store's retention). The other keys are read once, at start, to open ports, files and the ledger
group: a request naming any of them is refused whole, nothing changed, with a remark that names
them and says a restart is needed. Values are never echoed in remarks (secrets go through here).

A broker started from one of the sample files LedgerMQ ships (``conf/``, ``deploy/conf/``, in a
clone or inside the installed package; each carries a ``SAMPLE_MARKER`` comment) has every update
refused, with a remark that says to start from an operator's copy (``ledgermq init-conf DIR``,
which leaves the marker out): rewriting a sample would change a tracked file of the repository,
or a file of the installed package that the next upgrade overwrites, and applying the update
without persisting it would lose it at the next restart.
"""

from __future__ import annotations

import asyncio
import difflib
import os
from typing import TYPE_CHECKING, Final

from ledgermq.broker.config import broker_file_keys
from ledgermq.errors import ConfigError
from ledgermq.net.tls import TLS_KEYS
from ledgermq.rocketmq_keys import BROKER_FILE_KEYS
from ledgermq.store.segment import fsync_directory

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.broker.config import BrokerConfig

__all__ = [
    "LIVE_KEYS",
    "RETENTION_KEYS",
    "SAMPLE_MARKER",
    "LiveConfig",
    "is_sample_file",
    "parse_properties",
    "plan_update",
    "rewrite_properties",
    "write_config_file",
]

LIVE_KEYS: Final[Mapping[str, str]] = {
    "brokerPermission": "checked on every send and pull (2 write, 4 read, 6 both)",
    "autoCreateTopicEnable": "read when a send names an unknown topic",
    "autoCreateSubscriptionGroup": "read when a heartbeat names an unknown group",
    "defaultTopicQueueNums": "queues of topics created from then on",
    "enablePropertyFilter": "read on every SQL92 pull and CHECK_CLIENT_CONFIG",
    "enableTopicMessageTypeCheck": "read on every v5 send, route and client settings answer",
    "longPollingEnable": "read on every pull that finds nothing",
    "shortPollingTimeMills": "read on every pull that finds nothing",
    "maxMessageSize": "checked on every send; at most the value the broker started with",
    "registerNameServerPeriod": "read by the registration loop every round",
    "fileReservedTime": "handed to the ledger store's next retention pass",
    "deleteWhen": "handed to the ledger store's next retention pass",
    "cleanFileForciblyEnable": "handed to the ledger store's next retention pass",
    "diskMaxUsedSpaceRatio": "handed to the ledger store's next retention pass",
    "preferredLeaderId": "handed to the ledger, whose leader checks it every second",
}
"""The keys UPDATE_BROKER_CONFIG changes without a restart, and why that is safe."""

RETENTION_KEYS: Final = frozenset(
    {"fileReservedTime", "deleteWhen", "cleanFileForciblyEnable", "diskMaxUsedSpaceRatio"}
)
"""Live keys the ledger store must be told of (it holds its own ``RetentionConfig``)."""

_RESTART_WHY: Final[Mapping[str, str]] = {
    "flushDiskType": "the ledger sets its group commit up at start; switching under sends in "
    "flight could acknowledge one before its fsync",
    "aclEnable": "the remoting and gRPC doors take their ACL gate at start; one door open and "
    "one closed would be worse than either",
    "messageDelayLevel": "one timer per delay level runs from start",
}


SAMPLE_MARKER: Final = "ledgermq-sample:"
"""A comment line starting ``# ledgermq-sample:`` marks a configuration file shipped with
LedgerMQ (a sample, never an operator's file); ``ledgermq init-conf`` drops that line from its
copies."""

_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The installed ``ledgermq`` package: files under it belong to the package, not the operator."""


def is_sample_file(path: str) -> bool:
    """Whether ``path`` is one of LedgerMQ's shipped samples: inside the installed package, or
    marked with ``SAMPLE_MARKER`` in a comment line. Unreadable: not a sample (the rewrite then
    fails on its own, with its own error)."""
    real = os.path.realpath(path)
    if os.path.commonpath([real, _PACKAGE_DIR]) == _PACKAGE_DIR:
        return True
    try:
        with open(real, encoding="utf-8", errors="replace") as f:
            return any(line.lstrip("#! \t").startswith(SAMPLE_MARKER) for line in f)
    except OSError:
        return False


def parse_properties(body: bytes) -> dict[str, str]:
    """The request body as RocketMQ's ``MixAll.string2Properties`` reads it: ``key=value``
    lines, ``#`` / ``!`` comments and blank lines skipped."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("the settings are not UTF-8 text") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {stripped[:60]!r}")
        values[key.strip()] = value.strip()
    return values


def plan_update(
    current: BrokerConfig, started: BrokerConfig, values: Mapping[str, str]
) -> BrokerConfig:
    """The config ``values`` make of ``current``, validated; nothing is applied here.

    Args:
        current: the config in force.
        started: the config the broker started with (what its ports, files and ledger were
            sized for: ``maxMessageSize`` may not grow past it).
        values: ``broker.conf`` key -> new value text.

    Raises:
        ConfigError: no keys; an unknown key; a key that needs a restart (all named); a bad
            value (``BrokerConfig``'s own check).
    """
    if not values:
        raise ConfigError("no setting to update")
    known = broker_file_keys()
    unused = sorted(key for key in values if key not in known and key in BROKER_FILE_KEYS)
    if unused:
        raise ConfigError(
            f"not changed: {', '.join(unused)}: RocketMQ setting(s) LedgerMQ has no use for "
            "(its ledger does that job); nothing to change"
        )
    unknown = sorted(key for key in values if key not in known and key not in TLS_KEYS)
    if unknown:
        named = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
            named.append(f"{key} (did you mean {close[0]}?)" if close else key)
        raise ConfigError(f"unknown broker setting(s): {', '.join(named)}")
    restart = sorted(key for key in values if key not in LIVE_KEYS)
    if restart:
        named = [f"{key} ({_RESTART_WHY[key]})" if key in _RESTART_WHY else key for key in restart]
        raise ConfigError(
            f"not changed: {'; '.join(named)} can only change with a restart (edit broker.conf "
            f"and restart the replica); live: {', '.join(sorted(LIVE_KEYS))}"
        )
    updated = current.with_changes(values)
    if updated.max_message_size > started.max_message_size:
        raise ConfigError(
            f"not changed: maxMessageSize can grow live only up to {started.max_message_size}, "
            "the value this broker started with (its ledger sized entries for it); restart to "
            "go higher"
        )
    return updated


def rewrite_properties(text: str, values: Mapping[str, str]) -> str:
    """``text`` (a ``broker.conf``) with each key of ``values`` set: its first line rewritten in
    place, later duplicates dropped, keys it lacked appended. Comments and order stay."""
    lines = text.splitlines()
    out: list[str] = []
    done: set[str] = set()
    for line in lines:
        stripped = line.strip()
        key = stripped.partition("=")[0].strip()
        if stripped and stripped[0] not in "#!" and key in values:
            if key not in done:
                out.append(f"{key}={values[key]}")
                done.add(key)
            continue
        out.append(line)
    out.extend(f"{key}={value}" for key, value in values.items() if key not in done)
    return "\n".join(out) + "\n"


def write_config_file(path: str, values: Mapping[str, str]) -> None:
    """Rewrite ``path`` with ``values`` set, atomically and durably (a crash leaves the old
    file or the new one, never half of each), as RocketMQ's broker persists updates. The new
    file gets the old one's permissions from its creation: a ``broker.conf`` may hold
    ``aclSecretKey``, and a moment of 0644 would show it.

    Raises:
        OSError: the file cannot be read or replaced (the caller then changes nothing).
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
        mode = os.fstat(f.fileno()).st_mode & 0o7777
    data = rewrite_properties(text, values).encode("utf-8")
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # O_CREAT's mode passes through the umask; the old file's did not
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


class LiveConfig:
    """One broker's UPDATE_BROKER_CONFIG bookkeeping: the config it started with, the file it
    came from, and a lock so that each update plans from the config the last one left."""

    def __init__(self, started: BrokerConfig, path: str | None) -> None:
        self.started = started
        """What ports, files and the ledger were sized for."""
        self.path = path
        """The ``broker.conf`` the broker was started from (None: flags only, not persisted)."""
        self._lock = asyncio.Lock()

    async def update(
        self, current: BrokerConfig, body: bytes
    ) -> tuple[BrokerConfig, dict[str, str]]:
        """The new config and the keys changed, written to the file first (so that a change
        the file could not take is not applied either).

        Raises:
            ConfigError: refused (``plan_update``), nothing changed.
            OSError: the file could not be rewritten, nothing changed.
        """
        values = parse_properties(body)
        async with self._lock:
            updated = plan_update(current, self.started, values)
            path = self.path
            if path is not None and await asyncio.to_thread(is_sample_file, path):
                raise ConfigError(
                    f"not changed: this broker was started from {path}, a sample that "
                    "ships with LedgerMQ, which an update does not rewrite; write your own copy "
                    "with `ledgermq init-conf DIR`, restart the broker with -c on the copy, and "
                    "update again"
                )
            if self.path:
                await asyncio.to_thread(write_config_file, self.path, values)
        return updated, values
