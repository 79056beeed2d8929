"""Whether the account a gRPC Telemetry stream was opened with may publish a topic, for both
gRPC doors (the replica's and the stand-alone proxy's): a check-back carries the half message,
so it goes only to a producer entitled to it (issue 25 item 5); a producer's settings claim
topics, which anyone may claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.security.acl import Needs, Perm
from ledgermq.security.acl.grpc_auth import parse_authorization
from ledgermq.security.acl.resources import topic_resource
from ledgermq.security.acl.validator import authorize
from ledgermq.security.gate import remote_ip

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.security.gate import AclGate

__all__ = ["signed_in_publisher"]


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
