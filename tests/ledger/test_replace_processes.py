"""Replacing a dead replica by a blank one at a new id and address, with real ``ledger serve``
processes (issue 27 item 5: the operator's 78 s election livelock, also on a bare ledger group).

n0, n1, n2 run with the peer list n0, n1, n2; n2 dies for good; n3 starts with an empty disk and
the list n0, n1, n3 while the others still have the old one (they refuse it as unknown); then
n1 and n0 are restarted with the new list. Before the fix n3 moved to a new term every round
(term 58 after 12 s) and dragged the group there; now its term stays where the group's is, and
the new group elects and takes appends.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.testing.processes import ReplicaGroup

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OLD = ("n0", "n1", "n2")
NEW = ("n0", "n1", "n3")


class _EditedPeers(ReplicaGroup):
    """Each replica is started with its own peer list (``lists``), as an operator's edit is."""

    def __init__(self, tmp_dir: Path) -> None:
        super().__init__(tmp_dir, n=4)
        self.lists: dict[str, tuple[str, ...]] = dict.fromkeys(self.nodes, OLD)

    def serve_command(self, node: str) -> list[str]:
        command = super().serve_command(node)
        command[command.index("--peers") + 1] = self.peers_of(self.lists[node])
        return command


def test_a_blank_replica_at_a_new_address_does_not_run_the_terms_away(tmp_path: Path) -> None:
    group = _EditedPeers(tmp_path)
    try:
        for node in OLD:
            group.start(node)
        group.wait_for_leader(15.0, among=OLD)
        old_client = group.client(OLD)
        for i in range(5):
            old_client.append(b"before-%d" % i)
        group.kill9("n2")
        group.lists["n3"] = NEW
        group.start("n3")
        time.sleep(8.0)  # n3 campaigns while n0 and n1 refuse it as unknown
        assert group.metadata("n3").term <= 3
        for node in ("n1", "n0"):
            group.terminate(node)
            group.lists[node] = NEW
            group.start(node)
        group.wait_for_leader(15.0, among=NEW)
        terms = {node: group.metadata(node).term for node in NEW}
        assert max(terms.values()) <= 6, terms
        index = group.client(NEW).append(b"after")
        group.wait_for_commit(index, NEW)
    finally:
        group.close()
