"""The Messages page's previews and the views' pure helpers (no cluster, no browser)."""

from __future__ import annotations

import datetime

import pytest

pytest.importorskip("jinja2", reason="the console extra is not installed")

from ledgermq.console.messages import (
    PREVIEW_BYTES,
    hex_dump,
    message_view,
    parse_local_time,
)
from ledgermq.console.views import ReplicaRow, is_system_topic
from ledgermq.errors import ConfigError
from ledgermq.wire import MessageExt


def message(body: bytes, **properties: str) -> MessageExt:
    return MessageExt(
        topic="Orders",
        queue_id=2,
        flag=0,
        queue_offset=7,
        commit_log_offset=4096,
        sys_flag=0,
        born_timestamp=1_764_000_000_000,
        born_host="127.0.0.1:50000",
        store_timestamp=1_764_000_000_123,
        store_host="127.0.0.1:10911",
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=body,
        properties=dict(properties),
        body_crc=0xDEADBEEF,
        store_size=200,
    )


def test_a_json_body_is_previewed_as_json_first() -> None:
    view = message_view(message(b'{"order": 42, "items": ["a"]}', KEYS="k1 k2", TAGS="TagA"))
    assert view.preferred == "json"
    assert view.json == '{\n  "order": 42,\n  "items": [\n    "a"\n  ]\n}'
    assert view.text == '{"order": 42, "items": ["a"]}'
    assert view.keys == "k1 k2"
    assert view.tags == "TagA"
    assert ("Queue offset", "7") in view.headers
    assert ("Body CRC", "deadbeef") in view.headers
    assert view.offset_msg_id == view.msg_id  # no UNIQ_KEY: the offset id is the id


def test_text_json_and_binary_bodies() -> None:
    assert message_view(message(b"hello ops")).preferred == "text"
    assert message_view(message(b"[not json")).json is None
    binary = message_view(message(b"\xff\xfe\x00\x01"))
    assert binary.preferred == "hex"
    assert binary.text is None
    assert binary.hex == "00000000  ff fe 00 01" + " " * 36 + "  |....|"


def test_hex_dump_lines_and_its_cut() -> None:
    data = bytes(range(40))
    lines = hex_dump(data).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("00000000  00 01 02 03")
    assert lines[2].startswith("00000020  20 21 22")
    assert lines[2].endswith("| !\"#$%&'|")
    assert hex_dump(b"x" * 100, limit=32).splitlines()[-1] == "... 68 more bytes"


def test_a_long_text_body_is_cut_without_breaking_a_character() -> None:
    body = b"a" * (PREVIEW_BYTES - 1) + "é".encode() + b"tail"
    view = message_view(message(body))
    assert view.text == "a" * (PREVIEW_BYTES - 1)
    assert view.json is None
    assert view.body_size == len(body)


def test_times_from_the_search_form() -> None:
    assert parse_local_time("1764000000000") == 1_764_000_000_000
    assert parse_local_time("2026-11-25T10:00:00+00:00") == 1_795_600_800_000
    local = datetime.datetime(2026, 11, 25, 10, 0).astimezone()
    assert parse_local_time("2026-11-25T10:00") == int(local.timestamp() * 1000)
    with pytest.raises(ConfigError, match="is not a time"):
        parse_local_time("yesterday")


def test_system_topics() -> None:
    assert is_system_topic("%RETRY%orders")
    assert is_system_topic("%DLQ%orders")
    assert is_system_topic("TBW102")
    assert is_system_topic("RMQ_SYS_TRACE_TOPIC")
    assert is_system_topic("RaftCluster", frozenset({"RaftCluster"}))
    assert not is_system_topic("Orders")


def test_replica_lags() -> None:
    row = ReplicaRow(1, "a", end_index=10, committed_index=8, dispatched_index=5)
    assert (row.commit_lag, row.dispatch_lag) == (2, 3)
    assert ReplicaRow(1, "a", error="down").commit_lag is None
    assert ReplicaRow(0, "a").is_master
    assert ReplicaRow(2, "a", role="SYNC_MASTER").is_master
    assert not ReplicaRow(0, "a", role="SLAVE").is_master  # the NameServer lags a transfer
