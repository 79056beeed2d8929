"""The ACL at a remoting front door: a request either passes or gets NO_PERMISSION (16).

``check`` runs before a request's handler. Which requests it looks at is the door's choice:
a broker checks every request; a NameServer, like RocketMQ's, serves route lookups to anyone and
checks what changes the cluster (registrations, topic deletion). The answer's remark says what
is missing (``ledgermq.acl.validate``); admin requests and refusals go to the audit log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ledgermq.acl import Needs, request_needs, validate
from ledgermq.acl.grpc_auth import DATE_TIME_HEADER, date_time_within, parse_authorization
from ledgermq.acl.grpc_auth import signature_matches as grpc_signature_matches
from ledgermq.acl.resources import ADMIN_CODES
from ledgermq.acl.validator import Decision, authorize
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

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
    """Checks requests against the ACL files; ``only``: the codes to check (None: all)."""

    def __init__(
        self,
        files: AclFiles,
        server: str,
        audit: AuditLog | None = None,
        only: Collection[int] | None = None,
    ) -> None:
        self.files = files
        self.server = server
        self.audit = audit
        self.only = None if only is None else frozenset(only)
        self.refused = 0
        """Requests refused so far (a metric)."""

    def check_grpc(
        self,
        address: str,
        metadata: Mapping[str, str],
        request: str,
        needs: Needs,
        now_s: float,
    ) -> Decision:
        """The decision for a gRPC call from its metadata (``authorization`` and
        ``x-mq-date-time``, ``ledgermq.acl.grpc_auth``); refusals are logged and audited."""
        header = metadata.get("authorization", "")
        auth = parse_authorization(header) if header else None
        date_time = metadata.get(DATE_TIME_HEADER, "")

        def signed_by(secret: str) -> bool:
            return (
                auth is not None
                and date_time_within(date_time, now_s)
                and grpc_signature_matches(secret, date_time, auth.signature)
            )

        decision = authorize(
            self.files.current(),
            remote_ip(address),
            auth.access_key if auth is not None else None,
            signed_by,
            f"gRPC {request}",
            needs,
        )
        if not decision.allowed:
            self.refused += 1
            _log.info(
                "%s refused gRPC %s from %s (access key %s): %s",
                self.server, request, address, decision.access_key, decision.remark,
            )  # fmt: skip
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
        decision = validate(self.files.current(), ip, code, fields, command.body, needs)
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
        _log.info(
            "%s refused %s from %s (access key %s): %s",
            self.server, _code_name(code), address, decision.access_key, decision.remark,
        )  # fmt: skip
        return command.response(MQResponseCode.NO_PERMISSION, remark=decision.remark)
