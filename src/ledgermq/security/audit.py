"""The audit log: one JSON line per admin request and per refused request.

Who (the access key, or none), from where (the client's IP), what (the request code and its
name, the topic or group it named), the result (allowed or refused, and why). Written through a
logger of its own with a file handler, so a slow disk delays a line, not the event loop's other
work, and operators can rotate it with the usual tools (``copytruncate``). No secret, no
signature and no body is ever written.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Final

__all__ = ["AuditLog"]

_FIELDS_NAMED: Final = ("topic", "b", "consumerGroup", "group", "brokerName", "brokerAddr")
"""extFields worth recording: what the request is about (``b`` is SEND_MESSAGE_V2's topic)."""


class AuditLog:
    """Appends audit lines to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._logger = logging.getLogger(f"ledgermq.audit.{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)

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
        self._logger.info(json.dumps(line, sort_keys=True))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()
