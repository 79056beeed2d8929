"""Network namespaces for a chaos run: one per process, veth pairs on one bridge.

Layout (``<pid>`` is the id of the process that made the lab, so that names are unique per run
and ``cleanup_leftovers`` can tell a crashed run's leftovers from a live run's lab)::

    root namespace:  bridge lmqb<pid>  10.200.K.1/24   (the harness's own queries)
        |-- veth lmqv<pid>-<i>  <->  eth0 in namespace lmqc<pid>-<node>  10.200.K.(10+i)/24

The nodes are the NameServer, the replicas and ``cl``, the clients' namespace: the workload's
producers, consumers and readers run in threads that ``enter_namespace`` moved there, so that
their traffic crosses the bridge like a remote client's, never the root namespace's shortcut.

``K`` is a third octet of 10.200.0.0/16 that no interface of the root namespace uses.
Faults this kernel supports without netem or a firewall:

- a blackhole route inside a namespace (``ip route add blackhole PEER/32``), one on each side
  of a pair: the pair is cut both ways. The kernel answers the local sender at once (EINVAL),
  so each side fails fast rather than timing out; the other side's packets are dropped.
- ``ip link set eth0 down`` inside a namespace: the node is cut off from all, and knows it.
- its veth taken off the bridge: cut off from all, silently (its ``eth0`` stays up).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import re
import shutil
import subprocess
import weakref
from typing import Final

__all__ = [
    "NAMESPACE_PREFIX",
    "NetnsError",
    "NetnsLab",
    "cleanup_leftovers",
    "enter_namespace",
    "namespaces_available",
    "owner_pid",
    "pid_alive",
]

NAMESPACE_PREFIX: Final = "lmqc"
_BRIDGE_PREFIX: Final = "lmqb"
_VETH_PREFIX: Final = "lmqv"
_NETWORK: Final = "10.200"
_IP_TIMEOUT_S: Final = 10.0
_CLONE_NEWNET: Final = 0x40000000
_OWNED: Final = re.compile(rf"^(?:{NAMESPACE_PREFIX}|{_BRIDGE_PREFIX}|{_VETH_PREFIX})(\d+)")


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message has the command and its stderr."""


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    command = (
        ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    )
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False
    )
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return done.stdout


def namespaces_available() -> str | None:
    """None when this process can make namespaces, bridges and veth pairs; else why not."""
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_NET_ADMIN)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"{NAMESPACE_PREFIX}{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` failed: {exc}"
    _ip("netns", "delete", probe, check=False)
    return None


