"""``broker.conf`` loading: RocketMQ's own files start a broker, typos do not (issue 13 item 16)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ledgermq.broker.config import BrokerConfig, _file_keys
from ledgermq.cli.main import main
from ledgermq.errors import ConfigError
from ledgermq.ledger.config import load_properties
from ledgermq.rocketmq_keys import BROKER_FILE_KEYS, NAMESRV_FILE_KEYS

CONF = Path(__file__).resolve().parents[2] / "conf"

# apache/rocketmq, tag rocketmq-all-4.9.8, distribution/conf/dledger/broker-n0.conf, verbatim.
ROCKETMQ_BROKER_N0 = """\
# Licensed to the Apache Software Foundation (ASF) under one or more
# contributor license agreements.  See the NOTICE file distributed with
# this work for additional information regarding copyright ownership.
# The ASF licenses this file to You under the Apache License, Version 2.0
# (the "License"); you may not use this file except in compliance with
# the License.  You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
#  limitations under the License.

brokerClusterName = RaftCluster
brokerName=RaftNode00
listenPort=30911
namesrvAddr=127.0.0.1:9876
storePathRootDir=/tmp/rmqstore/node00
storePathCommitLog=/tmp/rmqstore/node00/commitlog
enableDLegerCommitLog=true
dLegerGroup=RaftNode00
dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913
## must be unique
dLegerSelfId=n0
sendMessageThreadPoolNums=16
"""

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_rocketmq_sample_conf_verbatim_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broker-n0.conf"
    path.write_text(ROCKETMQ_BROKER_N0)
    config = BrokerConfig.from_properties(load_properties(str(path)))
    assert (config.broker_cluster_name, config.broker_name, config.listen_port) == (
        "RaftCluster",
        "RaftNode00",
        30911,
    )
    assert config.store_path_root_dir == "/tmp/rmqstore/node00"
    assert config.dleger_self_id == "n0"
    assert config.namesrv_addr == ("127.0.0.1:9876",)
    [warning] = _warnings(caplog)
    assert "sendMessageThreadPoolNums" in warning
    assert "storePathCommitLog" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("node", [0, 1, 2])
def test_shipped_broker_confs_load(node: int, caplog: pytest.LogCaptureFixture) -> None:
    values = load_properties(str(CONF / f"broker-n{node}.conf"))
    config = BrokerConfig.from_properties(values)
    assert config.dleger_self_id == f"n{node}"
    assert config.listen_port == 30911 + 10 * node
    assert config.group == config.broker_name == "RaftNode00"
    assert len(config.dleger_peers) == 3
    assert len(_warnings(caplog)) == 1
    # the shipped files are RocketMQ's: the same keys as its sample
    rocketmq_keys = set(load_properties_text(ROCKETMQ_BROKER_N0))
    assert set(values) == rocketmq_keys


def load_properties_text(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def test_every_rocketmq_key_without_meaning_is_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    values = {
        "dLegerPeers": PEERS,
        "sendMessageThreadPoolNums": "16",  # BrokerConfig
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",  # MessageStoreConfig
        "storePathCommitLog": "/tmp/x/commitlog",
        "haListenPort": "10912",
        "serverWorkerThreads": "8",  # NettyServerConfig
        "clientWorkerThreads": "4",  # NettyClientConfig
        "aclEnable": "false",  # used now (issue 17), never reported
        "autoCreateTopicEnable": "false",  # ours: used, never reported
    }
    config = BrokerConfig.from_properties(values)
    assert config.auto_create_topic_enable is False
    [warning] = _warnings(caplog)
    assert warning == (
        "ignoring RocketMQ setting(s) that mean nothing to a LedgerMQ broker: "
        "clientWorkerThreads, sendMessageThreadPoolNums, serverWorkerThreads; "
        "ignoring brokerId, brokerRole, storePathCommitLog as RocketMQ does with "
        "enableDLegerCommitLog=true (the ledger election picks the master, a slave registers as "
        "brokerId = the number of dLegerSelfId + 1, the commit log lives under storePathRootDir); "
        "ignoring haListenPort: RocketMQ's master/slave HA and controller mode, whose job the "
        "ledger group does here (it replicates every entry and elects the master)"
    )


def test_every_rocketmq_49_key_is_accepted(caplog: pytest.LogCaptureFixture) -> None:
    values = dict.fromkeys(BROKER_FILE_KEYS - {"aclEnable"}, "1")
    values.pop("enableDLegerCommitLog")
    known = {"dLegerPeers": PEERS, "dLegerSelfId": "n0", "listenPort": "30911"}
    # the keys LedgerMQ uses get valid values; the others may hold anything (RocketMQ too
    # ignores a value it cannot parse)
    for key in set(values) & set(_file_keys()):
        values.pop(key)
    BrokerConfig.from_properties({**values, **known})
    [warning] = _warnings(caplog)
    assert "sendMessageThreadPoolNums" in warning


def test_no_warning_without_ignored_keys(caplog: pytest.LogCaptureFixture) -> None:
    BrokerConfig.from_properties({"dLegerPeers": PEERS, "listenPort": "0"})
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("listenPrt", "listenPort or haListenPort"),
        ("dLegerSelfID", "dLegerSelfId"),
        ("dLedgerPeers", "dLegerPeers or dLegerPeerSecret"),
        ("autoCreateTopicEnabled", "autoCreateTopicEnable or traceTopicEnable"),
        ("flushDiskTyp", "flushDiskType"),
    ],
)
def test_typo_is_an_error_with_did_you_mean(typo: str, suggestion: str) -> None:
    """Ours first, then RocketMQ's; at most three (tests/broker/test_config_rocketmq5.py)."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties({"dLegerPeers": PEERS, typo: "1"})
    assert str(info.value) == f"unknown broker setting(s) {typo} (did you mean {suggestion}?)"


