"""The ``ledgermq`` PySpark data source (Python Data Source API, pyspark >= 4.2).

See docs/guides/spark.md for the options and the exactly-once story. ``import
ledgermq.spark`` does not import pyspark; ``ledgermq.spark.LedgerMQDataSource`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledgermq.spark.source import LedgerMQDataSource

__all__ = ["LedgerMQDataSource"]


def __getattr__(name: str) -> Any:
    if name == "LedgerMQDataSource":
        from ledgermq.spark.source import LedgerMQDataSource  # noqa: PLC0415

        return LedgerMQDataSource
    raise AttributeError(f"module 'ledgermq.spark' has no attribute {name!r}")
