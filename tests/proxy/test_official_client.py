"""The official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) against our gRPC door.

Real processes: one NameServer and one 3-replica broker group (``broker_clusters``), each replica
with its gRPC door on a free port. The client runs in a child process (``rmq5_producer_driver``)
with its own ``HOME``, from a venv of its own: its top-level package ``rocketmq`` is the C++
client's too (tests/interop), so it never goes into the test venv. The venv is made once and
cached (``LEDGERMQ_RMQ5_VENV``, default ``$TMPDIR/ledgermq-rmq5-venv-5.1.2``); without PyPI the
tests skip with one line.

What the client's producer acknowledged is then read back through our remoting PullConsumer:
same body, tag, keys and user property, under the client's message id (``UNIQ_KEY``). With the
master killed (kill -9) in the middle, every acknowledged send is still there afterwards
(unacknowledged ones may or may not be).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client.blocking import SyncAdmin, SyncPullConsumer
from ledgermq.client.consumer import PullStatus
from ledgermq.net.tls import TlsClientConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.testing.tls_certs import CertificateSet

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENT = "rocketmq-python-client==5.1.2"
DRIVER = Path(__file__).with_name("rmq5_producer_driver.py")
PROBE = Path(__file__).with_name("rmq5_consumer_probe.py")
SIMPLE = Path(__file__).with_name("rmq5_simple_consumer_driver.py")
PUSH = Path(__file__).with_name("rmq5_push_consumer_driver.py")
GROUP = "broker-a"
TOPIC = "GrpcTopic"


def client_python() -> str:
    """The cached venv's interpreter, made now if missing (one process at a time)."""
    venv = Path(
        os.environ.get("LEDGERMQ_RMQ5_VENV")
        or Path(tempfile.gettempdir()) / "ledgermq-rmq5-venv-5.1.2"
    )
    python = venv / "bin" / "python"
    lock_path = venv.with_name(venv.name + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = python.exists() and _imports(python)
        if not ready:
            subprocess.run(
                [sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120
            )
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", CLIENT],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            if done.returncode != 0 or not _imports(python):
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"cannot install {CLIENT} from PyPI ({last})")
    return str(python)


def _imports(python: Path) -> bool:
    probe = "from rocketmq import Producer, ClientConfiguration"
    return (
        subprocess.run([str(python), "-c", probe], capture_output=True, check=False).returncode == 0
    )


class Driver:
    """The driver in a child process; its JSON lines collected as they come."""

    def __init__(
        self,
        python: str,
        home: Path,
        args: dict[str, Any],
        script: Path = DRIVER,
        env: dict[str, str] | None = None,
    ) -> None:
        """``env``: more environment variables for the client (``PATH`` and ``HOME`` are set)."""
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [python, str(script), json.dumps(args)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), **(env or {})},
            cwd=home, start_new_session=True,
        )  # fmt: skip
        self.stderr = b""
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == kind]

    def wait(self, timeout_s: float) -> int:
        """The exit status, once the client has finished by itself."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError(
                f"the client did not finish in {timeout_s} s\n{self.report()}"
            ) from None

    def finish(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError(
                f"the client did not finish in {timeout_s} s\n{self.report()}"
            ) from None
        self.close()
        assert self.of("done"), f"the client failed\n{self.report()}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for reader in self._readers:
            reader.join(5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    LOG = Path("logs/rocketmq_python/rocketmq_client.log")
    """The client's log, under its ``HOME``; the last lines go into ``report``."""

    def report(self) -> str:
        log = self.home / self.LOG
        tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
        return (
            "stderr:\n"
            + self.stderr.decode(errors="replace")[-4000:]
            + "\nlog:\n"
            + "\n".join(tail)
        )


def _cluster(
    broker_clusters: MakeCluster, attributes: str | None = None, **options: Any
) -> tuple[BrokerCluster, str]:
    """``options``: for ``broker_clusters`` (``extra_settings``, ``tls`` ...); ``attributes``:
    the topic's (``+message.type=TRANSACTION``)."""
    cluster = broker_clusters(**options)
    cluster.wait_routable()
    with SyncAdmin(cluster.namesrv_addr, tls=cluster.tls) as admin:
        admin.create_topic(TOPIC, 4, attributes=attributes, wait_s=10)
    endpoints = ";".join(cluster.grpc_address(GROUP, n) for n in cluster.nodes)
    return cluster, endpoints


def read_back(
    namesrv_addr: str, deadline_s: float = 20.0, tls: TlsClientConfig | None = None
) -> dict[str, Any]:
    """Every message of the topic, by message id, through our remoting PullConsumer."""
    found: dict[str, Any] = {}
    with SyncPullConsumer("grpc-check", namesrv_addr, tls=tls) as consumer:
        consumer.start()
        queues = consumer.fetch_queues(TOPIC)
        for mq in queues:
            offset = 0
            end = time.monotonic() + deadline_s
            while time.monotonic() < end:
                result = consumer.pull(mq, offset, 32, timeout_s=5)
                if result.status is not PullStatus.FOUND:
                    break
                for message in result.messages:
                    found[message.msg_id] = message
                offset = result.next_begin_offset
    return found


