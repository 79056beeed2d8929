"""UPDATE_BROKER_CONFIG's decisions (``ledgermq.broker.live_config``): which keys change live,
what is refused and how it is said, and the rewrite of ``broker.conf``."""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import fields
from pathlib import Path

import pytest

import ledgermq
from ledgermq.broker.config import BrokerConfig, broker_file_key, broker_file_keys
from ledgermq.broker.live_config import (
    LIVE_KEYS,
    RETENTION_KEYS,
    LiveConfig,
    is_sample_file,
    parse_properties,
    plan_update,
    rewrite_properties,
    write_config_file,
)
from ledgermq.cli.main import main
from ledgermq.errors import ConfigError
from ledgermq.ledger.config import load_properties

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912"
BASE = BrokerConfig.from_properties({"dLegerPeers": PEERS, "maxMessageSize": "65536"})


def test_live_keys_are_broker_keys_and_retention_keys_are_live() -> None:
    assert set(LIVE_KEYS) <= broker_file_keys()
    assert set(LIVE_KEYS) >= RETENTION_KEYS
    # what a restart needs stays out: ports, paths, the ledger group, names, secrets
    restart = {"listenPort", "storePathRootDir", "dLegerPeers", "dLegerSelfId", "brokerName",
               "flushDiskType", "aclEnable", "aclSecretKey", "tls.enable"}  # fmt: skip
    assert not restart & LIVE_KEYS.keys()


def test_every_live_key_changes_the_config() -> None:
    new_values = {
        "brokerPermission": "4",
        "autoCreateTopicEnable": "false",
        "autoCreateSubscriptionGroup": "false",
        "defaultTopicQueueNums": "2",
        "enablePropertyFilter": "false",
        "enableTopicMessageTypeCheck": "false",
        "longPollingEnable": "false",
        "shortPollingTimeMills": "250",
        "maxMessageSize": "4096",
        "registerNameServerPeriod": "5000",
        "fileReservedTime": "12.0",
        "deleteWhen": "02;14",
        "cleanFileForciblyEnable": "false",
        "diskMaxUsedSpaceRatio": "60",
        "preferredLeaderId": "n0",
    }
    assert set(new_values) == set(LIVE_KEYS)
    updated = plan_update(BASE, BASE, new_values)
    shown = updated.to_properties()
    assert {k: shown[k] for k in new_values} == new_values
    retention = updated.ledger_config().retention
    assert (retention.file_reserved_hours, retention.delete_when) == (13.0, "02;14")
    assert BASE.to_properties()["maxMessageSize"] == "65536"  # the original is untouched


