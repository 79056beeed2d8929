"""``ledgermq produce``: batches from stdin, the summary, --quiet (item 12), and waiting for a
master during a failover with a sentence, never a dict or a traceback (item 11)."""

from __future__ import annotations

import io
import re
import threading
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.cli.main import main
from ledgermq.wire import MQRequestCode

if TYPE_CHECKING:
    from tests.client.fake_broker import FakeBroker

    from .conftest import TcpFakeCluster

pytestmark = pytest.mark.timeout(60)

SUMMARY = re.compile(r"^sent (\d+) message\(s\) in [\d.]+ s \([\d,]+ msgs/s\)", re.MULTILINE)


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def _produce(
    monkeypatch: pytest.MonkeyPatch, cluster: TcpFakeCluster, stdin: bytes, *flags: str
) -> int:
    monkeypatch.setattr("sys.stdin", _Stdin(stdin))
    return main(["produce", "-n", cluster.addr, "-t", "T", *flags])


def test_stdin_lines_go_in_batches_of_at_most_n_with_a_line_each_and_a_summary(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tcp_fake_cluster: TcpFakeCluster,
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 4})
    lines = b"".join(b"line %d\n" % i for i in range(1000))
    assert _produce(monkeypatch, tcp_fake_cluster, lines, "--batch", "100") == 0
    out, err = capsys.readouterr()
    assert broker.count(MQRequestCode.SEND_BATCH_MESSAGE) == 10
    assert broker.count(MQRequestCode.SEND_MESSAGE_V2) == 0
    printed = out.splitlines()
    assert len(printed) == 1000
    assert all(line.startswith("SEND_OK msgId=") for line in printed)
    assert len({line.split()[1] for line in printed}) == 1000  # one id per message
    assert len({line.split()[3] for line in printed}) == 1000  # queue@offset each its own
    match = SUMMARY.search(err)
    assert match is not None, err
    assert match.group(1) == "1000"
    stored = sorted(b for q in broker.store.queues.values() for b in q)
    assert len(stored) == 1000


def test_by_default_a_request_takes_what_was_read_up_to_256_and_quiet_prints_no_lines(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tcp_fake_cluster: TcpFakeCluster,
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 4})
    lines = b"".join(b"m%d\r\n" % i for i in range(1000)) + b"\nlast-without-newline"
    assert _produce(monkeypatch, tcp_fake_cluster, lines, "--quiet") == 0
    out, err = capsys.readouterr()
    assert out == ""
    requests = broker.count(MQRequestCode.SEND_BATCH_MESSAGE)
    assert 4 <= requests <= 12, requests  # not one request per line (was 1001)
    match = SUMMARY.search(err)
    assert match is not None, err
    assert match.group(1) == "1001"
    assert "skipped 1 empty line(s): a message body cannot be empty" in err


def test_batch_one_sends_one_message_per_request(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tcp_fake_cluster: TcpFakeCluster,
) -> None:
    broker = tcp_fake_cluster.add_broker({"T": 4})
    assert _produce(monkeypatch, tcp_fake_cluster, b"a\nb\nc\n", "--batch", "1", "-q") == 0
    assert broker.count(MQRequestCode.SEND_MESSAGE_V2) == 3
    assert broker.count(MQRequestCode.SEND_BATCH_MESSAGE) == 0
    assert SUMMARY.search(capsys.readouterr().err) is not None


@pytest.mark.parametrize("flags", [["--batch", "0"], ["--wait-for-master", "-1"]])
def test_bad_flag_values_are_usage_errors(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["produce", "-t", "T", *flags, "x"])
    assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def _lose_the_master(cluster: TcpFakeCluster) -> FakeBroker:
    """broker-a's master leaves (its replicas elect a new one); the route keeps the slave."""
    master = cluster.add_broker({"T": 4})
    slave = cluster.add_broker({}, broker_id=1, store=master.store, auto_create=False)
    cluster.call(master.unregister())
    return slave


def test_without_a_master_it_waits_then_fails_with_a_sentence(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    _lose_the_master(tcp_fake_cluster)
    started = time.monotonic()
    code = main(
        ["produce", "-n", tcp_fake_cluster.addr, "-t", "T", "--wait-for-master", "1.5", "x"]
    )
    waited = time.monotonic() - started
    assert code == 1
    assert 1.0 <= waited < 10
    out, err = capsys.readouterr()
    assert out == ""
    assert "{" not in err
    assert "Traceback" not in err
    assert "retrying for up to 1.5 s (--wait-for-master)" in err
    assert (
        "ledgermq: error: topic T could not take messages for 1.5 s (no broker group can take "
        "messages for topic 'T' now: broker-a has no master (an election may be under way)); "
        "0 message(s) were sent before; --wait-for-master SECONDS waits longer"
    ) in err


def test_a_master_elected_while_it_waits_gets_the_messages(
    capsys: pytest.CaptureFixture[str], tcp_fake_cluster: TcpFakeCluster
) -> None:
    slave = _lose_the_master(tcp_fake_cluster)

    def elected() -> None:
        tcp_fake_cluster.call(slave.register(broker_id=0))

    timer = threading.Timer(1.0, elected)
    timer.start()
    try:
        code = main(["produce", "-n", tcp_fake_cluster.addr, "-t", "T", "a", "b"])
    finally:
        timer.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count("SEND_OK") == 2
    assert "has no master" in err
    assert SUMMARY.search(err) is not None
