"""A local Spark session set up the way the connector needs it on one machine.

The gotchas of anchors-spark.md section 0, in one place: the driver bound to 127.0.0.1 (else
Spark picks the first NIC), Python workers running this interpreter (``PYSPARK_PYTHON``) with
this ``ledgermq`` importable (``PYTHONPATH``), no UI or progress bars, few shuffle partitions,
the Python worker daemon whose idle workers end quietly at ``spark.stop()``
(``ledgermq.spark.daemon``), and ``ledgermq`` writes without a save mode appending
(``save_modes``).
Used by the tests and the benchmark; handy for notebooks and local jobs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import ledgermq

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_session", "worker_environment"]


def worker_environment() -> dict[str, str]:
    """The environment variables a local session's Python workers need (to set before it
    starts): loopback, this interpreter, this ``ledgermq`` first on the path."""
    src = str(Path(ledgermq.__file__).resolve().parents[1])
    return {
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
    }


def local_session(app_name: str, *, cores: int = 2, log_level: str = "ERROR") -> SparkSession:
    """``local[cores]`` on 127.0.0.1 (set ``worker_environment()`` in the environment first)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - pyspark is optional

    from ledgermq.spark.save_modes import install  # noqa: PLC0415 - imports pyspark

    install()  # df.write.format("ledgermq").save() without a mode appends

    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # stage bars would bury the output
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # reused workers end quietly at stop (no BrokenPipeError tracebacks): ledgermq.spark.daemon
        .config("spark.python.daemon.module", "ledgermq.spark.daemon")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel(log_level)
    return session
