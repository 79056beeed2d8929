"""A gRPC call's ``Access`` (``broker.service.access``) at the replica's own gRPC door, for the
checks a service makes once it has read a record (EndTransaction: PUB on the half message's real
topic, whatever topic the request names): ``AclGate.check_grpc`` again with the new needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledgermq.broker.errors import ForbiddenError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.security.acl import Needs
    from ledgermq.security.gate import AclGate

__all__ = ["GrpcAccess"]


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
