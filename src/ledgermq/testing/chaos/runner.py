"""One chaos run from start to verdict: cluster up, workload and nemesis for a while, heal, read
every replica and the consumer group, check, report.

Nothing is left behind whatever happens: the cluster's processes are killed and the
namespaces deleted in ``finally`` (and ``BrokerCluster`` kills its children at exit); a run
killed outright leaves namespaces named after its PID, which the next run, or
``ledgermq chaos cleanup``, removes (``netns.cleanup_leftovers``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ledgermq.bench.checkout import require_clone
from ledgermq.client import SyncAdmin
from ledgermq.errors import LedgerMQError
from ledgermq.testing.chaos.checker import Report, check
from ledgermq.testing.chaos.cluster import (
    CLIENT_NODE,
    GROUP,
    SPARE_REPLICAS,
    ChaosCluster,
    namesrv_node,
    replica_name,
)
from ledgermq.testing.chaos.disks import DEFAULT_DISK_MIB, LoopDisks, cleanup_leftover_disks
from ledgermq.testing.chaos.history import QUEUE_STRIDE, History, Outcome, ReadMessage
from ledgermq.testing.chaos.nemesis import (
    DEFAULT_KINDS,
    DISK_KINDS,
    NETWORK_KINDS,
    PROCESS_KINDS,
    TRIGGER_TOPIC,
    Nemesis,
)
from ledgermq.testing.chaos.netns import NetnsLab, cleanup_leftovers, namespaces_available
from ledgermq.testing.chaos.pop_workload import MAX_ATTEMPTS, PopGroup, read_dlq
from ledgermq.testing.chaos.reader import PullReader, final_offsets
from ledgermq.testing.chaos.timeline import NO_MATPLOTLIB, write_timeline
from ledgermq.testing.chaos.workload import Workload, consume_all, read_replica, run_as_client

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["BUGS", "RunOptions", "RunResult", "replay_command", "run_chaos"]

TOPIC: Final = "ChaosTopic"
BUGS: Final = {
    "ack-before-commit": "tests.chaos.buggy.buggy_broker",
    "follower-ack-before-store": "tests.chaos.buggy.buggy_follower",
    "pop-ack-before-commit": "tests.chaos.buggy.buggy_pop",
}
"""Injected bugs: the broker runs through this wrapper module (``--inject-bug``), which lives in
the repository's tests, not in the package: such runs start from a clone (``bench.checkout``)."""
POISON_MODULE: Final = "tests.chaos.buggy.poison_broker"
"""The brokers' wrapper with ``--faults poison`` (``nemesis`` module docstring), a clone's too."""
_SETTLE_S: Final = 30.0
_CONSUME_S: Final = 60.0
_CONSUME_INVALID_S: Final = 10.0
"""The consumer's wait when the replicas already disagree (the run is invalid whatever it
gets): enough to show what reaches it, without a minute's wait for what cannot."""
_RECOVER_S: Final = 15.0
"""After the last heal the producers go on until one send is acknowledged (or this long), so
that the last fault's recovery is measured like every other's."""


@dataclass(frozen=True)
class RunOptions:
    seed: int
    duration_s: float = 60.0
    faults: Sequence[str] = DEFAULT_KINDS
    producers: int = 3
    queues: int = 4
    base_dir: str | None = None
    keep: bool = False
    loopback: bool = False
    inject_bug: str | None = None
    unsafe: bool = False
    """Faults may hit two replicas of three at once (``nemesis`` module docstring)."""
    overlap: bool = True
    """A fault may get a second, compatible one during its hold (``nemesis``)."""
    namesrvs: int = 1
    """NameServers (1 or 2); brokers register with each, clients are given all."""
    groups: int = 1
    """Broker groups of three replicas (1 or 2); the topic has ``queues`` queues in each."""
    disk_mib: int = DEFAULT_DISK_MIB
    """Size of each replica's loop disk (disk faults only). Small, so a full disk comes fast;
    a run that writes more than it holds has retention delete acknowledged messages on every
    replica, which leaves them unverifiable (``checker`` rule 1): size it to the volume."""
    pop_receivers: int = 3
    """POP receivers of the run's POP group (``pop_workload``); 0: no POP group."""