def enter_namespace(namespace: str) -> None:
    """Move the calling thread, and only it, into ``namespace`` (``setns(2)``; Python 3.11
    has no ``os.setns``). Sockets the thread opens from then on live in that namespace, and
    threads it starts inherit it; the other threads of the process stay where they are."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise NetnsError(f"setns into {namespace} failed: {os.strerror(error)}")
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(namespace: str) -> None:
    pids = _ip("netns", "pids", namespace, check=False).split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)


def owner_pid(name: str) -> int | None:
    """The PID of the run that made the namespace, bridge or veth ``name``; None if no run
    of ours made it. Every name ends its PID with a non-digit (or the name's end)."""
    owner = _OWNED.match(name)
    return None if owner is None else int(owner.group(1))


def cleanup_leftovers(*, include_live: bool = False) -> list[str]:
    """Delete the namespaces, bridges and veths of chaos runs whose process is gone (or all of
    them with ``include_live``), killing any process still inside; the names removed."""
    removed: list[str] = []
    if shutil.which("ip") is None:
        return removed  # no iproute2: no run here ever made a namespace
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        owner = owner_pid(name)
        if owner is None or (not include_live and pid_alive(owner)):
            continue
        _kill_namespace_processes(name)
        _ip("netns", "delete", name, check=False)
        removed.append(name)
    for line in _ip("-o", "link", "show", check=False).splitlines():
        fields = line.split(":")
        if len(fields) < 2:
            continue
        name = fields[1].strip().split("@")[0]
        owner = owner_pid(name)
        if owner is None or (not include_live and pid_alive(owner)):
            continue
        _ip("link", "delete", name, check=False)
        removed.append(name)
    return removed


def _free_octet() -> int:
    """A free third octet, searched from one that depends on the PID, so that two runs that
    start together rarely race for the same subnet."""
    used = _ip("-4", "-o", "addr", "show", check=False)
    first = os.getpid() % 254
    for step in range(254):
        octet = (first + step) % 254 + 1
        if f" {_NETWORK}.{octet}." not in used:
            return octet
    raise NetnsError(f"every {_NETWORK}.K.0/24 is in use in the root namespace")


_live_labs: weakref.WeakSet[NetnsLab] = weakref.WeakSet()


@atexit.register
def _close_leftovers() -> None:
    """An interpreter that exits (even by an uncaught exception) deletes its namespaces."""
    for lab in list(_live_labs):
        lab.close()


class NetnsLab:
    """The namespaces of one run (module docstring). ``close`` removes everything; it runs on
    ``with`` exit and at interpreter exit, and ``cleanup_leftovers`` covers a run that was
    killed before either."""

    def __init__(self, nodes: list[str]) -> None:
        self.tag = str(os.getpid())
        self.nodes = list(nodes)
        self.bridge = f"{_BRIDGE_PREFIX}{self.tag}"
        self.octet = 0
        self.ips: dict[str, str] = {}
        self.veths: dict[str, str] = {}
        """Node -> its veth's end in the root namespace (the bridge port)."""
        self.bridge_ip = ""
        """The root namespace's address on the bridge: the harness asks the replicas from it."""
        self._blackholes: set[tuple[str, str]] = set()
        self._created: list[str] = []
        _live_labs.add(self)

    def namespace(self, node: str) -> str:
        return f"{NAMESPACE_PREFIX}{self.tag}-{node}"

    def veth_pair(self, index: int) -> tuple[str, str]:
        """The names of node ``index``'s veth: the bridge's end, the namespace's end. The PID
        ends at a non-digit: "lmqv<pid><i>" read as the PID of another, dead process, and a
        second run's ``cleanup_leftovers`` deleted a live run's links."""
        return f"{_VETH_PREFIX}{self.tag}-{index}", f"{_VETH_PREFIX}{self.tag}x{index}"

    def exec_prefix(self, node: str) -> list[str]:
        """What runs a command inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(node)]

    def create(self) -> None:
        """Bridge, namespaces, veth pairs, addresses; NetnsError (after undoing) on failure."""
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        self.octet = _free_octet()
        subnet = f"{_NETWORK}.{self.octet}"
        self.bridge_ip = f"{subnet}.1"
        _ip("link", "add", self.bridge, "type", "bridge")
        self._created.append(self.bridge)
        _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for index, node in enumerate(self.nodes):
            namespace = self.namespace(node)
            outside, inside = self.veth_pair(index)
            ip = f"{subnet}.{10 + index}"
            ipaddress.IPv4Address(ip)  # a node beyond .254 is a programming error
            _ip("netns", "add", namespace)
            self._created.append(namespace)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", namespace)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            _ip("link", "set", "lo", "up", namespace=namespace)
            _ip("link", "set", inside, "name", "eth0", namespace=namespace)
            _ip("addr", "add", f"{ip}/24", "dev", "eth0", namespace=namespace)
            _ip("link", "set", "eth0", "up", namespace=namespace)
            self.ips[node] = ip
            self.veths[node] = outside

    # ------------------------------------------------------------------ faults
    def cut(self, a: str, b: str) -> None:
        """Drop every packet between nodes ``a`` and ``b`` (a blackhole route on each side)."""
        for here, there in ((a, b), (b, a)):
            if (here, there) not in self._blackholes:
                _ip("route", "add", "blackhole", f"{self.ips[there]}/32",
                    namespace=self.namespace(here))  # fmt: skip
                self._blackholes.add((here, there))

    def heal_cuts(self) -> None:
        for here, there in sorted(self._blackholes):
            _ip("route", "delete", "blackhole", f"{self.ips[there]}/32",
                namespace=self.namespace(here), check=False)  # fmt: skip
        self._blackholes.clear()

    def link(self, node: str, *, up: bool) -> None:
        """``ip link set eth0 up|down`` in ``node``'s namespace."""
        _ip("link", "set", "eth0", "up" if up else "down", namespace=self.namespace(node))

    def bridge_port(self, node: str, *, attached: bool) -> None:
        """Take ``node``'s veth off the bridge (or put it back). Unlike a link down, the node
        sees nothing: its ``eth0`` stays up and every packet is silently lost."""
        if attached:
            _ip("link", "set", self.veths[node], "master", self.bridge)
        else:
            _ip("link", "set", self.veths[node], "nomaster")

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Kill what is left in the namespaces, delete them and the bridge. Idempotent."""
        for name in reversed(self._created):
            if name.startswith(NAMESPACE_PREFIX):
                _kill_namespace_processes(name)
                _ip("netns", "delete", name, check=False)
            else:
                _ip("link", "delete", name, check=False)
        self._created.clear()
        self._blackholes.clear()
        _live_labs.discard(self)

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