def test_acl_and_security_settings() -> None:
    config = BrokerConfig.from_properties(
        {
            "dLegerPeers": PEERS,
            "aclEnable": "true",
            "aclFilePath": "/etc/ledgermq/plain_acl.yml",
            "aclAccessKey": "broker-admin",
            "aclSecretKey": "broker-secret",
            "dLegerPeerSecret": "group-secret",
            "tls.server.mode": "disabled",
        }
    )
    assert config.acl_enable
    assert config.acl_file_path == "/etc/ledgermq/plain_acl.yml"
    assert config.ledger_config().peer_secret == "group-secret"
    assert config.tls == {"tls.server.mode": "disabled"}
    assert "broker-secret" not in repr(config)
    assert "group-secret" not in repr(config)
    with pytest.raises(ConfigError, match="aclAccessKey and aclSecretKey go together"):
        BrokerConfig.from_properties({"dLegerPeers": PEERS, "aclAccessKey": "broker-admin"})


def test_cli_typo_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(ROCKETMQ_BROKER_N0.replace("listenPort=", "listenPrt="))
    assert main(["broker", "-c", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown broker setting(s) listenPrt (did you mean listenPort or haListenPort?)" in err


def test_key_lists_hold_rocketmq_names() -> None:
    """Spot checks of the data taken from RocketMQ 4.9.8's sources."""
    assert {"sendMessageThreadPoolNums", "brokerRole", "storePathCommitLog"} <= BROKER_FILE_KEYS
    assert {"serverWorkerThreads", "clientWorkerThreads", "enableBatchPush"} <= BROKER_FILE_KEYS
    assert {"kvConfigPath", "orderMessageEnable", "listenPort"} <= NAMESRV_FILE_KEYS
    assert "isEnableBatchPush" not in BROKER_FILE_KEYS


def test_the_answer_to_get_broker_config_is_a_broker_conf() -> None:
    """GET_BROKER_CONFIG shows RocketMQ's key names and the file's value spellings, secrets
    masked: what it prints loads again."""
    config = BrokerConfig.from_properties(
        {"dLegerPeers": PEERS, "aclAccessKey": "broker-admin", "aclSecretKey": "s3cret",
         "namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876", "autoCreateTopicEnable": "false"}
    )  # fmt: skip
    shown = config.to_properties()
    assert shown["brokerName"] == "broker-a"
    assert shown["aclSecretKey"] == "******"
    assert shown["autoCreateTopicEnable"] == "false"
    assert "s3cret" not in str(shown)
    again = {k: v for k, v in shown.items() if v and k not in ("aclAccessKey", "aclSecretKey")}
    assert BrokerConfig.from_properties(again).to_properties() == {
        **shown,
        "aclAccessKey": "",
        "aclSecretKey": "",
    }


def test_transaction_settings(caplog: pytest.LogCaptureFixture) -> None:
    base = {"dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0"}
    defaults = BrokerConfig.from_properties(base)
    assert (
        defaults.transaction_time_out,
        defaults.transaction_check_max,
        defaults.transaction_check_interval,
    ) == (6000, 15, 60_000)  # RocketMQ's defaults
    with caplog.at_level(logging.WARNING):
        config = BrokerConfig.from_properties(
            {**base, "transactionTimeOut": "1000", "transactionCheckMax": "3",
             "transactionCheckInterval": "500"}
        )  # fmt: skip
    assert "transaction" not in caplog.text  # used now, not ignored
    assert (config.transaction_time_out, config.transaction_check_max) == (1000, 3)
    assert config.to_properties()["transactionCheckInterval"] == "500"
    with pytest.raises(ConfigError, match="transactionCheckInterval"):
        BrokerConfig.from_properties({**base, "transactionCheckInterval": "0"})
    with pytest.raises(ConfigError, match="transactionCheckMax"):
        BrokerConfig.from_properties({**base, "transactionCheckMax": "-1"})
