"""Peer authentication on the ledger port: only the group's own replicas (and clients given the
group's secret) may talk to a replica.

Without it, anything that reaches the ledger port could append raw entries, vote, or pose as a
follower whose acknowledgements make a leader commit without a real majority. With a group
secret configured (``dLegerPeerSecret``), every connection starts with a mutual challenge and
response before any other frame is served:

1. the connecting side sends ``AUTH_HELLO`` with its group, its id and a fresh nonce ``Nc``;
2. the replica answers with its own fresh nonce ``Ns`` and ``HMAC(secret, "server|group|Nc|Ns")``,
   which the connecting side checks (a fake replica cannot produce it);
3. the connecting side sends ``AUTH_PROOF`` = ``HMAC(secret, "client|group|Ns|Nc")``; the replica
   checks it and from then on serves the connection.

HMAC-SHA256, compared in constant time; nonces are 128 random bits, so a recorded handshake
cannot be replayed on another connection. Any other frame before step 3 is answered
NOT_AUTHENTICATED and the connection closed. The secret itself never crosses the wire. It
authenticates; it does not encrypt (TLS does that).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from typing import TYPE_CHECKING, Final

from ledgermq.errors import NetworkError, PeerAuthenticationError
from ledgermq.raft import ResponseCode
from ledgermq.wire import FLAG_RESPONSE, LedgerRequestCode, RemotingCommand

if TYPE_CHECKING:
    from ledgermq.net import Connection

__all__ = ["PeerAuthenticator", "authenticate"]

_log: Final = logging.getLogger("ledgermq.ledger")

_HELLO: Final = int(LedgerRequestCode.AUTH_HELLO)
_PROOF: Final = int(LedgerRequestCode.AUTH_PROOF)


def _nonce() -> str:
    return secrets.token_hex(16)


def _proof(secret: bytes, role: str, group: str, first: str, second: str) -> str:
    message = f"{role}|{group}|{first}|{second}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


async def authenticate(
    conn: Connection, secret: bytes, group: str, who: str, timeout_s: float = 2.0
) -> None:
    """The connecting side of the handshake (steps 1-3) on a fresh connection.

    Raises:
        PeerAuthenticationError: the replica refused, or could not prove it knows the secret.
        NetworkError: the connection failed on the way.
    """
    mine = _nonce()
    hello = RemotingCommand(_HELLO, 0, ext_fields={"group": group, "id": who, "nonce": mine})
    answer = await conn.request(hello, timeout_s)
    if answer.code != ResponseCode.SUCCESS:
        hint = (
            "it does not authenticate peers: give every replica the same dLegerPeerSecret"
            if answer.code == ResponseCode.UNSUPPORTED
            else answer.remark or f"code {answer.code}"
        )
        raise PeerAuthenticationError(
            f"the ledger replica at {conn.address} refused the handshake: {hint}", conn.address
        )
    theirs = answer.ext_fields.get("nonce", "")
    if not theirs or not _same(
        answer.ext_fields.get("proof", ""), _proof(secret, "server", group, mine, theirs)
    ):
        raise PeerAuthenticationError(
            f"the ledger replica at {conn.address} does not know group {group}'s secret "
            "(dLegerPeerSecret differs, or it is not this group's replica)",
            conn.address,
        )
    proof = _proof(secret, "client", group, theirs, mine)
    done = await conn.request(RemotingCommand(_PROOF, 0, ext_fields={"proof": proof}), timeout_s)
    if done.code != ResponseCode.SUCCESS:
        raise PeerAuthenticationError(
            f"the ledger replica at {conn.address} refused our proof: {done.remark}", conn.address
        )


class PeerAuthenticator:
    """The replica's side: which incoming connections have proved themselves."""

    def __init__(self, secret: bytes, group: str) -> None:
        self._secret = secret
        self._group = group
        self._proven: set[Connection] = set()
        self._challenges: dict[Connection, tuple[str, str]] = {}
        """Connection -> (its nonce, ours), between steps 2 and 3."""
        self.refused = 0
        """Connections refused so far (a metric)."""

    def admit(self, conn: Connection, cmd: RemotingCommand) -> bool:
        """Whether ``cmd`` may be served; if not, it was answered here (and the connection
        closed when it broke the rules)."""
        if conn in self._proven:
            return True
        if cmd.is_response:
            self._refuse(conn, cmd, "a response on a connection that has not authenticated")
            return False
        if cmd.code == _HELLO:
            self._hello(conn, cmd)
        elif cmd.code == _PROOF:
            self._check_proof(conn, cmd)
        else:
            self._refuse(
                conn,
                cmd,
                f"request code {cmd.code} before authentication: this ledger port serves only "
                f"group {self._group}'s peers, which authenticate first (dLegerPeerSecret)",
            )
        return False

    def _hello(self, conn: Connection, cmd: RemotingCommand) -> None:
        fields = cmd.ext_fields
        group, theirs = fields.get("group", ""), fields.get("nonce", "")
        if group != self._group or len(theirs) < 16:
            self._refuse(conn, cmd, f"this is a replica of group {self._group}, not {group!r}")
            return
        mine = _nonce()
        if conn not in self._challenges:
            conn.add_close_callback(self._forget)
        self._challenges[conn] = (theirs, mine)
        proof = _proof(self._secret, "server", self._group, theirs, mine)
        self._answer(conn, cmd, ResponseCode.SUCCESS, "", {"nonce": mine, "proof": proof})

    def _check_proof(self, conn: Connection, cmd: RemotingCommand) -> None:
        challenge = self._challenges.pop(conn, None)
        if challenge is None:
            self._refuse(conn, cmd, "AUTH_PROOF without AUTH_HELLO")
            return
        theirs, mine = challenge
        expected = _proof(self._secret, "client", self._group, mine, theirs)
        if not _same(cmd.ext_fields.get("proof", ""), expected):
            self._refuse(conn, cmd, "the proof does not match this group's secret")
            return
        self._proven.add(conn)
        self._answer(conn, cmd, ResponseCode.SUCCESS, "", {})

    def _refuse(self, conn: Connection, cmd: RemotingCommand, why: str) -> None:
        self.refused += 1
        _log.warning("ledger port: refusing %s: %s", conn.address, why)
        if not cmd.is_response:
            self._answer(conn, cmd, ResponseCode.NOT_AUTHENTICATED, why, {})
        conn.close()

    @staticmethod
    def _answer(
        conn: Connection, cmd: RemotingCommand, code: int, remark: str, fields: dict[str, str]
    ) -> None:
        if conn.closed:
            return
        try:
            conn.send(
                RemotingCommand(
                    code, cmd.opaque, FLAG_RESPONSE, remark=remark or None, ext_fields=fields
                )
            )
        except NetworkError:
            conn.close()

    def _forget(self, conn: Connection) -> None:
        self._challenges.pop(conn, None)
        self._proven.discard(conn)
