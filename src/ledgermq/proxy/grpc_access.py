"""The ACL's side of the gRPC door once a call was admitted (``AclGate.check_grpc``).

``GrpcAccess``: a call's ``Access`` (``broker.service.access``) for the checks a service makes
once it has read a record (EndTransaction: PUB on the half message's real topic, whatever topic
the request names). ``signed_in_publisher``: whether the account a Telemetry stream was opened
with may publish a topic, so that the door sends a check-back, which carries the half message,
only to a producer entitled to it (issue 25 item 5): a producer's settings claim topics, which
anyone may claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.acl import Needs, Perm
from ledgermq.acl.grpc_auth import parse_authorization
from ledgermq.acl.resources import topic_resource
from ledgermq.acl.validator import authorize
from ledgermq.broker.errors import ForbiddenError
from ledgermq.security import remote_ip

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.security import AclGate

__all__ = ["GrpcAccess", "signed_in_publisher"]


class GrpcAccess:
    """The ``Access`` of one admitted gRPC call: ``check_grpc`` again, with the new needs."""

    def __init__(
        self,
        gate: AclGate,
        address: str,
        metadata: Mapping[str, str],
        request: str,
        now_s: Callable[[], float],
    ) -> None:
        self._gate = gate
        self._address = address
        self._metadata = metadata
        self._request = request
        self._now_s = now_s

    def require(self, needs: Needs, rule: str) -> None:
        decision = self._gate.check_grpc(
            self._address, self._metadata, self._request, needs, self._now_s()
        )
        if not decision.allowed:
            raise ForbiddenError(f"{decision.access_key or 'this client'} is refused: {rule}")


def signed_in_publisher(
    gate: AclGate, address: str, metadata: Mapping[str, str]
) -> Callable[[str], bool]:
    """``may_publish(topic)`` for the account of a Telemetry stream admitted with ``metadata``
    (its signature was verified then), under the ACL files as they are when asked."""
    header = metadata.get("authorization", "")
    auth = parse_authorization(header) if header else None
    access_key = auth.access_key if auth is not None else None
    ip = remote_ip(address)

    def may_publish(topic: str) -> bool:
        needs = Needs(resources={topic_resource(topic): Perm.PUB})
        config = gate.files.current()
        return authorize(
            config, ip, access_key, lambda _secret: True, "a check-back", needs
        ).allowed

    return may_publish