def check_acknowledged(sent: list[dict[str, Any]], found: dict[str, Any]) -> None:
    missing = [e["message_id"] for e in sent if e["message_id"] not in found]
    assert not missing, f"{len(missing)} acknowledged sends are not readable: {missing[:5]}"
    for event in sent:
        message = found[event["message_id"]]
        assert message.body.hex() == event["body"]
        assert message.tags == event["tag"]
        assert sorted(message.keys) == event["keys"]
        assert message.properties["index"] == event["properties"]["index"]


def test_producer_sends_normal_messages(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters)
    driver = Driver(python, tmp_path / "client", {"endpoints": endpoints, "topic": TOPIC,
                                                   "count": 40})  # fmt: skip
    try:
        driver.finish(60)
    finally:
        driver.close()
    sent, failed = driver.of("sent"), driver.of("failed")
    assert not failed, f"sends failed: {failed[:3]}\n{driver.report()}"
    assert len(sent) == 40
    assert len({e["message_id"] for e in sent}) == 40
    found = read_back(cluster.namesrv_addr)
    check_acknowledged(sent, found)
    assert len(found) == 40


def test_master_killed_mid_stream(broker_clusters: MakeCluster, tmp_path: Path) -> None:
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters)
    master = cluster.wait_master(GROUP)
    # 8 s of sends (it was 14): the kill comes after the first 30 (about 1 s in), the first
    # send after it is acknowledged 1.6 s later, then some 30 a second
    driver = Driver(python, tmp_path / "client", {"endpoints": endpoints, "topic": TOPIC,
                                                   "duration_s": 8, "pause_s": 0.02})  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(driver.of("sent")) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(driver.of("sent")) >= 30, driver.report()
        acked_before = len(driver.of("sent"))
        cluster.kill9(GROUP, master)
        new_master = cluster.wait_master(GROUP, 20)
        assert new_master != master
        driver.finish(60)
    finally:
        driver.close()
    sent, failed = driver.of("sent"), driver.of("failed")
    killed_at = driver.of("sent")[acked_before - 1]["t"] if acked_before else 0.0
    print(  # the run's shape, for the report: -s shows it
        f"acked before kill {acked_before}, acked in all {len(sent)}, failed {len(failed)}; "
        f"master {master} -> {new_master}; first ack after the kill at "
        f"+{next((e['t'] - killed_at for e in sent[acked_before:]), -1):.1f} s; "
        f"errors: {sorted({e['error'][:80] for e in failed})[:3]}"
    )
    found = read_back(cluster.namesrv_addr)
    check_acknowledged(sent, found)