@dataclass
class RunResult:
    report: Report
    history: History
    base_dir: Path
    mode: str
    replay: str
    timeline: Path | None = None
    notes: list[str] = field(default_factory=list)


def replay_command(options: RunOptions, faults: Sequence[str]) -> str:
    """The ``ledgermq chaos run`` line that runs ``options`` again."""
    words = ["ledgermq", "chaos", "run", "--seed", str(options.seed)]
    words += ["--duration", f"{options.duration_s:g}", "--faults", ",".join(faults)]
    words += ["--producers", str(options.producers), "--queues", str(options.queues)]
    if options.loopback:
        words.append("--loopback")
    if options.unsafe:
        words.append("--unsafe")
    if not options.overlap:
        words.append("--no-overlap")
    if options.namesrvs != 1:
        words += ["--namesrvs", str(options.namesrvs)]
    if options.groups != 1:
        words += ["--groups", str(options.groups)]
    if options.disk_mib != DEFAULT_DISK_MIB:
        words += ["--disk-mib", str(options.disk_mib)]
    if options.pop_receivers != RunOptions.pop_receivers:
        words += ["--pop-receivers", str(options.pop_receivers)]
    if options.inject_bug:
        words += ["--inject-bug", options.inject_bug]
    return " ".join(words)


def run_chaos(options: RunOptions, log: Callable[[str], None]) -> RunResult:
    """Run ``options`` (module docstring); ``log`` gets one line per step and per fault."""
    if options.inject_bug is not None and options.inject_bug not in BUGS:
        raise ValueError(f"unknown bug {options.inject_bug!r}; known: {', '.join(BUGS)}")
    if options.inject_bug is not None and "poison" in options.faults:
        raise ValueError("the poison fault runs its own broker module: not with --inject-bug")
    loopback, mode, faults = _choose_mode(options, log)
    broker_module = _broker_module(options, faults)
    base = Path(options.base_dir or tempfile.mkdtemp(prefix=f"ledgermq-chaos-{options.seed}-"))
    base.mkdir(parents=True, exist_ok=True)
    if options.unsafe:
        mode += ", unsafe: a majority may be hit"
    log(f"seed {options.seed}, {options.duration_s:g} s, {mode}, faults {', '.join(faults)}, "
        f"logs in {base}")  # fmt: skip
    namesrvs = [namesrv_node(index) for index in range(options.namesrvs)]
    groups = [f"broker-{letter}" for letter in "abcdefgh"[: options.groups]]
    lab = None if loopback else NetnsLab([*namesrvs, *_replica_nodes(groups, faults), CLIENT_NODE])
    disks = LoopDisks(base / "disks", options.disk_mib) if set(faults) & set(DISK_KINDS) else None
    cluster: ChaosCluster | None = None
    try:
        if lab is not None:
            lab.create()
        cluster = ChaosCluster(
            base / "cluster",
            lab=lab,
            broker_module=broker_module,
            disks=disks,
            namesrvs=options.namesrvs,
            groups=options.groups,
        )
        cluster.start()
        cluster.wait_routable(timeout_s=30.0)
        with SyncAdmin(cluster.namesrv_addr) as admin:
            admin.create_topic(TOPIC, options.queues, wait_s=20.0)
            if "poison" in faults:
                admin.create_topic(TRIGGER_TOPIC, 1, wait_s=20.0)
        log(f"cluster up: NameServer {cluster.namesrv_addr}, master "
            f"{cluster.master(GROUP)}")  # fmt: skip
        history = _exercise(cluster, options, faults, log)
    finally:
        if cluster is not None:
            cluster.close()
        if disks is not None:
            disks.close()
        if lab is not None:
            lab.close()
    history.write_jsonl(base / "history.jsonl")
    report = check(history)
    result = RunResult(report, history, base, mode, replay_command(options, faults))
    result.timeline = write_timeline(history, base / "timeline.png")
    if result.timeline is None:
        result.notes.append(NO_MATPLOTLIB)
    if report.valid and not options.keep and options.base_dir is None:
        shutil.rmtree(base, ignore_errors=True)
        result.timeline = None
    return result


