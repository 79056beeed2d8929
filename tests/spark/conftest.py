"""Fixtures of the Spark tests: one local Spark session and one broker cluster per module."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import SyncAdmin
from ledgermq.spark.local import local_session, worker_environment
from ledgermq.testing.broker_cluster import BrokerCluster

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """``local[2]`` on 127.0.0.1, its Python workers on this interpreter and this checkout."""
    pytest.importorskip(
        "pyspark", reason="pyspark is not installed (pip install 'ledgermq[spark]')"
    )
    pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')"
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in worker_environment().items():
            patch.setenv(name, value)
        session = local_session("ledgermq-tests")
        try:
            yield session
        finally:
            session.stop()


@contextmanager
def running_cluster(
    base_dir: Path, settings: Mapping[str, str] | None = None
) -> Iterator[BrokerCluster]:
    """A NameServer and one 3-replica broker group with a routable master; ``settings`` are
    more ``broker.conf`` keys. Killed on exit."""
    started = BrokerCluster(base_dir, replicas=3, extra_settings=settings)
    try:
        started.wait_master("broker-a", 30.0)
        started.wait_routable()
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    """A NameServer and one 3-replica broker group, shared by the module's tests."""
    with running_cluster(tmp_path_factory.mktemp("spark-cluster")) as started:
        yield started


def create_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    with SyncAdmin(namesrv) as admin:
        admin.create_topic(topic, queues)
        admin.wait_for_route(topic)
