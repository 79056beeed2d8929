"""A replica's side of membership changes: the persisted membership, peer addresses, log lines.

The group's membership lives in its log (CONFIG_CHANGE entries, ``ledgermq.raft.membership``).
Each replica also keeps the latest *committed* one in ``membership.json`` next to ``currterm``,
written durably before the commit index past its entry is recorded, so a restart knows it
before it reads the log (the core reads only the entries after the commit index).

``dLegerPeers`` (``peers``) only seeds a brand-new group: once a replica has a persisted
membership, that one wins. A config whose peer list disagrees with it (an operator edited
broker.conf by hand, or forgot to) starts with ONE warning naming both lists, so editing
configs can never create a second majority. Addresses come from the membership (``replica-add``
records the new member's ``host:port``) and, for members it does not give one, from the config.

A replica that is not a member is refused by the group (the core answers its vote requests
REJECT_UNKNOWN_LEADER and never counts it); ``note_message`` writes the log line on both sides,
once per peer: the members say who asked, the outsider says who refused it and what to do.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Final

from ledgermq.errors import CorruptLogError
from ledgermq.raft import (
    Membership,
    MembershipError,
    MembershipRecord,
    Message,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.store.segment import replace_file_durably

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.raft import MembershipState, RaftCore

__all__ = ["MEMBERSHIP_NAME", "ReplicaMembership", "read_membership", "write_membership"]

_log: Final = logging.getLogger("ledgermq.ledger")
MEMBERSHIP_NAME: Final = "membership.json"


def read_membership(directory: str) -> MembershipRecord | None:
    """The persisted committed membership, or None when this replica never persisted one."""
    path = os.path.join(directory, MEMBERSHIP_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        membership = Membership.decode(json.dumps(data["membership"]).encode())
        return MembershipRecord(int(data["index"]), membership, int(data.get("term", -1)))
    except (ValueError, KeyError, TypeError, MembershipError) as exc:
        raise CorruptLogError(path, 0, f"not a membership file: {exc}") from None


def write_membership(directory: str, record: MembershipRecord) -> None:
    """Durably replace the persisted membership."""
    data = {
        "index": record.index,
        "term": record.term,
        "membership": json.loads(record.membership.encode()),
    }
    replace_file_durably(directory, MEMBERSHIP_NAME, json.dumps(data, sort_keys=True).encode())


def _parse_address(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()):  # int("²") raises
        return None
    return host, int(port)


class ReplicaMembership:
    """What the ledger server knows of its group's members beyond the core's ids."""

    def __init__(
        self,
        group: str,
        self_id: str,
        peers: Mapping[str, tuple[str, int]],
        directory: str | None,
    ) -> None:
        """``directory`` None: nothing is written (a store handed in by a test)."""
        self._group = group
        self._self_id = self_id
        self._config_peers = dict(peers)
        self._directory = directory
        self.record = read_membership(directory) if directory is not None else None
        """The persisted committed membership (None: none yet; the config seeds the group)."""
        self._written = self.record
        self.addresses: dict[str, tuple[str, int]] = dict(peers)
        """id -> (host, port) of every member this replica may need to reach."""
        if self.record is not None:
            self._learn_addresses(self.record.membership)
        self._noted: set[tuple[str, str]] = set()

    def warn_if_config_differs(self) -> bool:
        """One WARNING when ``peers`` disagrees with the persisted membership; True if so."""
        record = self.record
        if record is None:
            return False
        configured = sorted(self._config_peers)
        members = record.membership
        differs = configured != list(members.members) or any(
            _parse_address(text) != self._config_peers.get(member)
            for member, text in members.addresses
            if member in self._config_peers
        )
        if differs:
            peers = ";".join(
                f"{p}-{h}:{port}" for p, (h, port) in sorted(self._config_peers.items())
            )
            _log.warning(
                "group %s: dLegerPeers in the config (%s) differs from the membership this "
                "replica persisted at log index %d (%s); the persisted membership is used "
                "(dLegerPeers only seeds a new group: change members with `ledgermq admin "
                "replica-add` / `replica-remove`)",
                self._group, peers, record.index, self.describe(members),
            )  # fmt: skip
        return differs

    def describe(self, membership: Membership) -> str:
        parts = []
        for member in membership.members:
            address = self.addresses.get(member)
            where = f"-{address[0]}:{address[1]}" if address else ""
            role = " (learner)" if member in membership.learners else ""
            parts.append(f"{member}{where}{role}")
        return ";".join(parts)

    def persist(self, state: MembershipState) -> None:
        """A Ready's membership: learn addresses, write the committed one if it changed."""
        self._learn_addresses(state.effective.membership)
        committed = state.committed
        if committed == self._written or committed.index < 0:
            return
        if self._directory is not None:
            write_membership(self._directory, committed)
        self._written = committed
        self.record = committed

    def _learn_addresses(self, membership: Membership) -> None:
        for member, text in membership.addresses:
            address = _parse_address(text)
            if address is not None:
                self.addresses[member] = address

    def note_message(self, message: Message, membership: Membership) -> None:
        """The log lines of a refused outsider, on both sides, once per peer."""
        if isinstance(message, VoteRequest) and not membership.is_member(message.leader_id):
            self._once(
                "asked",
                message.local_id,
                "group %s: replica %s asked for votes but is not a member (%s); refused. Add it "
                "with `ledgermq admin replica-add` before starting it",
                self._group,
                message.local_id,
                self.describe(membership),
            )
        elif (
            isinstance(message, VoteResponse) and message.result is VoteResult.REJECT_UNKNOWN_LEADER
        ):
            self._once(
                "refused",
                message.local_id,
                "group %s: replica %s refused this replica (%s) as not a member of the group; "
                "it is never admitted until added with `ledgermq admin replica-add`",
                self._group,
                message.local_id,
                self._self_id,
            )

    def rows(
        self, core: RaftCore, self_id: str, last_contact: Mapping[str, int], now_ms: int
    ) -> list[dict[str, object]]:
        """One row per member for ``replica-list``: id, address, role (leader / follower /
        learner), logEnd, lag (entries; None where unknown: only the leader knows its
        followers'), lastContactMs (ms since this replica last heard from it; 0 for itself)."""
        membership = core.membership
        lags = core.replication_lags()
        rows: list[dict[str, object]] = []
        for member in membership.members:
            address = self.addresses.get(member)
            if member in membership.learners:
                role = "learner"
            elif member == core.leader_id:
                role = "leader"
            else:
                role = "follower"
            if member == self_id:
                end: int | None = core.last_index
                lag: int | None = 0 if core.leader_id == self_id else None
                contact: int | None = 0
            else:
                lag = lags.get(member)
                end = core.last_index - lag if lag is not None else None
                heard = last_contact.get(member)
                contact = now_ms - heard if heard is not None else None
            rows.append(
                {
                    "id": member,
                    "address": f"{address[0]}:{address[1]}" if address else None,
                    "role": role,
                    "logEnd": end,
                    "lag": lag,
                    "lastContactMs": contact,
                }
            )
        return rows

    def _once(self, kind: str, peer: str, text: str, *args: object) -> None:
        if (kind, peer) in self._noted:
            return
        self._noted.add((kind, peer))
        _log.warning(text, *args)