def test_restart_keys_are_refused_whole_and_named_without_their_values() -> None:
    values = {"listenPort": "1", "aclSecretKey": "hunter22", "maxMessageSize": "4096",
              "flushDiskType": "SYNC_FLUSH"}  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        plan_update(BASE, BASE, values)
    text = str(caught.value)
    assert text.startswith("not changed: aclSecretKey; flushDiskType (the ledger sets")
    assert "listenPort can only change with a restart" in text
    assert "hunter22" not in text
    assert "maxMessageSize;" not in text  # a live key is not named as needing a restart


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "no setting to update"),
        ({"colour": "blue"}, "unknown broker setting(s): colour"),
        ({"maxMesageSize": "2048"}, "maxMesageSize (did you mean maxMessageSize?)"),
        ({"flushIntervalCommitLog": "500"}, "flushIntervalCommitLog: RocketMQ setting(s) "),
        ({"maxMessageSize": "lots"}, "maxMessageSize must be an integer, not 'lots'"),
        ({"maxMessageSize": "100"}, "maxMessageSize 100 is below 1024 bytes"),
        ({"maxMessageSize": "65537"}, "can grow live only up to 65536"),
        ({"brokerPermission": "1"}, "brokerPermission must be 2 (write), 4 (read) or 6"),
        ({"longPollingEnable": "yes"}, "longPollingEnable must be true or false"),
        ({"diskMaxUsedSpaceRatio": "150"}, "must be in (0, 1]"),
    ],
)
def test_bad_updates_say_why(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_update(BASE, BASE, values)
    assert message in str(caught.value)


def test_max_message_size_may_come_back_up_to_the_started_value() -> None:
    lowered = plan_update(BASE, BASE, {"maxMessageSize": "2048"})
    assert plan_update(lowered, BASE, {"maxMessageSize": "65536"}).max_message_size == 65536


def test_parse_properties() -> None:
    body = b"# comment\n! also\n\n maxMessageSize = 2048 \ndeleteWhen=04;16\n"
    assert parse_properties(body) == {"maxMessageSize": "2048", "deleteWhen": "04;16"}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_properties(b"maxMessageSize 2048\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_properties(b"\xff=1")


def test_rewrite_keeps_comments_and_order_replaces_in_place_and_appends() -> None:
    text = "# broker-a n0\nbrokerName=broker-a\nmaxMessageSize=65536\n\nmaxMessageSize=1\nx=y\n"
    out = rewrite_properties(text, {"maxMessageSize": "2048", "deleteWhen": "02"})
    assert out == (
        "# broker-a n0\nbrokerName=broker-a\nmaxMessageSize=2048\n\nx=y\ndeleteWhen=02\n"
    )


def test_write_config_file_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("aclSecretKey=s3cret-key\nmaxMessageSize=65536\n")
    os.chmod(path, 0o600)
    write_config_file(str(path), {"maxMessageSize": "2048"})
    assert path.read_text() == "aclSecretKey=s3cret-key\nmaxMessageSize=2048\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (tmp_path / "broker.conf.tmp").exists()


def test_broker_file_key_names_fields() -> None:
    assert broker_file_key("max_message_size") == "maxMessageSize"
    assert broker_file_key("broker_ip1") == "brokerIP1"
    assert {broker_file_key(f.name) for f in fields(BrokerConfig) if f.name != "tls"} <= (
        broker_file_keys()
    )


# ---------------------------------------------------- shipped samples (issue 28 item 9)
SAMPLE = Path(__file__).resolve().parents[2] / "conf" / "broker-n0.conf"


def test_an_update_never_rewrites_a_shipped_sample(tmp_path: Path) -> None:
    """A broker started from ``conf/broker-n0.conf`` itself: the update is refused whole (the
    sample, a tracked file, keeps its bytes) and the remark says how to get an own copy; the
    copy ``init-conf`` writes is the operator's, and the update persists into it."""
    sample = tmp_path / "sample.conf"
    sample.write_bytes(SAMPLE.read_bytes())
    started = BrokerConfig.from_properties(load_properties(str(sample)))
    live = LiveConfig(started, str(sample))
    with pytest.raises(ConfigError) as info:
        asyncio.run(live.update(started, b"brokerPermission=4\n"))
    assert str(info.value).startswith(
        f"not changed: this broker was started from {sample}, a sample that ships with LedgerMQ"
    )
    assert "`ledgermq init-conf DIR`" in str(info.value)
    assert sample.read_bytes() == SAMPLE.read_bytes()

    assert main(["init-conf", str(tmp_path / "mine")]) == 0
    mine = tmp_path / "mine" / "conf" / "broker-n0.conf"
    assert not is_sample_file(str(mine))
    live = LiveConfig(started, str(mine))
    updated, values = asyncio.run(live.update(started, b"brokerPermission=4\n"))
    assert updated.broker_permission == 4
    assert values == {"brokerPermission": "4"}
    assert load_properties(str(mine))["brokerPermission"] == "4"


def test_every_shipped_broker_conf_is_marked_and_the_package_is_a_sample() -> None:
    root = SAMPLE.parents[1]
    confs = sorted(root.glob("conf/broker-*.conf")) + sorted(root.glob("deploy/conf/broker-*.conf"))
    assert len(confs) >= 9
    assert all(is_sample_file(str(path)) for path in confs)
    assert is_sample_file(ledgermq.__file__)  # anything inside the installed package


def test_a_preferred_leader_that_is_not_a_replica_is_refused() -> None:
    """Issue 27: ``preferredLeaderId`` changes live (``admin set-preferred-leader``); an id
    outside ``dLegerPeers`` was silently never honoured, now it is refused with the rule."""
    with pytest.raises(ConfigError, match="preferredLeaderId n9 is not in dLegerPeers"):
        plan_update(BASE, BASE, {"preferredLeaderId": "n9"})
    assert plan_update(BASE, BASE, {"preferredLeaderId": ""}).preferred_leader_ids == ()