def _replica_nodes(groups: Sequence[str], faults: Sequence[str]) -> list[str]:
    """The replicas' namespaces: three per group, and with ``replace`` one for each replica
    the run may add (``SPARE_REPLICAS``)."""
    replicas = [replica_name(group, node) for group in groups for node in ("n0", "n1", "n2")]
    if "replace" in faults:
        replicas += [f"n{index}" for index in range(3, 3 + SPARE_REPLICAS)]
    return replicas


def _broker_module(options: RunOptions, faults: Sequence[str]) -> str:
    """What the brokers run: ``ledgermq``, or a wrapper with a bug or the poison, which only a
    clone has (``CloneOnlyError`` from an installed package, before anything starts)."""
    module = BUGS[options.inject_bug] if options.inject_bug else "ledgermq"
    if "poison" in faults:
        module = POISON_MODULE
    if module != "ledgermq":
        require_clone(module, "Injected bugs and the poison fault")
    return module


def _choose_mode(options: RunOptions, log: Callable[[str], None]) -> tuple[bool, str, list[str]]:
    """Namespaces when possible (leftovers of crashed runs removed first), else loopback with
    the faults that need no root; ``(loopback, mode, faults)``."""
    why_not = None if options.loopback else namespaces_available()
    faults = list(options.faults)
    if options.loopback or why_not is not None:
        if why_not is not None:
            log(f"network namespaces unavailable: {why_not}; running on loopback with process "
                "faults only")  # fmt: skip
        needs_root = (*NETWORK_KINDS, *DISK_KINDS)
        faults = [kind for kind in faults if kind not in needs_root] or list(PROCESS_KINDS)
        return True, "loopback (process faults only)", faults
    for name in [*cleanup_leftovers(), *cleanup_leftover_disks()]:
        log(f"removed a crashed run's leftover {name}")
    return False, "network namespaces", faults


