"""Shared test settings: hypothesis profiles, leak hygiene (STYLE.md section 7.13.5) and the
process fixtures of real replicas and clusters (section 7.13.4)."""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

from ledgermq.testing.broker_cluster import BrokerCluster
from ledgermq.testing.processes import ReplicaGroup
from ledgermq.testing.tls_certs import CertificateSet, make_certificates, openssl_available
from tests import tiers

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from pathlib import Path

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "soak",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("LEDGERMQ_HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the markers given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers' rules (tests/tiers.py): real-process fixtures make a test ``integration``,
    the measured slow tests are ``slow``; the fast tier leaves both out."""
    tiers.apply(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported (a few hundred thousand module-level objects) so that
    the collection after each test scans only what tests made: it went from about 0.1 s to
    under 5 ms per test (measured 2026-11-29), and a test that leaks is caught exactly as before."""
    del session
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect after each test so an unclosed file or mmap fails the test that leaked it."""
    yield
    gc.collect()


@pytest.fixture
def replica_groups(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ReplicaGroup]]:
    """A factory of ``ReplicaGroup``s (real processes) that are all killed when the test ends.

    On failure the log tail of every replica is attached to the report (see the hook below).
    """
    groups: list[ReplicaGroup] = []
    request.node.stash[_GROUPS] = groups

    def make(n: int = 3, **options: Any) -> ReplicaGroup:
        group = ReplicaGroup(tmp_path / f"group{len(groups)}", n=n, **options)
        groups.append(group)
        return group

    try:
        yield make
    finally:
        for group in groups:
            group.close()


_GROUPS = pytest.StashKey[list[ReplicaGroup]]()


@pytest.fixture(scope="session")
def tls_certificates(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    """A CA, server and client certificates and a wrong CA, made once per test session with
    the ``openssl`` command (``ledgermq.testing.tls_certs``); skips the test without it."""
    if not openssl_available():
        pytest.skip("the openssl command is needed to make test certificates")
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def broker_clusters(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., BrokerCluster]]:
    """A factory of ``BrokerCluster``s (NameServers and broker replicas as real processes), all
    killed when the test ends; on failure every process's log tail is attached to the report."""
    clusters: list[BrokerCluster] = []
    request.node.stash[_CLUSTERS] = clusters

    def make(**options: Any) -> BrokerCluster:
        base = tmp_path / f"cluster{len(clusters)}"
        # Appended before it starts: a cluster that fails to start is still reaped and its
        # logs still attached.
        cluster = BrokerCluster(base, start=False, **options)
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.close()


_CLUSTERS = pytest.StashKey[list[BrokerCluster]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    groups = item.stash.get(_GROUPS, [])
    if report.failed and groups:
        for i, group in enumerate(groups):
            report.sections.append((f"replica logs of group {i}", group.log_tails(40)))
    clusters = item.stash.get(_CLUSTERS, [])
    if report.failed and clusters:
        for i, cluster in enumerate(clusters):
            report.sections.append((f"process logs of cluster {i}", cluster.log_tails(40)))
    return report
