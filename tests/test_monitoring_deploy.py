"""The monitoring material in deploy/ (issue 28 item 2): Prometheus scrapes exactly the
/metrics endpoints the quickstart and the three-machine example serve, and Grafana's
provisioning loads the dashboard against a Prometheus data source."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ledgermq.broker.config import BrokerConfig
from ledgermq.cli import quickstart
from ledgermq.ledger.config import load_properties
from ledgermq.namesrv import NameServerConfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
PROVISIONING = DEPLOY / "grafana" / "provisioning"


def _targets() -> dict[str, set[str]]:
    """Job name -> its static targets."""
    config = yaml.safe_load(PROMETHEUS.read_text())
    return {
        job["job_name"]: {t for static in job["static_configs"] for t in static["targets"]}
        for job in config["scrape_configs"]
    }


def _brokers() -> list[BrokerConfig]:
    return [
        BrokerConfig.from_properties(load_properties(str(path)))
        for path in sorted((DEPLOY / "conf").glob("broker-*.conf"))
    ]


def test_the_quickstart_job_scrapes_every_replica() -> None:
    expected = {f"{quickstart.HOST}:{port}" for port in quickstart.METRICS_PORTS}
    assert _targets()["ledgermq-quickstart"] == expected


def test_the_deployment_jobs_scrape_every_replica_and_namesrv_of_deploy_conf() -> None:
    brokers = _brokers()
    assert len(brokers) == 6
    served = set()
    for config in brokers:
        ledger = config.ledger_config()
        assert ledger.metrics_port is not None, f"{config.broker_name} serves no /metrics"
        assert ledger.metrics_host == config.broker_ip1  # reachable, but not on 0.0.0.0
        served.add(f"{ledger.metrics_host}:{ledger.metrics_port}")
    targets = _targets()
    assert targets["ledgermq-brokers"] == served
    namesrv = NameServerConfig.from_properties(
        load_properties(str(DEPLOY / "conf" / "namesrv.conf"))
    )
    assert namesrv.metrics_port is not None
    machines = {config.broker_ip1 for config in brokers}
    assert targets["ledgermq-namesrv"] == {f"{m}:{namesrv.metrics_port}" for m in machines}
    for machine in machines:  # no port twice on one machine, the metrics ports included
        ports: list[int | None] = [namesrv.listen_port, namesrv.metrics_port]
        for config in brokers:
            if config.broker_ip1 == machine:
                ledger = config.ledger_config()
                ports += [config.listen_port, ledger.address[1], ledger.metrics_port]
        assert len(ports) == len(set(ports)), (machine, ports)


def test_every_job_is_one_the_dashboard_selects() -> None:
    """The dashboard's process panels select ``job=~"ledgermq.*"``."""
    assert all(job.startswith("ledgermq") for job in _targets())


def test_promtool_accepts_the_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    result = subprocess.run(
        [promtool, "check", "config", str(PROMETHEUS)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_provisioning_loads_the_dashboard_on_prometheus() -> None:
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "ledgermq.yml").read_text())
    assert datasources["apiVersion"] == 1
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"].startswith("http")
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "ledgermq.yml").read_text())
    assert providers["apiVersion"] == 1
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"]
    dashboard = yaml.safe_load((DEPLOY / "grafana" / "ledgermq.json").read_text())
    chooser = next(v for v in dashboard["templating"]["list"] if v["type"] == "datasource")
    assert chooser["query"] == source["type"]  # the dashboard offers the provisioned source