def _exercise(
    cluster: ChaosCluster, options: RunOptions, faults: Sequence[str], log: Callable[[str], None]
) -> History:
    origin = time.monotonic()
    history = History(seed=options.seed, queues=options.queues)
    reader = PullReader(cluster.namesrv_addr, TOPIC, origin=origin)
    workload = Workload(
        cluster.namesrv_addr,
        TOPIC,
        producers=options.producers,
        origin=origin,
        namespace=cluster.client_namespace,
        reader=reader,
    )
    nemesis = Nemesis(
        cluster,
        options.seed,
        faults,
        origin=origin,
        log=log,
        unsafe=options.unsafe,
        overlap=options.overlap,
    )
    pop = None
    if options.pop_receivers > 0:
        pop = PopGroup(
            cluster.namesrv_addr,
            TOPIC,
            origin=origin,
            namespace=cluster.client_namespace,
            receivers=options.pop_receivers,
        )
    try:
        workload.start()
        try:
            if pop is not None:
                pop.start()
            nemesis.run(options.duration_s)
            _await_recovery(workload, nemesis.now_ms(), log, nemesis.supervise)
        finally:
            workload.stop()
            history.sends = sorted(workload.sends, key=lambda op: op.invoke_ms)
            history.faults = nemesis.faults
            history.live_reads = list(reader.reads)
            history.offset_ops = sorted(reader.offset_ops, key=lambda op: op.invoke_ms)
            history.notes += workload.errors + reader.errors
        log(f"healed; {len(history.sends)} sends; reading every replica")
        for group in cluster.groups:
            try:
                cluster.wait_master(group, timeout_s=_SETTLE_S)
            except AssertionError as exc:  # a liveness failure: judged with everything else
                history.problems.append(f"after healing: {str(exc).splitlines()[0]}")
                log(f"no master after healing; its views and log tails:\n{exc}")
        history.replica_groups = {
            replica_name(group, node): index
            for index, group in enumerate(cluster.groups)
            for node in cluster.nodes
        }
        found, history.replica_errors, history.replica_first = _read_replicas(
            cluster, options.queues, nemesis.supervise
        )
        history.replica_reads = found
        _after_faults(cluster, faults, nemesis, history, log)
        expected = {(op.producer, op.seq) for op in history.sends if op.outcome is Outcome.OK}
        for reads in history.replica_reads.values():
            expected |= {(read.producer, read.seq) for read in reads}
        expected -= history.expired_messages()  # retention deleted them somewhere: maybe unreadable
        agreed = not history.replica_errors and _agree(
            history.replica_reads, history.replica_first, history.replica_groups
        )
        # Every replica read and agreeing: an acknowledged message that none of them holds
        # cannot reach the consumer (rules 1 and 4 name it all the same), so the consumer does
        # not wait a minute for it; it still gets everything that arrives until it is done.
        wait_s, awaited = (
            (_CONSUME_S, expected & _held(history.replica_reads))
            if agreed
            else (_CONSUME_INVALID_S, expected)
        )
        log(f"consuming {len(awaited)} distinct messages with a push consumer group")
        history.consumed = run_as_client(
            cluster.client_namespace,
            lambda: consume_all(cluster.namesrv_addr, TOPIC, awaited, timeout_s=wait_s),
        )
        try:
            history.final_offsets = run_as_client(
                cluster.client_namespace, lambda: final_offsets(cluster.namesrv_addr, TOPIC)
            )
        except LedgerMQError as exc:
            history.problems.append(
                f"the pull reader's offsets could not be read after healing: {exc}"
            )
        if pop is not None:
            _drain_pop(pop, cluster, expected, wait_s, history, log)
    finally:
        if pop is not None:
            pop.stop()  # a no-op after the drain; stops the receivers when the run failed
    return history


def _drain_pop(
    pop: PopGroup,
    cluster: ChaosCluster,
    expected: set[tuple[int, int]],
    wait_s: float,
    history: History,
    log: Callable[[str], None],
) -> None:
    """Let the POP receivers drain ``expected`` (they ran on through the healing), stop them,
    read the group's %DLQ% and put their record in ``history``."""
    held = _held(history.replica_reads)
    log(f"draining the POP group ({len(pop.deliveries)} deliveries so far)")
    # What no healed replica holds cannot come (rule 1 already names it): no wait for it.
    if not pop.drain(expected & held, wait_s):
        log(f"the POP group did not drain within {wait_s:g} s")
    history.pop_max_attempts = MAX_ATTEMPTS
    history.pop_deliveries = sorted(pop.deliveries, key=lambda d: d.invoke_ms)
    history.pop_acks = sorted(pop.acks, key=lambda a: a.invoke_ms)
    history.notes += pop.errors
    try:
        history.pop_dead_letters = read_dlq(cluster.namesrv_addr, cluster.client_namespace)
    except LedgerMQError as exc:
        history.problems.append(f"the POP group's %DLQ% could not be read after healing: {exc}")


def _after_faults(
    cluster: ChaosCluster,
    faults: Sequence[str],
    nemesis: Nemesis,
    history: History,
    log: Callable[[str], None],
) -> None:
    """What the nemesis saw goes into ``history``: the supervisor's restarts, and with
    ``poison`` whether every replica quarantined what was committed."""
    history.notes += [f"supervisor: {line}" for line in nemesis.exits]
    if "poison" in faults:
        log(f"{nemesis.poisoned} poison entries committed; asking every replica")
        history.problems += _quarantine_problems(cluster, nemesis.poisoned)


