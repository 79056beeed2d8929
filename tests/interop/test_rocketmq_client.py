"""The real RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4) against our NameServer and brokers.

Every test starts a real cluster (one NameServer, one 3-replica broker group, as processes) and
runs the client in child processes (``rocketmq_driver.py``), each with its own ``HOME`` (the
client logs to ``$HOME/logs/rocketmq-cpp/``, attached to a failure) and a time limit after which
it is killed: the client is native code that may hang or crash its interpreter. Everything is on
127.0.0.1. The checks are the client's own view: what the producer had acknowledged is what the
consumers receive, with the same message ids, and in send order within each queue.

Select with ``-m interop``; skipped when ``rocketmq`` is not installed (``pip install -e .[dev]``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]
    Event = dict[str, Any]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.interop,
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None,
        reason="the real RocketMQ client (`rocketmq` 0.4.4 on PyPI, in the dev extra) is not "
        "installed",
    ),
    pytest.mark.timeout(120),
]

DRIVER = Path(__file__).with_name("rocketmq_driver.py")
GROUP = "broker-a"
FAST_RETRIES = {"messageDelayLevel": "1s 1s 1s 1s 1s 1s 1s 1s"}
"""Every delay level 1 s, so that a message sent back for a retry returns within a test."""


class ClientRun:
    """One run of the driver in a child process, its stdout parsed line by line as it comes."""

    def __init__(
        self,
        home: Path,
        command: dict[str, Any],
        timeout_s: float,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``argv`` runs another client's driver (default: this module's, under Python), with
        ``env`` added to the environment."""
        self.command = command
        self.home = home
        self.timeout_s = timeout_s
        home.mkdir(parents=True, exist_ok=True)
        self.events: list[Event] = []
        self.stderr = b""
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            [*(argv or [sys.executable, str(DRIVER)]), json.dumps(command)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {}), "HOME": str(home)},
            cwd=home,
            start_new_session=True,
        )
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self._deadline = time.monotonic() + timeout_s

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def of(self, kind: str) -> list[Event]:
        with self._changed:
            return [e for e in self.events if e["event"] == kind]

    def wait_for(self, predicate: Callable[[ClientRun], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._readers[0].is_alive()):
                    return predicate(self)
                self._changed.wait(min(left, 0.2))
            return True

    def finish(self) -> list[Event]:
        """Wait for the exit (killing the child at its deadline); the events; AssertionError
        with the client's output and log if it failed or timed out."""
        try:
            self.proc.wait(max(0.1, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the client did not finish within {self.timeout_s:g} s\n{self.report()}"
            ) from None
        self._join()
        if self.proc.returncode != 0 or not self.of("done"):
            raise AssertionError(f"the client failed\n{self.report()}")
        return self.events

    def kill(self) -> None:
        """SIGKILL the child's process group (the client's threads with it); reap; close."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._join()

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def client_log(self, lines: int = 40) -> str:
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*rocketmq-cpp.log*"))
        text = "".join(p.read_text(errors="replace") for p in logs)
        return "\n".join(text.splitlines()[-lines:])

    def report(self) -> str:
        shown = "\n".join(json.dumps(e)[:300] for e in self.events[-20:])
        return (
            f"command: {json.dumps(self.command)[:500]}\nexit code: {self.proc.returncode}\n"
            f"last events:\n{shown}\nstderr:\n{self.stderr.decode(errors='replace')[-2000:]}\n"
            f"client log ({self.home}):\n{self.client_log()}"
        )


class Client:
    """Starts driver runs against one cluster; every run is killed when the test ends."""

    def __init__(self, tmp: Path, namesrv: str) -> None:
        self.tmp = tmp
        self.namesrv = namesrv
        self.runs: list[ClientRun] = []

    def start(self, action: str, limit_s: float = 30.0, **command: Any) -> ClientRun:
        """A driver run of ``command``, killed after ``limit_s``."""
        home = self.tmp / f"client{len(self.runs)}-{action}-{command.get('mode')}"
        run = self.run(home, {"action": action, "namesrv": self.namesrv, **command}, limit_s)
        self.runs.append(run)
        return run

    def run(self, home: Path, command: dict[str, Any], limit_s: float) -> ClientRun:
        """The child process of one run (another client's driver in a subclass)."""
        return ClientRun(home, command, timeout_s=limit_s)

    def produce(self, topic: str, mode: str, count: int, **options: Any) -> list[Event]:
        run = self.start("produce", topic=topic, mode=mode, count=count, group="pg", **options)
        sent = [e for e in run.finish() if e["event"] == "sent"]
        assert len(sent) == count, f"{len(sent)} of {count} acknowledged\n{run.report()}"
        assert all(e["status"] in ("OK", "ONEWAY") for e in sent), run.report()
        return sent

    def consume(
        self, topic: str, mode: str, group: str, count: int, timeout_s: float = 20.0, **options: Any
    ) -> ClientRun:
        """A consumer run (in the background): ``count`` messages or ``timeout_s``."""
        return self.start(
            "consume", limit_s=timeout_s + 15, topic=topic, mode=mode, group=group,
            count=count, timeout_s=timeout_s, **options,
        )  # fmt: skip

    def close(self) -> None:
        for run in self.runs:
            run.kill()


@pytest.fixture
def cluster_and_client(
    broker_clusters: MakeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[BrokerCluster, Client]]:
    settings = getattr(request, "param", {})
    cluster = broker_clusters(replicas=3, extra_settings=settings)
    cluster.wait_routable("TBW102")
    client = Client(tmp_path / "clients", cluster.namesrv_addr)
    try:
        yield cluster, client
    finally:
        client.close()


# ---------------------------------------------------------------------- checks
def by_queue(received: list[Event]) -> dict[int, list[Event]]:
    queues: dict[int, list[Event]] = defaultdict(list)
    for event in received:
        queues[event["queue_id"]].append(event)
    return {q: sorted(events, key=lambda e: e["queue_offset"]) for q, events in queues.items()}


def check_received(
    sent: list[Event], received: list[Event], *, ordered: bool = True, ids: bool = True
) -> None:
    """Exactly the acknowledged bodies, once each; each queue dense from offset 0; with
    ``ordered``, each queue holds its messages in send order; with ``ids``, the consumer sees
    the message id the producer was given, and the queue offset it was told."""
    assert sorted(e["body"] for e in received) == sorted(e["body"] for e in sent)
    position = {e["body"]: i for i, e in enumerate(sent)}
    for queue, events in by_queue(received).items():
        offsets = [e["queue_offset"] for e in events]
        assert offsets == list(range(len(events))), f"queue {queue} offsets {offsets}"
        if ordered:
            order = [position[e["body"]] for e in events]
            assert order == sorted(order), f"queue {queue} out of send order: {order}"
    if ids:
        acked = {e["body"]: e for e in sent}
        for event in received:
            assert event["msg_id"] == acked[event["body"]]["msg_id"], event
            assert event["queue_offset"] == acked[event["body"]]["offset"], event


def received_all(count: int) -> Callable[[ClientRun], bool]:
    return lambda run: len(run.of("received")) >= count


# ---------------------------------------------------------------------- tests
@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "orderly", "batch"])
def test_each_send_mode_is_stored_as_acknowledged_and_pulled_back(
    cluster_and_client: tuple[BrokerCluster, Client], mode: str
) -> None:
    """Each producer send mode against an unknown topic: the broker creates it from TBW102's
    template with the client's 4 queues, registers it, and the pull consumer reads back exactly
    what was acknowledged. Oneway and async sends have no order a client could rely on, and
    oneway and batch sends return no per-message id (the client's batch result carries the
    batch's own empty UNIQ_KEY)."""
    cluster, client = cluster_and_client
    topic = f"Send{mode.capitalize()}"
    assert cluster.route(topic) is None
    sent = client.produce(topic, mode, 16, prefix=mode, shards=3)
    route = cluster.route(topic)
    assert route is not None
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(GROUP, 4)]

    run = client.consume(topic, "pull", f"pull-{mode}", 16, timeout_s=15)
    received = [e for e in run.finish() if e["event"] == "received"]
    check_received(
        sent,
        received,
        ordered=mode in ("sync", "orderly", "batch"),
        ids=mode in ("sync", "async", "orderly"),
    )
    if mode == "orderly":  # the client's hashing selector: shard % queue count
        for event in received:
            shard = next(e["shard"] for e in sent if e["body"] == event["body"])
            assert event["queue_id"] == shard % 4
    if mode == "batch":  # a batch of 4 goes to one queue, in order
        for events in by_queue(received).values():
            assert len(events) % 4 == 0


