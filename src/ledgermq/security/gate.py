"""The ACL at a remoting front door: a request either passes or gets NO_PERMISSION (16).

``check`` runs before a request's handler. Which requests it looks at is the door's choice:
a broker checks every request; a NameServer, like RocketMQ's, serves route lookups to anyone and
checks what changes the cluster (registrations, topic deletion). The answer's remark says what
is missing (``ledgermq.security.acl.validate``); admin requests and refusals go to the audit log.

Failed sign-ins are throttled per source and per access key (``ledgermq.security.throttle``):
a locked source or key is refused before any signature is computed. Refusals that repeat are
logged once per ten seconds and then summed up with a count (``ledgermq.security.repeats``),
here and in the audit log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ledgermq.clock import SystemClock
from ledgermq.security.acl import Needs, request_needs
from ledgermq.security.acl.grpc_auth import DATE_TIME_HEADER, date_time_within, parse_authorization
from ledgermq.security.acl.grpc_auth import signature_matches as grpc_signature_matches
from ledgermq.security.acl.resources import ADMIN_CODES
from ledgermq.security.acl.signature import ACCESS_KEY
from ledgermq.security.acl.validator import Decision, authorize
from ledgermq.security.repeats import WINDOW_S, RepeatedLines, alike, more_like_it
from ledgermq.security.strong_check import StrongSignatureCheck
from ledgermq.security.throttle import SignInThrottle
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from ledgermq.clock import Clock
    from ledgermq.security.acl_files import AclFiles
    from ledgermq.security.audit import AuditLog
    from ledgermq.wire import RemotingCommand

__all__ = ["AclGate", "remote_ip"]

_log: Final = logging.getLogger("ledgermq.security")


def remote_ip(address: str) -> str:
    """The IP of a connection's ``host:port`` (``[v6]:port`` too)."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


def _code_name(code: int) -> str:
    try:
        return MQRequestCode(code).name
    except ValueError:
        return f"code {code}"