def _quarantine_problems(cluster: ChaosCluster, poisoned: int) -> list[str]:
    """After ``--faults poison``: every replica of each group must say (runtime info) that it
    quarantined the same number of entries, and all groups together at least the
    ``poisoned`` committed (README "Operations"); anything else is a problem of the run."""
    problems: list[str] = []
    total = 0
    for group in cluster.groups:
        views = cluster.runtime_info(group)
        counts = {
            node: view.get("quarantinedEntries") if isinstance(view, dict) else str(view)
            for node, view in views.items()
        }
        values = set(counts.values())
        if len(counts) != len(cluster.nodes) or len(values) != 1:
            problems.append(f"{group}: the replicas quarantined different entries: {counts}")
            continue
        (value,) = values
        if not str(value).isdigit():
            problems.append(f"{group}: the replicas answered {value!r} for quarantinedEntries")
            continue
        total += int(str(value))
    if not problems and total < poisoned:
        problems.append(f"{poisoned} poison entries committed, the replicas quarantined {total}")
    return problems


def _held(replica_reads: dict[str, list[ReadMessage]]) -> set[tuple[int, int]]:
    """The messages (producer, seq) that at least one replica holds."""
    return {(r.producer, r.seq) for reads in replica_reads.values() for r in reads}


def _await_recovery(
    workload: Workload,
    healed_ms: float,
    log: Callable[[str], None],
    supervise: Callable[[], None],
) -> None:
    """Until a send invoked after ``healed_ms`` is acknowledged, or ``_RECOVER_S``; the
    supervisor goes on restarting replicas that stop by themselves (``Nemesis.supervise``)."""
    deadline = time.monotonic() + _RECOVER_S
    while time.monotonic() < deadline:
        supervise()
        latest = workload.sends[-500:]  # a copy: the producers' thread appends meanwhile
        if any(op.outcome is Outcome.OK and op.invoke_ms >= healed_ms for op in latest):
            return
        time.sleep(0.1)
    log(f"no send acknowledged within {_RECOVER_S:g} s of the last heal")


def _read_replicas(
    cluster: ChaosCluster, queues: int, supervise: Callable[[], None]
) -> tuple[dict[str, list[ReadMessage]], dict[str, str], dict[str, dict[int, int]]]:
    """Read each replica until all of them serve the same messages (followers catch up after
    healing) or ``_SETTLE_S`` passes; the last reads, the replicas that failed, and where
    retention made each replica's queues start. Before each round the supervisor restarts a
    replica that stopped by itself: one whose disk filled just before the last heal exits
    after the nemesis has finished (seed 103 read a dead replica for 30 s)."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        supervise()
        reads: dict[str, list[ReadMessage]] = {}
        errors: dict[str, str] = {}
        first: dict[str, dict[int, int]] = {}
        groups: dict[str, int] = {}
        for index, group in enumerate(cluster.groups):
            for node in cluster.nodes:
                name = replica_name(group, node)
                groups[name] = index
                try:
                    reads[name], first[name] = read_replica(cluster, group, node, TOPIC, queues)
                except LedgerMQError as exc:
                    errors[name] = str(exc)
        if (not errors and _agree(reads, first, groups)) or time.monotonic() >= deadline:
            return reads, errors, first
        time.sleep(1.0)


def _agree(
    reads: dict[str, list[ReadMessage]], first: dict[str, dict[int, int]], groups: dict[str, int]
) -> bool:
    """Every replica of a queue's group serves the same message at every slot of it, except
    slots that retention deleted on a replica (below the first offset it still holds)."""
    views = {
        node: {(r.queue, r.offset): (r.producer, r.seq) for r in found}
        for node, found in reads.items()
    }
    slots = set().union(*views.values()) if views else set()
    for queue, offset in slots:
        held = {
            view.get((queue, offset))
            for node, view in views.items()
            if groups.get(node, 0) == queue // QUEUE_STRIDE
            and offset >= first.get(node, {}).get(queue, 0)
        }
        if len(held) > 1:
            return False
    return True
