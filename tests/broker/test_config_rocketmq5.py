"""RocketMQ 5.x files start LedgerMQ as 4.9's do (issue 28 item 5).

5.x's ``broker.conf`` keys (``timerWheelEnable``, ``enableControllerMode``,
``enableSlaveActingMaster``, ...) used to be fatal, with a list of 70 keys after the error; they
are now named in one warning, as 4.9's are. A typo gets at most three suggestions and never the
list. A classic master/slave ``broker.conf`` is refused with the keys that make it DLedger-mode,
and ``timerMaxDelaySec`` is warned about only when it was set.
"""

from __future__ import annotations

import argparse
import logging

import pytest

from ledgermq.broker.config import BrokerConfig, _file_keys
from ledgermq.cli.proxy_commands import proxy_settings
from ledgermq.errors import ConfigError
from ledgermq.namesrv.config import NameServerConfig
from ledgermq.rocketmq_keys import (
    BROKER_CONFIG_5,
    MESSAGE_STORE_CONFIG_5,
    NAMESRV_FILE_KEYS,
    PROXY_CONFIG_5,
)

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"

# apache/rocketmq, tag rocketmq-all-5.3.3, distribution/conf/2m-2s-async/broker-a.conf's settings
# (a classic master of a master/slave pair), with a 5.x key beside them.
CLASSIC_MASTER = {
    "brokerClusterName": "DefaultCluster",
    "brokerName": "broker-a",
    "brokerId": "0",
    "deleteWhen": "04",
    "fileReservedTime": "48",
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_rocketmq_5_broker_keys_are_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    values = {
        "dLegerPeers": PEERS,
        "timerWheelEnable": "true",  # MessageStoreConfig (5.x's TimerConfig keys)
        "timerPrecisionMs": "1000",
        "enablePopBufferMerge": "true",  # BrokerConfig
        "enableControllerMode": "false",
        "enableSlaveActingMaster": "true",
        "controllerAddr": "127.0.0.1:9878",
        "authenticationEnabled": "false",  # AuthConfig
        "timerMaxDelaySec": "86400",  # ours: used, never reported
    }
    config = BrokerConfig.from_properties(values)
    assert config.timer_max_delay_sec == 86400
    [warning] = _warnings(caplog)
    assert warning == (
        "ignoring RocketMQ setting(s) that mean nothing to a LedgerMQ broker: "
        "authenticationEnabled, enablePopBufferMerge, timerPrecisionMs, timerWheelEnable; "
        "ignoring controllerAddr, enableControllerMode, enableSlaveActingMaster: RocketMQ's "
        "master/slave HA and controller mode, whose job the ledger group does here (it "
        "replicates every entry and elects the master)"
    )


def test_every_rocketmq_5_broker_key_is_accepted(caplog: pytest.LogCaptureFixture) -> None:
    values = dict.fromkeys(BROKER_CONFIG_5 | MESSAGE_STORE_CONFIG_5, "1")
    for key in set(values) & set(_file_keys()):
        values.pop(key)  # ours get valid values below
    BrokerConfig.from_properties({**values, "dLegerPeers": PEERS, "listenPort": "30911"})
    [warning] = _warnings(caplog)
    assert "timerWheelEnable" in warning
    assert "enableControllerMode" in warning


@pytest.mark.parametrize("key", ["authenticationEnabled", "authorizationEnabled"])
def test_acl_2_switched_on_is_refused_not_ignored(key: str) -> None:
    """Ignoring it would run a broker open whose operator believes it closed."""
    with pytest.raises(ConfigError, match=rf"^{key}=true asks for RocketMQ 5's ACL 2\.0"):
        BrokerConfig.from_properties({"dLegerPeers": PEERS, key: "true"})


def test_a_typo_gets_at_most_three_suggestions_and_no_list() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "sendMessageThreadPoolNum": "1"})
    assert str(info.value) == (
        "unknown broker setting(s) sendMessageThreadPoolNum (did you mean "
        "sendMessageThreadPoolNums, queryMessageThreadPoolNums or ackMessageThreadPoolNums?)"
    )
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "timerWheelEnabled": "true"})
    assert str(info.value) == (
        "unknown broker setting(s) timerWheelEnabled (did you mean timerWheelEnable?)"
    )


def test_unknown_key_without_a_close_one_is_one_short_line() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "colour": "blue"})
    message = str(info.value)
    assert message == (
        "unknown broker setting(s) colour; it is neither LedgerMQ's nor RocketMQ's "
        "(`ledgermq init-conf DIR` writes commented samples)"
    )


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"])
def test_classic_master_slave_conf_is_refused_with_the_dledger_keys(role: str) -> None:
    values = {**CLASSIC_MASTER, "brokerRole": role}
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties(values)
    message = str(info.value)
    assert message.startswith(
        f"this is a master/slave broker.conf (brokerRole={role}, brokerId=0, no "
        "enableDLegerCommitLog): LedgerMQ runs RocketMQ's DLedger mode only"
    )
    for key in ("enableDLegerCommitLog=true", "dLegerGroup", "dLegerPeers", "dLegerSelfId"):
        assert key in message
    assert "init-conf" in message


