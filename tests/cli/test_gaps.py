"""Issue 28 item 8: what the CLI lacked next to mqadmin and the usual Unix manners. ``produce``
with properties, a delay and ``--json``; ``consumer-progress`` of every group;
``admin message --offset``; ``topic-delete`` of a topic that does not exist; a reader that goes
away (``| head``); a refused ``produce`` without a "sent 0" line; ``consume`` saying how it
stops."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env
from ledgermq.cli.main import EXIT_BROKEN_PIPE, main
from ledgermq.wire import decode_records

if TYPE_CHECKING:
    from .conftest import TcpFakeCluster

pytestmark = pytest.mark.timeout(60)


def test_produce_with_properties_a_delay_level_a_delivery_time_and_json(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 1})
    ns = tcp_fake_cluster.addr
    assert main(["produce", "-n", ns, "-t", "T", "--property", "region=eu", "--property",
                 "amount=150", "--delay-level", "3", "--json", "one", "two"]) == 0  # fmt: skip
    out, _ = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["queueOffset"] for r in records] == [0, 1]
    assert all(r["status"] == "SEND_OK" and r["topic"] == "T" for r in records)
    assert all(r["msgId"] and r["offsetMsgId"] and r["msgId"] != r["offsetMsgId"] for r in records)
    assert main(["produce", "-n", ns, "-t", "T", "--deliver-at", "2030-01-01T00:00:00+00:00",
                 "three"]) == 0  # fmt: skip
    stored = [m for record in broker.store.queue("T", 0) for m in decode_records(record)]
    assert [m.body for m in stored] == [b"one", b"two", b"three"]
    for m in stored[:2]:
        assert m.properties["region"] == "eu"
        assert m.properties["amount"] == "150"
        assert m.properties["DELAY"] == "3"
    assert stored[2].properties["TIMER_DELIVER_MS"] == "1893456000000"
    assert [m.msg_id for m in stored[:2]] == [r["msgId"] for r in records]
    with pytest.raises(SystemExit):  # a delay level and a delivery time at once
        main(["produce", "-t", "T", "--delay-level", "2", "--deliver-at", "1", "x"])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["produce", "-t", "T", "--property", "novalue", "x"])
    assert "'novalue' is not KEY=VALUE" in capsys.readouterr().err


def test_a_refused_produce_prints_the_error_alone(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    tcp_fake_cluster.add_broker({"T": 1}, auto_create=False)
    assert main(["produce", "-n", tcp_fake_cluster.addr, "-t", "Missing", "x"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "sent 0" not in err
    assert err.startswith("ledgermq: error:"), err
    assert err.count("\n") == 1, err


def test_consumer_progress_without_a_group_lists_every_group_with_its_lag(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 2, "U": 1})
    for i in range(5):
        broker.append("T", i % 2, b"m%d" % i, "")
    broker.append("U", 0, b"u", "")
    broker.store.offsets[("g1", "T", 0)] = 1  # queue 0 holds 3: lag 2
    broker.store.offsets[("g1", "T", 1)] = 2  # queue 1 holds 2: lag 0
    broker.store.offsets[("g2", "U", 0)] = 0  # lag 1
    assert main(["admin", "consumer-progress", "-n", tcp_fake_cluster.addr, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {"group": "g1", "topics": "T", "queues": 2, "lag": 2},
        {"group": "g2", "topics": "U", "queues": 1, "lag": 1},
    ]
    assert main(["admin", "consumer-progress", "-n", tcp_fake_cluster.addr, "-t", "U"]) == 0
    out = capsys.readouterr().out
    assert "g2" in out
    assert "g1" not in out


def test_admin_message_by_queue_offset(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 2})
    for i in range(3):
        broker.append("T", 1, b"body %d" % i, "")
    ns = tcp_fake_cluster.addr
    assert main(["admin", "message", "-n", ns, "-t", "T", "-b", "broker-a", "-q", "1",
                 "--offset", "2", "--json"]) == 0  # fmt: skip
    (record,) = json.loads(capsys.readouterr().out)
    assert (record["queueId"], record["queueOffset"], record["body"]) == (1, 2, "body 2")
    assert main(["admin", "queryMsgByOffset", "-n", ns, "-t", "T", "-b", "broker-a", "-q", "1",
                 "-o", "7"]) == 1  # fmt: skip
    assert "no message at offset 7 of T@broker-a:1" in capsys.readouterr().err
    assert main(["admin", "message", "-n", ns, "-t", "T", "--offset", "0"]) == 1
    assert "--offset needs --topic, --broker and --queue" in capsys.readouterr().err


def test_topic_delete_of_a_topic_that_does_not_exist_says_so(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    tcp_fake_cluster.add_broker({"T": 1})
    ns = tcp_fake_cluster.addr
    assert main(["admin", "topic-delete", "-n", ns, "-t", "Typo"]) == 1
    out, err = capsys.readouterr()
    assert "deleted" not in out
    assert "topic Typo does not exist" in err
    assert main(["admin", "topic-delete", "-n", ns, "-t", "T"]) == 0
    assert capsys.readouterr().out.strip() == "topic T deleted"


def test_a_reader_that_goes_away_ends_the_command_quietly(
    tcp_fake_cluster: TcpFakeCluster,
) -> None:
    tcp_fake_cluster.add_broker({f"Topic{i}": 1 for i in range(50)})
    child = subprocess.Popen(
        [sys.executable, "-m", "ledgermq", "admin", "topic-list", "-n", tcp_fake_cluster.addr],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()  # as `| head -0` does before the command writes
    with child.stderr:
        err = child.stderr.read().decode()
    assert child.wait(30) == EXIT_BROKEN_PIPE
    assert err == ""


def test_consume_on_a_terminal_says_how_to_stop(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tcp_fake_cluster: TcpFakeCluster,
) -> None:
    tcp_fake_cluster.add_broker({"T": 1})
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args = ["consume", "-n", tcp_fake_cluster.addr, "-t", "T", "-g", "g", "--timeout", "0.2"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "consuming T as group g; press Ctrl-C to stop (or by itself after 0.2 idle" in err