def test_consumers_start_and_receive_nothing_from_an_empty_topic(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """Both consumer kinds start (Telemetry settings, QueryAssignment), and a SimpleConsumer's
    receive on an empty topic is an empty list after its long polling (MESSAGE_NOT_FOUND)."""
    python = client_python()
    _, endpoints = _cluster(broker_clusters)
    home = tmp_path / "client"
    home.mkdir()
    done = subprocess.run(
        [python, str(PROBE), endpoints, TOPIC],
        capture_output=True, text=True, timeout=60, check=False, cwd=home,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["simple_startup"] == "ok", outcome
    assert outcome["simple_receive"] == "0 messages", outcome
    assert outcome["push_startup"] == "ok", outcome


def _sent(python: str, home: Path, endpoints: str, count: int) -> set[str]:
    """The message ids of ``count`` messages the official producer sent to ``TOPIC``, each
    acknowledged."""
    producer = Driver(python, home, {"endpoints": endpoints, "topic": TOPIC, "count": count})
    try:
        producer.finish(60)
    finally:
        producer.close()
    sent = {e["message_id"] for e in producer.of("sent")}
    assert len(sent) == count, producer.report()
    return sent


def test_simple_consumer_receives_acks_and_changes_invisible_duration(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """The official SimpleConsumer over POP: every message the producer sent is received and
    acknowledged; one left unacknowledged comes back with delivery attempt 2; one whose
    invisible duration was changed to 60 s does not come back, and its ack with the changed
    handle is accepted; afterwards nothing is left to receive."""
    python = client_python()
    _, endpoints = _cluster(broker_clusters)
    sent = _sent(python, tmp_path / "producer", endpoints, 12)
    consumer = Driver(
        python, tmp_path / "consumer",
        {"endpoints": endpoints, "topic": TOPIC, "group": "simple-g", "count": 12,
         "duration_s": 40},
        script=SIMPLE,
    )  # fmt: skip
    try:
        consumer.finish(80)
    finally:
        consumer.close()
    assert not consumer.of("failed"), consumer.of("failed")[:3]
    acked = [e["message_id"] for e in consumer.of("acked")]
    assert sorted(acked) == sorted(sent), consumer.report()
    attempts: dict[str, list[int]] = {}
    for event in consumer.of("received"):
        attempts.setdefault(event["message_id"], []).append(event["attempt"])
    (held,) = (e["message_id"] for e in consumer.of("held"))
    (renewed,) = (e["message_id"] for e in consumer.of("renewed"))
    assert attempts[held] == [1, 2]
    assert attempts[renewed] == [1]
    assert all(a == [1] for m, a in attempts.items() if m != held), attempts
    assert consumer.of("done")[0]["leftover"] == 0


def test_push_consumer_consumes_and_redelivers_a_failure(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    """The official PushConsumer over POP (QueryAssignment, long-polled receives, acks): every
    message the producer sent is consumed successfully, once; the one its listener failed
    comes back with delivery attempt 2 (the client re-arms it through
    ChangeInvisibleDuration with the server's backoff policy)."""
    python = client_python()
    _, endpoints = _cluster(broker_clusters)
    sent = _sent(python, tmp_path / "producer", endpoints, 20)
    consumer = Driver(
        python, tmp_path / "push",
        {"endpoints": endpoints.split(";")[0], "topic": TOPIC, "group": "push-g", "count": 20,
         "duration_s": 60},
        script=PUSH,
    )  # fmt: skip
    try:
        consumer.finish(90)
    finally:
        consumer.close()
    consumed = consumer.of("consumed")
    succeeded = [e["message_id"] for e in consumed if e["result"] == "SUCCESS"]
    assert sorted(succeeded) == sorted(sent), consumer.report()
    (failed,) = [e for e in consumed if e["result"] == "FAILURE"]
    again = [e for e in consumed if e["message_id"] == failed["message_id"]]
    assert [e["attempt"] for e in again] == [1, 2], again
    assert consumer.of("done")[0]["distinct"] == 20


def _tls_everywhere(certs: CertificateSet) -> dict[str, Any]:
    """``broker_clusters`` options: every port of the cluster (NameServer, remoting, ledger,
    gRPC) enforces TLS with the session's certificates, and the harness trusts their CA."""
    server = {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.server.trustCertPath": str(certs.ca),
        "tls.client.trustCertPath": str(certs.ca),
    }
    return {
        "extra_settings": server,
        "namesrv_settings": server,
        "tls": TlsClientConfig(trust_cert_path=str(certs.ca)),
    }


def test_producer_over_tls(
    broker_clusters: MakeCluster, tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    """The official client with ``tls_enable=True``, trusting our CA through grpcio's
    ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (it has no option of its own for a CA): it starts
    (QueryRoute, Telemetry over TLS), follows the route to the master's endpoint (127.0.0.1,
    which the certificate names) and every acknowledged send is stored.

    One access point: given a list (``h:p;h:p;h:p``), the client dials the target
    ``ipv4:h:p,h:p,h:p``, whose authority is the whole list, and grpcio checks the server's
    certificate against that, which no certificate can name ("Hostname Verification Check
    failed"). Any replica answers routes, and the route names the master alone."""
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters, **_tls_everywhere(tls_certificates))
    driver = Driver(
        python,
        tmp_path / "client",
        {"endpoints": endpoints.split(";")[0], "topic": TOPIC, "count": 20, "tls": True},
        env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls_certificates.ca)},
    )
    try:
        driver.finish(60)
    finally:
        driver.close()
    sent, failed = driver.of("sent"), driver.of("failed")
    assert not failed, f"sends failed: {failed[:3]}\n{driver.report()}"
    assert len(sent) == 20
    found = read_back(cluster.namesrv_addr, tls=cluster.tls)
    check_acknowledged(sent, found)
    assert len(found) == 20


def test_official_client_refused_without_tls_or_trust(
    broker_clusters: MakeCluster, tmp_path: Path, tls_certificates: CertificateSet
) -> None:
    """On a port that enforces TLS, the official client gets nothing through in plaintext (its
    default, ``tls_enable=False``), nor over TLS while it trusts only grpcio's default roots,
    which never signed our certificate."""
    python = client_python()
    cluster, endpoints = _cluster(broker_clusters, **_tls_everywhere(tls_certificates))
    for name, tls in (("plaintext", False), ("untrusted", True)):
        driver = Driver(
            python,
            tmp_path / name,
            {"endpoints": endpoints.split(";")[0], "topic": TOPIC, "count": 2, "tls": tls},
        )
        try:
            driver.wait(90)
        finally:
            driver.close()
        assert not driver.of("sent"), f"{name}: a send got through\n{driver.report()}"
        assert driver.of("startup_failed") or driver.of("failed"), driver.report()
    assert read_back(cluster.namesrv_addr, deadline_s=5, tls=cluster.tls) == {}
