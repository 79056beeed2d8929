"""Save modes of ``df.write.format("ledgermq")`` without a JVM: which modes a batch write runs
in, and the wrapper of pyspark's writer that makes no mode an append (``save_modes``).

Spark itself refuses a Python data source's default mode (``ErrorIfExists``) before the
source's code runs; ``tests/spark/test_spark.py`` checks the wrapper against real Spark."""

from __future__ import annotations

from typing import Any

import pytest

from ledgermq.errors import ConfigError
from ledgermq.spark.save_modes import OVERWRITE_REFUSED, _wrap, save_mode


@pytest.mark.parametrize("mode", [None, "append", "Append", " APPEND "])
def test_no_mode_and_append_append(mode: str | None) -> None:
    assert save_mode(mode) == "append"


def test_overwrite_is_refused_because_a_log_cannot_be_replaced() -> None:
    with pytest.raises(ConfigError) as info:
        save_mode("overwrite")
    assert str(info.value) == OVERWRITE_REFUSED
    assert "append-only log" in OVERWRITE_REFUSED


@pytest.mark.parametrize("mode", ["error", "errorifexists", "ErrorIfExists", "ignore", "default"])
def test_modes_about_an_existing_target_are_refused_with_a_sentence(mode: str) -> None:
    with pytest.raises(ConfigError, match=f"does not support save mode '{mode}'.*always exists"):
        save_mode(mode)


def test_an_unknown_mode_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown save mode 'upsert': Spark's modes are append"):
        save_mode("upsert")


class _Writer:
    """pyspark's ``DataFrameWriter`` as far as the wrapper sees it: the JVM side records the
    mode it is given (``ErrorIfExists`` unless told), and ``save`` what it would run."""

    def __init__(self) -> None:
        self.jvm_mode = "ErrorIfExists"
        self.source = "parquet"
        self.saved: list[tuple[str, str | None]] = []

    def format(self, source: str) -> _Writer:
        self.source = source
        return self

    def mode(self, saveMode: str | None) -> _Writer:
        if saveMode is not None:
            self.jvm_mode = saveMode
        return self

    def save(
        self,
        path: str | None = None,
        format: str | None = None,  # noqa: A002
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        self.mode(mode)
        if format is not None:
            self.format(format)
        self.saved.append((self.jvm_mode, path))


_wrap(_Writer)


def test_the_wrapper_appends_a_ledgermq_write_without_a_mode() -> None:
    writer = _Writer().format("ledgermq")
    writer.save()
    assert writer.saved == [("append", None)]
    via_keyword = _Writer()
    via_keyword.save(format="LedgerMQ")
    assert via_keyword.saved == [("append", None)]


def test_the_wrapper_refuses_other_modes_before_spark_runs_anything() -> None:
    for mode in ("overwrite", "error", "ignore"):
        writer = _Writer().format("ledgermq").mode(mode)
        with pytest.raises(ConfigError):
            writer.save()
        assert writer.saved == []
        keyword = _Writer().format("ledgermq")
        with pytest.raises(ConfigError):
            keyword.save(mode=mode)


def test_the_wrapper_leaves_other_formats_alone() -> None:
    writer = _Writer().format("parquet")
    writer.save("/data/out")
    assert writer.saved == [("ErrorIfExists", "/data/out")]
    overwrite = _Writer().format("parquet").mode("overwrite")
    overwrite.save("/data/out")
    assert overwrite.saved == [("overwrite", "/data/out")]


def test_the_data_source_refuses_overwrite_without_the_wrapper() -> None:
    """A driver without the wrapper reaches ``writer(schema, overwrite=True)``."""
    pytest.importorskip(
        "pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')"
    )
    pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')"
    )
    from pyspark.sql.types import StringType, StructField, StructType

    from ledgermq.spark.source import LedgerMQDataSource

    source = LedgerMQDataSource({"namesrvAddr": "127.0.0.1:9876", "topic": "T"})
    schema = StructType([StructField("body", StringType())])
    with pytest.raises(ConfigError) as info:
        source.writer(schema, True)
    assert str(info.value) == OVERWRITE_REFUSED
    assert source.writer(schema, False) is not None
