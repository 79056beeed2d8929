"""Save modes of ``df.write.format("ledgermq")``: a topic is a log that is only appended to.

Spark's ``DataFrameWriter`` starts in mode ``ErrorIfExists`` and, for every Python data source,
refuses ``ErrorIfExists`` and ``Ignore`` in the JVM (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``)
before any of the source's code runs; only ``append`` and ``overwrite`` reach it (as
``writer(schema, overwrite)``). So ``df.write.format("ledgermq").save()``, what users write,
failed. Those two modes ask whether the target "exists", and a topic has no such state to
test: it always exists as a log (or is created on first write, as a producer's first send
creates it), and writing to it is appending.

``install()`` wraps pyspark's ``DataFrameWriter.save`` (classic and Spark Connect) in this
driver process so that a ``ledgermq`` write resolves its mode here: no mode, or ``append``,
appends; ``overwrite``, ``error`` / ``errorifexists`` and ``ignore`` are refused with a
sentence saying why (``save_mode``). Writes to every other format are untouched. Importing
``ledgermq.spark.source`` (which ``spark.dataSource.register(LedgerMQDataSource)`` does) and
``ledgermq.spark.local.local_session`` install it; a driver that only relies on Spark's
auto-registration can call it itself. ``LedgerMQDataSource.writer`` refuses ``overwrite``
with the same sentence, for drivers without the wrapper.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Final

from ledgermq.errors import ConfigError

__all__ = ["OVERWRITE_REFUSED", "install", "save_mode"]

FORMAT: Final = "ledgermq"

OVERWRITE_REFUSED: Final = (
    "the LedgerMQ sink cannot overwrite a topic: a topic is an append-only log (messages leave "
    "it only by retention), so there is nothing to replace; write with mode 'append' (the "
    "default), or delete and create the topic first (ledgermq admin topic-delete, topic-create)"
)

_EXISTS_REFUSED: Final = (
    "the LedgerMQ sink does not support save mode {mode!r}: it asks what to do when the target "
    "already exists, and a topic always exists as a log that writes append to; write with "
    "mode 'append' (the default, also what no mode means)"
)

_MODES: Final = {"append", "overwrite", "error", "errorifexists", "default", "ignore"}

_installed_lock = threading.Lock()
_installed = False


def save_mode(mode: str | None) -> str:
    """The mode a ``ledgermq`` batch write runs in: ``append`` for no mode or ``append``;
    ``ConfigError`` naming the rule for every other Spark save mode."""
    if mode is None:
        return "append"
    name = mode.strip().lower()
    if name == "append":
        return "append"
    if name == "overwrite":
        raise ConfigError(OVERWRITE_REFUSED)
    if name in _MODES:
        raise ConfigError(_EXISTS_REFUSED.format(mode=mode))
    raise ConfigError(
        f"unknown save mode {mode!r}: Spark's modes are append, overwrite, error, "
        "errorifexists and ignore; the LedgerMQ sink appends (mode 'append' or none)"
    )


def _wrap(cls: type) -> None:
    """Track ``format`` and ``mode`` on ``cls``'s instances and resolve a ``ledgermq`` write's
    mode in ``save`` (the JVM cannot tell a default mode from an explicit ``error``)."""
    original_format = cls.format  # type: ignore[attr-defined]
    original_mode = cls.mode  # type: ignore[attr-defined]
    original_save = cls.save  # type: ignore[attr-defined]

    @functools.wraps(original_format)
    def format_(self: Any, source: str) -> Any:
        self._ledgermq_format = source
        return original_format(self, source)

    @functools.wraps(original_mode)
    def mode_(self: Any, saveMode: str | None) -> Any:  # noqa: N803 - pyspark's keyword
        if saveMode is not None:
            self._ledgermq_mode = saveMode
        return original_mode(self, saveMode)

    @functools.wraps(original_save)
    def save_(
        self: Any,
        path: str | None = None,
        format: str | None = None,  # noqa: A002 - pyspark's keyword
        mode: str | None = None,
        partitionBy: Any = None,  # noqa: N803 - pyspark's keyword
        **options: Any,
    ) -> None:
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        source = getattr(self, "_ledgermq_format", None)
        if isinstance(source, str) and source.strip().lower() == FORMAT:
            self.mode(save_mode(getattr(self, "_ledgermq_mode", None)))
        original_save(self, path, None, None, partitionBy, **options)

    cls.format = format_  # type: ignore[attr-defined]
    cls.mode = mode_  # type: ignore[attr-defined]
    cls.save = save_  # type: ignore[attr-defined]


def install() -> None:
    """Resolve the save mode of ``ledgermq`` writes in this process (module docstring); once.

    Does nothing when pyspark is not installed. Spark Connect's writer is wrapped too when it
    is loaded (a Connect session was made before).
    """
    global _installed  # noqa: PLW0603 - one wrapper per process
    with _installed_lock:
        if _installed:
            return
        try:
            from pyspark.sql.readwriter import DataFrameWriter  # noqa: PLC0415
        except ImportError:
            return
        _wrap(DataFrameWriter)
        # Spark Connect's writer, when this process uses it: importing it without Connect's
        # dependencies (grpcio, googleapis) exits the interpreter, so it is never imported here
        connect = sys.modules.get("pyspark.sql.connect.readwriter")
        if connect is not None:
            _wrap(connect.DataFrameWriter)
        _installed = True
