"""The ``ledgermq`` PySpark data source (Python Data Source API, pyspark >= 4.2).

See docs/guides/spark.md for the options, save modes and the exactly-once story. ``import
ledgermq.spark`` does not import pyspark; ``ledgermq.spark.LedgerMQDataSource`` and
``ledgermq.spark.install_save_modes`` do. ``install_save_modes()`` lets
``df.write.format("ledgermq").save()`` without a save mode append (``save_modes``); importing
``LedgerMQDataSource`` calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledgermq.spark.save_modes import install as install_save_modes
    from ledgermq.spark.source import LedgerMQDataSource

__all__ = ["LedgerMQDataSource", "install_save_modes"]


def __getattr__(name: str) -> Any:
    if name == "LedgerMQDataSource":
        from ledgermq.spark.source import LedgerMQDataSource  # noqa: PLC0415

        return LedgerMQDataSource
    if name == "install_save_modes":
        from ledgermq.spark.save_modes import install  # noqa: PLC0415

        return install
    raise AttributeError(f"module 'ledgermq.spark' has no attribute {name!r}")
