"""The server's side of LedgerMQ's strong signature (``security.acl.strong``) at a remoting door.

A request that carries the strong signature is checked by it (whatever the server requires):
its time must be within ``SKEW_S`` of the server's clock, its (access key, nonce) pair new, and
its ``LmqSignature`` right for the request code, the fields and the body. A server with
``aclRequireStrongSignature=true`` refuses a signed request without one, with a remark that
says so. White addresses need no signature at all, as in RocketMQ, so neither applies to them.
The remarks for a missing strong signature, a stale time and a reused nonce come before the
signature is checked; a wrong signature reads like any other ("do not match").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.security.acl import validate
from ledgermq.security.acl.signature import ACCESS_KEY
from ledgermq.security.acl.strong import (
    STRONG_NONCE,
    STRONG_REQUIRED,
    STRONG_SIGNATURE,
    NonceCache,
    strong_matches,
    strong_problem,
    strong_time_ms,
)
from ledgermq.security.acl.validator import Decision, authorize

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.clock import Clock
    from ledgermq.security.acl import AclConfig, Needs

__all__ = ["StrongSignatureCheck"]


class StrongSignatureCheck:
    """Decisions for remoting requests, with the strong signature when sent or required."""

    def __init__(self, clock: Clock, *, required: bool = False) -> None:
        self._clock = clock
        self.required = required
        """``aclRequireStrongSignature``: a signed request without it is refused."""
        self.nonces = NonceCache()

    def decide(
        self,
        config: AclConfig,
        ip: str,
        code: int,
        fields: Mapping[str, str],
        body: bytes | None,
        needs: Needs,
    ) -> Decision:
        """The decision for one remoting request (``security.acl.validate`` when neither sent nor
        required)."""
        access_key = fields.get(ACCESS_KEY)
        strong = STRONG_SIGNATURE in fields
        if not strong and not self.required:
            return validate(config, ip, code, fields, body, needs)
        account = config.accounts.get(access_key) if access_key else None
        white = any(p.matches(ip) for p in config.global_white) or (
            account is not None and account.white_address.matches(ip)
        )
        if access_key and not white:
            problem = self._problem(access_key, fields)
            if problem is not None:
                return Decision(False, access_key, problem, False)
        if not strong:
            return validate(config, ip, code, fields, body, needs)
        decision = authorize(
            config,
            ip,
            access_key,
            lambda secret: strong_matches(code, fields, body, secret),
            f"request code {code}",
            needs,
        )
        time_ms = strong_time_ms(fields)
        if access_key and decision.authenticated and time_ms is not None:
            now_ms = int(self._clock.wall_time_s() * 1000)
            self.nonces.remember(access_key, fields[STRONG_NONCE], time_ms, now_ms)
        return decision

    def _problem(self, access_key: str, fields: Mapping[str, str]) -> str | None:
        """Why a signed request cannot be accepted, before its signature is checked: no
        strong signature while one is required, a time out of bounds, a nonce seen before."""
        if STRONG_SIGNATURE not in fields:
            return (
                f"this server {STRONG_REQUIRED} (aclRequireStrongSignature="
                "true): sign with Credentials(..., strong_signature=True); RocketMQ's "
                "signature alone is not accepted"
            )
        problem = strong_problem(fields, self._clock.wall_time_s())
        if problem is not None:
            return problem
        time_ms = strong_time_ms(fields)
        assert time_ms is not None  # strong_problem checked it
        return self.nonces.problem(access_key, fields[STRONG_NONCE], time_ms)
