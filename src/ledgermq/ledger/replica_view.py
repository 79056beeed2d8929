"""What a replica tells an operator about its group's replication, as runtime-info fields.

``admin replica-status --ready`` decides whether the next replica of a rolling restart may be
stopped. Each replica's own indexes (end, committed, dispatched) say whether *it* has caught
up; only the leader knows whether the group can lose another member: which voters there are,
how far behind its own log end each follower is, and which of them answered its last
heartbeat. These fields carry that view (GET_BROKER_RUNTIME_INFO is a string table, as in
RocketMQ, so lists are comma-separated ``id`` or ``id=value`` items):

- ``dLegerPeerIds``: the voters of the configuration in effect, ``n0,n1,n2`` (every replica;
  the membership in the log, not the ``dLegerPeers`` it started with, which only seeds a new
  group);
- ``dLegerLearnerIds``: its learners (members being added, not voting yet), ``n3``;
- ``dLegerFollowerLags``: leader only, ``n1=0,n2=3``: entries between the leader's log end and
  what each follower has acknowledged;
- ``dLegerFollowersLive``: leader only, the followers that answered the last heartbeat round.

A replica that is not the leader sends the last two empty. ``client.readiness`` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.raft import Role

if TYPE_CHECKING:
    from ledgermq.raft.core import RaftCore

__all__ = ["replication_fields"]


def replication_fields(core: RaftCore) -> dict[str, str]:
    """The module docstring's fields from ``core``'s current state."""
    leading = core.role is Role.LEADER
    lags = core.replication_lags() if leading else {}
    live = sorted(peer for peer, ok in core.peers_live.items() if ok) if leading else []
    return {
        "dLegerPeerIds": ",".join(core.membership.voters),
        "dLegerLearnerIds": ",".join(core.membership.learners),
        "dLegerFollowerLags": ",".join(f"{peer}={lag}" for peer, lag in sorted(lags.items())),
        "dLegerFollowersLive": ",".join(live),
    }