def test_push_consumers_receive_what_was_acknowledged(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """A concurrent and an orderly push consumer (two groups) each receive every acknowledged
    message once; the orderly one locks its queues (LOCK_BATCH_MQ) and is handed each queue's
    messages in offset order. Messages sent before either group existed are delivered: the
    broker answers QUERY_CONSUMER_OFFSET for a new group with 0 on young queues, like Java's."""
    _, client = cluster_and_client
    sent = client.produce("PushTopic", "sync", 24, prefix="p")
    concurrent = client.consume("PushTopic", "push", "push-concurrent", 24)
    orderly = client.consume("PushTopic", "push_orderly", "push-orderly", 24)
    got = [e for e in concurrent.finish() if e["event"] == "received"]
    check_received(sent, got)
    in_order = [e for e in orderly.finish() if e["event"] == "received"]
    check_received(sent, in_order)
    delivered: dict[int, list[int]] = defaultdict(list)
    for event in in_order:  # delivery order, not sorted
        delivered[event["queue_id"]].append(event["queue_offset"])
    for queue, offsets in delivered.items():
        assert offsets == sorted(offsets), f"queue {queue} delivered out of order: {offsets}"


def test_push_consumer_long_polling_wakes_on_new_messages(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """A push consumer parked in long polling (PULL_MESSAGE with the suspend flag) is answered
    as soon as new messages are committed, not at the end of its 15 s suspend time."""
    _, client = cluster_and_client
    first = client.produce("LiveTopic", "sync", 4, prefix="early")
    consumer = client.consume("LiveTopic", "push", "live", 8, timeout_s=30)
    assert consumer.wait_for(received_all(4), 20), consumer.report()
    time.sleep(0.5)  # every queue's next pull is parked at the broker by now
    started = time.monotonic()
    later = client.produce("LiveTopic", "sync", 4, prefix="late")
    assert consumer.wait_for(received_all(8), 10), consumer.report()
    waited = time.monotonic() - started
    assert waited < 5, f"new messages took {waited:.1f} s to reach a parked consumer"
    received = [e for e in consumer.finish() if e["event"] == "received"]
    check_received(first + later, received)


@pytest.mark.parametrize("cluster_and_client", [FAST_RETRIES], indirect=True)
def test_reconsume_later_comes_back_through_the_retry_topic(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """A listener that fails a message makes the client send it back (CONSUMER_SEND_MSG_BACK,
    code 36); the broker stores it in ``%RETRY%<group>`` after its delay and the same consumer,
    which subscribes to that topic by itself, receives it again: same id, same body,
    ``reconsume_times`` 1. (The client rebalances onto the retry topic every 10 s; its first
    route lookup precedes the heartbeat that makes the broker create that topic.)"""
    cluster, client = cluster_and_client
    sent = client.produce("RetryTopic", "sync", 4, prefix="r")
    rejected_bodies = ["r-1", "r-2"]
    run = client.consume(
        "RetryTopic", "push", "retrying", 4, timeout_s=40, fail_once=rejected_bodies
    )
    events = run.finish()
    rejected = [e for e in events if e["event"] == "rejected"]
    received = {e["body"]: e for e in events if e["event"] == "received"}
    assert sorted(e["body"] for e in rejected) == rejected_bodies
    assert sorted(received) == sorted(e["body"] for e in sent), run.report()
    acked = {e["body"]: e for e in sent}
    for body in rejected_bodies:
        again = received[body]
        assert again["reconsume_times"] == 1, again
        assert again["msg_id"] == acked[body]["msg_id"], again
        assert again["topic"] == "RetryTopic", again  # the client restores the real topic
    for body in ("r-0", "r-3"):
        assert received[body]["reconsume_times"] == 0
    route = cluster.route("%RETRY%retrying")
    assert route is not None
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [1]


def test_the_client_does_not_notice_a_slave_crash_and_restart(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """With one slave killed (-9) the other two replicas still commit: sends are acknowledged
    SEND_OK; once the slave is back every message is still read back in order."""
    cluster, client = cluster_and_client
    master = cluster.wait_master(GROUP)
    slave = next(n for n in cluster.nodes if n != master)
    before = client.produce("SlaveTopic", "sync", 8, prefix="before")
    cluster.kill9(GROUP, slave)
    during = client.produce("SlaveTopic", "sync", 8, prefix="during")
    cluster.start_replica(GROUP, slave)
    assert cluster.wait_master(GROUP) == master
    after = client.produce("SlaveTopic", "orderly", 8, prefix="after", shards=4)
    run = client.consume("SlaveTopic", "pull", "slave-pull", 24, timeout_s=15)
    received = [e for e in run.finish() if e["event"] == "received"]
    check_received(before + during + after, received)


@pytest.mark.parametrize("cluster_and_client", [FAST_RETRIES], indirect=True)
def test_tags_compressed_bodies_and_delay_levels(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """Tag subscriptions are filtered by the broker (tag hash in the consume queue) for push and
    pull; bodies over 4 KiB, which the client deflates and flags in ``sysFlag``, come back
    whole; a message with a delay level is held back for that level's time (1 s here) and then
    delivered on its own topic."""
    _, client = cluster_and_client
    big = client.produce("TagTopic", "sync", 4, prefix="big", pad=6000, tags="TagA")
    small = client.produce("TagTopic", "sync", 4, prefix="small", tags="TagB")
    pushed = client.consume("TagTopic", "push", "tag-a", 4, expression="TagA")
    pulled = client.consume("TagTopic", "pull", "tag-b", 4, expression="TagB")
    got_a = [e for e in pushed.finish() if e["event"] == "received"]
    got_b = [e for e in pulled.finish() if e["event"] == "received"]
    assert sorted(e["body"] for e in got_a) == sorted(e["body"] for e in big)
    assert {e["tags"] for e in got_a} == {"TagA"}
    assert sorted(e["body"] for e in got_b) == sorted(e["body"] for e in small)
    assert {e["tags"] for e in got_b} == {"TagB"}

    sent_at = time.monotonic()
    delayed = client.produce("DelayTopic", "sync", 2, prefix="later", delay_level=2)
    run = client.consume("DelayTopic", "push", "delayed", 2)
    received = [e for e in run.finish() if e["event"] == "received"]
    assert time.monotonic() - sent_at >= 1.0
    assert sorted(e["body"] for e in received) == sorted(e["body"] for e in delayed)
    assert {(e["topic"], e["reconsume_times"]) for e in received} == {("DelayTopic", 0)}


def test_consumer_status_reads_the_cpp_clients_running_info(
    cluster_and_client: tuple[BrokerCluster, Client],
) -> None:
    """``ledgermq admin consumer-status`` (GET_CONSUMER_RUNNING_INFO passed on by the broker)
    reads what the C++ push consumer says of itself: its subscription and the queues it holds
    with offsets that match what it consumed."""
    cluster, client = cluster_and_client
    sent = client.produce("StatusTopic", "sync", 8, prefix="s")
    consumer = client.consume("StatusTopic", "push", "cpp-watchers", 1000, timeout_s=40)
    assert consumer.wait_for(received_all(8), 25), consumer.report()
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(
            [sys.executable, "-m", "ledgermq", "admin", "-n", cluster.namesrv_addr,
             "consumer-status", "-g", "cpp-watchers", "--json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        clients = json.loads(done.stdout) if done.stdout.strip() else []
        queues = [q for c in clients for q in c.get("queues", ()) if q["topic"] == "StatusTopic"]
        if done.returncode == 0 and sum(q["consumerOffset"] for q in queues) == len(sent):
            break
        assert time.monotonic() < deadline, f"{done.returncode} {done.stdout} {done.stderr}"
        time.sleep(1)
    (status,) = clients
    assert status["language"] == "CPP"
    assert status["consumeType"] == "CONSUME_PASSIVELY"
    assert "StatusTopic" in {s["topic"] for s in status["subscriptions"]}
    assert all(q["lag"] == 0 for q in queues)
    assert sum(q["brokerOffset"] for q in queues) == len(sent)
