"""The ACL's side of the remoting door once a request was admitted (``AclGate.check``).

``GateAccess``: a request's ``Access`` (``broker.service.access``) for the checks made after
reading a record; it asks the gate again with the same request and the new needs, without
verifying its signature a second time (``AclGate.check_again``), so a refusal is logged and
audited like any other.

``SignedIn``: who each connection signed in as when its last HEART_BEAT was admitted (its
address and ``AccessKey``), so that the broker sends a transaction's check-back, which carries
the half message, only to a producer whose account has PUB on the message's topic (issue 25 item
5). A heartbeat names a producer group, which anyone may claim; the account is what counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.broker.errors import ForbiddenError
from ledgermq.security.acl.signature import ACCESS_KEY
from ledgermq.security.acl.validator import authorize
from ledgermq.security.gate import remote_ip

if TYPE_CHECKING:
    from ledgermq.net import Connection
    from ledgermq.security.acl import Needs
    from ledgermq.security.gate import AclGate
    from ledgermq.wire import RemotingCommand

__all__ = ["GateAccess", "SignedIn"]


class GateAccess:
    """The ``Access`` of one admitted remoting request."""

    def __init__(self, gate: AclGate, address: str, command: RemotingCommand) -> None:
        self._gate = gate
        self._address = address
        self._command = command

    def require(self, needs: Needs, rule: str) -> None:
        decision = self._gate.check_again(self._address, self._command, needs)
        if not decision.allowed:
            who = self._command.ext_fields.get(ACCESS_KEY) or "this client"
            raise ForbiddenError(f"{who} is refused: {rule}")


class SignedIn:
    """Connection -> (IP, AccessKey or None) of its last admitted heartbeat."""

    def __init__(self, gate: AclGate) -> None:
        self._gate = gate
        self._who: dict[Connection, tuple[str, str | None]] = {}

    def heartbeat_admitted(self, conn: Connection, command: RemotingCommand) -> None:
        """Record the heartbeat's signer (its signature was verified by the gate); forgotten
        when the connection closes."""
        if conn not in self._who:
            conn.add_close_callback(self.forget)
        self._who[conn] = (remote_ip(conn.address), command.ext_fields.get(ACCESS_KEY) or None)

    def __len__(self) -> int:
        """Connections remembered (tests: none is kept after it closes)."""
        return len(self._who)

    def forget(self, conn: Connection) -> None:
        self._who.pop(conn, None)

    def allows(self, conn: Connection, needs: Needs) -> bool:
        """Whether the account ``conn`` signed in with has ``needs`` under the ACL files as
        they are now; False for a connection that never had a heartbeat admitted."""
        who = self._who.get(conn)
        if who is None:
            return False
        ip, access_key = who
        decision = authorize(
            self._gate.files.current(), ip, access_key, lambda _secret: True, "a check-back",
            needs,
        )  # fmt: skip
        return decision.allowed
