"""Every name a chaos run gives its namespaces, bridge and veths reads back as that run's PID:
``cleanup_leftovers`` deletes what belongs to dead PIDs, so a misread name is a live run's link
deleted. Was: the bridge's veth end was ``lmqv<pid><i>``, read as PID ``<pid><i>`` (dead), and a
second run started beside the CI's chaos tests cut their cluster off."""

from __future__ import annotations

import pytest

from ledgermq.testing.chaos import netns
from ledgermq.testing.chaos.netns import NetnsLab, owner_pid


@pytest.mark.parametrize("pid", ["1", "16784", "4194304"])
def test_every_name_of_a_run_reads_back_as_its_pid(
    pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.getpid", lambda: int(pid))
    lab = NetnsLab(["n0", "n1", "n2"])
    try:
        names = [lab.bridge, *(lab.namespace(n) for n in lab.nodes)]
        for index in range(len(lab.nodes)):
            names += lab.veth_pair(index)
        for name in names:
            assert len(name) <= 15, name  # IFNAMSIZ - 1
            assert owner_pid(name) == int(pid), name
    finally:
        netns._live_labs.discard(lab)


def test_names_of_others_are_not_ours() -> None:
    assert owner_pid("eth0") is None
    assert owner_pid("docker0") is None
