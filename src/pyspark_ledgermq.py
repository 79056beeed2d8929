"""Spark's auto-registration hook: a top-level ``pyspark_*`` module exposing ``DefaultSource``
makes ``spark.read.format("ledgermq")`` work without ``spark.dataSource.register``."""

from ledgermq.spark.source import LedgerMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
