"""ACL files on disk: found where RocketMQ finds them, reloaded when they change.

RocketMQ reads ``$ROCKETMQ_HOME/conf/plain_acl.yml`` and every ``*.yml`` under
``$ROCKETMQ_HOME/conf/acl`` and reloads a file when its modification time changes. Here a
configured path (a file or a directory) replaces those defaults. The files are looked at again
at most once per ``check_interval_ms`` (on the request path, so an idle server does nothing);
a change that does not parse is logged and the configuration in force stays, so a typo made
while the cluster runs never opens or closes it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Final

from ledgermq.errors import ConfigError
from ledgermq.security.acl import AclConfig, AclConfigError, parse_acl_config

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.clock import Clock

__all__ = ["AclFiles", "default_acl_paths"]

_log: Final = logging.getLogger("ledgermq.security")

_Stamp = tuple[tuple[str, int, int], ...]
"""(path, mtime ns, size) of every file, in order: what a change is judged by."""


def default_acl_paths(rocketmq_home: str | None) -> list[str]:
    """RocketMQ's places: ``<home>/conf/plain_acl.yml`` and ``<home>/conf/acl``."""
    home = rocketmq_home or os.environ.get("ROCKETMQ_HOME") or "."
    return [os.path.join(home, "conf", "plain_acl.yml"), os.path.join(home, "conf", "acl")]


def _files_of(paths: Sequence[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                found.extend(
                    os.path.join(root, n) for n in sorted(names) if n.endswith((".yml", ".yaml"))
                )
        elif os.path.isfile(path):
            found.append(path)
    return found


def _stamp(files: Sequence[str]) -> _Stamp:
    stamps = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamps.append((path, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


class AclFiles:
    """The configuration of the ACL files at ``paths``.

    Raises (on construction):
        ConfigError: no ACL file at any of ``paths``, or the files do not make a configuration.
    """

    def __init__(self, paths: Sequence[str], clock: Clock, check_interval_ms: int = 1000) -> None:
        self.paths: Final = tuple(paths)
        self._clock = clock
        self._interval = check_interval_ms
        files = _files_of(self.paths)
        if not files:
            raise ConfigError(
                f"aclEnable=true but there is no ACL file at {' or '.join(self.paths)}: write a "
                "plain_acl.yml there (see the documentation's Security page, "
                "docs/operations/security.md) or give its path"
            )
        stamp = _stamp(files)
        try:
            self._config = self._parse(files)
        except (AclConfigError, OSError) as exc:
            raise ConfigError(f"the ACL cannot be used: {exc}") from None
        self._stamp = stamp
        self._checked_ms = clock.monotonic_ms()
        _log.info(
            "ACL on: %d account(s), %d global white address(es), from %s",
            len(self._config.accounts), len(self._config.global_white), ", ".join(files),
        )  # fmt: skip

    @staticmethod
    def _parse(files: Sequence[str]) -> AclConfig:
        texts = {}
        for path in files:
            with open(path, encoding="utf-8") as f:
                texts[path] = f.read()
        return parse_acl_config(texts)

    def current(self) -> AclConfig:
        """The configuration in force, after a reload if a file changed (checked at most once
        per interval)."""
        now = self._clock.monotonic_ms()
        if now - self._checked_ms >= self._interval:
            self._checked_ms = now
            self.reload_if_changed()
        return self._config

    def reload_if_changed(self) -> bool:
        """Reload now if any file changed, was added or removed; whether a new one is in force."""
        files = _files_of(self.paths)
        stamp = _stamp(files)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        if not files:
            _log.error("every ACL file is gone; the ACL in force stays until one is back")
            return False
        try:
            config = self._parse(files)
        except (AclConfigError, OSError, UnicodeDecodeError) as exc:
            _log.error("ACL change not applied, the ACL in force stays: %s", exc)
            return False
        self._config = config
        _log.info("ACL reloaded: %d account(s) from %s", len(config.accounts), ", ".join(files))
        return True