def test_disabled_dledger_commit_log_says_what_to_set() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "enableDLegerCommitLog": "false"})
    assert "enableDLegerCommitLog=false is not supported" in str(info.value)
    assert "dLegerSelfId=n0 / n1 / n2" in str(info.value)


def test_a_dledger_conf_with_a_leftover_broker_role_still_starts() -> None:
    """RocketMQ ignores brokerRole / brokerId in DLedger mode: so does LedgerMQ."""
    config = BrokerConfig.from_properties(
        {**CLASSIC_MASTER, "enableDLegerCommitLog": "true", "dLegerPeers": PEERS}
    )
    assert config.group == "broker-a"


def test_timer_max_delay_is_warned_about_only_when_set(caplog: pytest.LogCaptureFixture) -> None:
    """RocketMQ's samples say ``fileReservedTime=48``: the default 3-day timer horizon is
    then beyond retention, but the operator set no timer: no warning."""
    base = {"dLegerPeers": PEERS, "fileReservedTime": "48"}
    BrokerConfig.from_properties(base)
    assert _warnings(caplog) == []
    BrokerConfig.from_properties({**base, "timerMaxDelaySec": str(3 * 24 * 3600)})
    [warning] = _warnings(caplog)
    assert warning.startswith("timerMaxDelaySec (259200 s) is beyond what the commit log keeps")
    caplog.clear()
    BrokerConfig.from_properties({**base, "timerMaxDelaySec": "3600"})
    assert _warnings(caplog) == []


def test_rocketmq_5_namesrv_keys_are_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    config = NameServerConfig.from_properties(
        {
            "listenPort": "0",
            "supportActingMaster": "true",  # NamesrvConfig 5.x
            "enableControllerInNamesrv": "false",
            "controllerDLegerGroup": "group1",  # ControllerConfig
            "jRaftGroupId": "jRaft-Controller",  # JraftConfig
            "clientWorkerThreads": "4",  # NettyClientConfig, read by 5.x's NameServer
        }
    )
    assert config.listen_port == 0
    [warning] = _warnings(caplog)
    assert "supportActingMaster" in warning
    assert "controllerDLegerGroup" in warning
    assert "enableControllerInNamesrv" in warning
    assert "jRaftGroupId" in warning
    assert {"supportActingMaster", "controllerDLegerGroup"} <= NAMESRV_FILE_KEYS


def test_rocketmq_5_proxy_keys_are_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    args = argparse.Namespace(
        config=None,
        set=["grpcServerPort=8081", "proxyMode=cluster", "enableTopicMessageTypeCheck=false"],
    )
    values = proxy_settings(args)
    assert values == {"enableTopicMessageTypeCheck": "false"}
    [warning] = _warnings(caplog)
    assert warning == (
        "ignoring RocketMQ setting(s) that mean nothing to a LedgerMQ proxy: grpcServerPort, "
        "proxyMode (grpcServerPort: use --listen HOST:PORT)"
    )
    assert "proxyMode" in PROXY_CONFIG_5
    args = argparse.Namespace(config=None, set=["proxyMod=cluster"])
    with pytest.raises(ConfigError, match=r"the proxy does not take proxyMod \(did you mean "):
        proxy_settings(args)


def test_a_conf_without_any_dledger_key_says_what_to_add() -> None:
    """A minimal classic file (RocketMQ's defaults: master, brokerId 0) names no role."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"brokerName": "broker-a", "namesrvAddr": "127.0.0.1:9876"})
    message = str(info.value)
    assert message.startswith("dLegerPeers is required: LedgerMQ runs RocketMQ's DLedger mode only")
    for key in ("enableDLegerCommitLog=true", "dLegerGroup", "dLegerPeers=n0-", "dLegerSelfId"):
        assert key in message


def test_the_proxy_refuses_acl_2_switched_on() -> None:
    """RocketMQ 5's proxy reads ``AuthConfig`` from its config file too."""
    args = argparse.Namespace(config=None, set=["authenticationEnabled=true"])
    with pytest.raises(ConfigError, match=r"^authenticationEnabled=true asks for RocketMQ 5's"):
        proxy_settings(args)
    args = argparse.Namespace(config=None, set=["authenticationEnabled=false"])
    assert proxy_settings(args) == {}


@pytest.mark.parametrize(
    ("settings", "port"),
    [
        ({"metricsExporterType": "PROM"}, 5557),  # RocketMQ 5's default exporter port
        ({"metricsExporterType": "2", "metricsPromExporterPort": "9100"}, 9100),
        ({"metricsExporterType": "prom", "metricsPromExporterPort": "9100", "metricsPort": "0"}, 0),
        ({"metricsExporterType": "OTLP_GRPC", "metricsPromExporterPort": "9100"}, None),
    ],
)
def test_rocketmq_5_prometheus_exporter_maps_to_metrics_port(
    settings: dict[str, str], port: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Mapped where it means something here: RocketMQ 5's Prometheus exporter is metricsPort."""
    config = BrokerConfig.from_properties({"dLegerPeers": PEERS, **settings})
    assert config.metrics_port == port
    warnings = _warnings(caplog)
    if port is None:
        [warning] = warnings
        assert "metricsExporterType, metricsPromExporterPort" in warning
    else:
        assert warnings == []
