"""The audit log: one JSON line per admin request and per refused request.

Who (the access key, or none), from where (the client's IP), what (the request code and its
name, the topic or group it named), the result (allowed or refused, and why). Written through a
logger of its own with a file handler, so a slow disk delays a line, not the event loop's other
work. No secret, no signature and no body is ever written.

Bounded on disk: the file rotates by size, as ``logging.handlers.RotatingFileHandler`` does
(``audit.log`` -> ``audit.log.1`` ... ``audit.log.<backup_count>``, the oldest deleted;
``auditLogMaxBytes`` / ``auditLogBackupCount``), and refusals that repeat (same account, same
connection, same request, same reason) are written once per ``WINDOW_S`` and then summed up in
one line with ``"repeated": <count>`` and a remark ending "(and 2,870 more like it in the last
10 s)" (``ledgermq.security.repeats``). Every refused connection is still named at least once
per window (its address and port); admin requests that were allowed are never summed up.

Readable by its owner only: a new file (and each rotated one) is created 0600. An existing
file that others may read (any "other" permission bit) is narrowed at start, with a WARNING;
group bits are left as the operator set them (0640 for a log-reading group is a choice).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import stat
import time
from typing import TYPE_CHECKING, Any, Final

from ledgermq.clock import SystemClock
from ledgermq.errors import ConfigError
from ledgermq.security.repeats import WINDOW_S, RepeatedLines, alike, more_like_it

if TYPE_CHECKING:
    import io

    from ledgermq.clock import Clock

__all__ = ["DEFAULT_BACKUP_COUNT", "DEFAULT_MAX_BYTES", "FILE_MODE", "AuditLog"]

_FIELDS_NAMED: Final = ("topic", "b", "consumerGroup", "group", "brokerName", "brokerAddr")
"""extFields worth recording: what the request is about (``b`` is SEND_MESSAGE_V2's topic)."""

DEFAULT_MAX_BYTES: Final = 100 * 1024 * 1024
"""``auditLogMaxBytes``: the size at which the file rotates (0: never)."""
DEFAULT_BACKUP_COUNT: Final = 10
"""``auditLogBackupCount``: rotated files kept (at least 1 while the file rotates)."""
FILE_MODE: Final = 0o600

_log: Final = logging.getLogger("ledgermq.security")


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, FILE_MODE)


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    """RotatingFileHandler whose files are created 0600 whatever the umask."""

    def _open(self) -> io.TextIOWrapper:
        # always "a": RotatingFileHandler appends, and renames to rotate
        return open(
            self.baseFilename, "a", encoding=self.encoding, errors=self.errors, opener=_private
        )


def _narrow_mode(path: str) -> None:
    """Take away the "other" bits of an existing audit file (see the module docstring)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    if mode & 0o007:
        os.chmod(path, mode & ~0o007)
        _log.warning(
            "audit log %s was readable by every user (mode %o); now %o",
            path, mode, mode & ~0o007,
        )  # fmt: skip


class AuditLog:
    """Appends audit lines to ``path`` (``max_bytes`` 0: no rotation)."""

    def __init__(
        self,
        path: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backup_count: int = DEFAULT_BACKUP_COUNT,
        clock: Clock | None = None,
    ) -> None:
        if max_bytes < 0 or backup_count < 0 or (max_bytes > 0 and backup_count < 1):
            raise ConfigError(
                "auditLogMaxBytes must be 0 (no rotation) or more, and auditLogBackupCount at "
                f"least 1 when it is not 0, not {max_bytes} and {backup_count}"
            )
        self.path = path
        self._clock = clock or SystemClock()
        _narrow_mode(path)
        self._logger = logging.getLogger(f"ledgermq.audit.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = _PrivateRotatingHandler(
            path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        self._repeats: RepeatedLines[tuple[str, str | None, str, int, str], dict[str, Any]] = (
            RepeatedLines(WINDOW_S)
        )

    def record(
        self,
        *,
        server: str,
        access_key: str | None,
        remote: str,
        code: int,
        request: str,
        fields: dict[str, str],
        allowed: bool,
        remark: str,
    ) -> None:
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "server": server,
            "who": access_key,
            "from": remote,
            "code": code,
            "request": request,
            "about": {k: fields[k] for k in _FIELDS_NAMED if k in fields},
            "result": "allowed" if allowed else "refused",
            "remark": remark,
        }
        if allowed:
            self._logger.info(json.dumps(line, sort_keys=True))
            return
        kind = (server, access_key, remote, code, alike(remark))
        write, due = self._repeats.offer(kind, self._clock.monotonic_ms() / 1000, line)
        self._summarize(due)
        if write:
            self._logger.info(json.dumps(line, sort_keys=True))

    def _summarize(self, due: list[tuple[dict[str, Any], int]]) -> None:
        for example, count in due:
            summary = dict(example)
            summary["time"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            summary["repeated"] = count
            summary["remark"] = f"{example['remark']} {more_like_it(count, WINDOW_S)}"
            self._logger.info(json.dumps(summary, sort_keys=True))

    def close(self) -> None:
        self._summarize(self._repeats.flush())
        self._logger.removeHandler(self._handler)
        self._handler.close()