class AclGate:
    """Checks requests against the ACL files; ``only``: the codes to check (None: all);
    ``clock``: the throttle's and the log's windows (default: the system's)."""

    def __init__(
        self,
        files: AclFiles,
        server: str,
        audit: AuditLog | None = None,
        only: Collection[int] | None = None,
        clock: Clock | None = None,
        require_strong: bool = False,
    ) -> None:
        self.files = files
        self.server = server
        self.audit = audit
        self.only = None if only is None else frozenset(only)
        self.refused = 0
        """Requests refused so far (a metric)."""
        self._clock = clock or SystemClock()
        self.throttle = SignInThrottle(self._clock)
        self._log_repeats: RepeatedLines[tuple[str, str | None, str, str], str] = RepeatedLines(
            WINDOW_S
        )
        self.strong = StrongSignatureCheck(self._clock, required=require_strong)
        """LedgerMQ's strong signature: checked when sent, required with ``require_strong``
        (``aclRequireStrongSignature``)."""

    def _held_back(self, ip: str, access_key: str | None) -> Decision | None:
        """The refusal for a source or key locked by the throttle, before any signature."""
        remark = self.throttle.refusal(ip, access_key)
        return None if remark is None else Decision(False, access_key, remark, False)

    def _count_sign_in(self, ip: str, decision: Decision) -> None:
        """Tell the throttle how a sign-in went (unsigned requests are no guess)."""
        if decision.access_key is None:
            return
        if decision.authenticated:
            self.throttle.succeeded(ip, decision.access_key)
        else:
            self.throttle.failed(ip, decision.access_key)

    def _log_refusal(self, ip: str, request: str, decision: Decision, message: str) -> None:
        """``message`` at INFO, unless one like it (same source, key, request and reason) was
        logged in the last ``WINDOW_S``: then it is counted, and summed up once that is over."""
        kind = (ip, decision.access_key, request, alike(decision.remark))
        write, due = self._log_repeats.offer(kind, self._clock.monotonic_ms() / 1000, message)
        for example, count in due:
            _log.info("%s %s", example, more_like_it(count, WINDOW_S))
        if write:
            _log.info("%s", message)

    def check_grpc(
        self,
        address: str,
        metadata: Mapping[str, str],
        request: str,
        needs: Needs,
        now_s: float,
    ) -> Decision:
        """The decision for a gRPC call from its metadata (``authorization`` and
        ``x-mq-date-time``, ``security.acl.grpc_auth``); refusals are logged and audited."""
        header = metadata.get("authorization", "")
        auth = parse_authorization(header) if header else None
        date_time = metadata.get(DATE_TIME_HEADER, "")

        def signed_by(secret: str) -> bool:
            return (
                auth is not None
                and date_time_within(date_time, now_s)
                and grpc_signature_matches(secret, date_time, auth.signature)
            )

        ip = remote_ip(address)
        access_key = auth.access_key if auth is not None else None
        decision = self._held_back(ip, access_key)
        if decision is None:
            decision = authorize(
                self.files.current(), ip, access_key, signed_by, f"gRPC {request}", needs
            )
            self._count_sign_in(ip, decision)
        if not decision.allowed:
            self.refused += 1
            self._log_refusal(
                ip,
                f"gRPC {request}",
                decision,
                f"{self.server} refused gRPC {request} from {address} "
                f"(access key {decision.access_key}): {decision.remark}",
            )
            if self.audit is not None:
                self.audit.record(
                    server=self.server,
                    access_key=decision.access_key,
                    remote=address,
                    code=-1,
                    request=f"gRPC {request}",
                    fields={},
                    allowed=False,
                    remark=decision.remark,
                )
        return decision

    def check(
        self, address: str, command: RemotingCommand, needs: Needs | None = None
    ) -> RemotingCommand | None:
        """None if ``command`` may be served, else the NO_PERMISSION answer to send instead.

        ``needs``: what the request needs, when the door knows better than its code and
        extFields (HEART_BEAT: ``heartbeat_needs`` of its body).
        """
        code = command.code
        if self.only is not None and code not in self.only:
            return None
        fields = command.ext_fields
        if needs is None:
            needs = request_needs(code, fields)
        ip = remote_ip(address)
        decision = self._held_back(ip, fields.get(ACCESS_KEY))
        if decision is None:
            decision = self.strong.decide(
                self.files.current(), ip, code, fields, command.body, needs
            )
            self._count_sign_in(ip, decision)
        return self.answer(address, command, decision)

    def check_again(self, address: str, command: RemotingCommand, needs: Needs) -> Decision:
        """The decision on more ``needs`` of a request ``check`` already admitted (a record's
        topic, known once the record is read): its signature was verified then, so it is not
        verified again (a strong signature's nonce is spent, and the throttle counted the
        sign-in); a refusal is audited and logged as ``check``'s are (``answer``)."""
        fields = command.ext_fields
        decision = authorize(
            self.files.current(), remote_ip(address), fields.get(ACCESS_KEY),
            lambda _secret: True, f"request code {command.code}", needs,
        )  # fmt: skip
        if not decision.allowed:
            self.answer(address, command, decision)
        return decision

    def answer(
        self, address: str, command: RemotingCommand, decision: Decision
    ) -> RemotingCommand | None:
        """Audit ``decision`` (refusals and admin requests), count and log a refusal, and
        return its NO_PERMISSION answer (None when allowed)."""
        code = command.code
        fields = command.ext_fields
        ip = remote_ip(address)
        if self.audit is not None and (not decision.allowed or code in ADMIN_CODES):
            self.audit.record(
                server=self.server,
                access_key=decision.access_key,
                remote=address,
                code=code,
                request=_code_name(code),
                fields=dict(fields),
                allowed=decision.allowed,
                remark=decision.remark,
            )
        if decision.allowed:
            return None
        self.refused += 1
        self._log_refusal(
            ip,
            _code_name(code),
            decision,
            f"{self.server} refused {_code_name(code)} from {address} "
            f"(access key {decision.access_key}): {decision.remark}",
        )
        return command.response(MQResponseCode.NO_PERMISSION, remark=decision.remark)
