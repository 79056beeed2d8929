"""The ``Backend`` of a replica's own gRPC door: the replica's ``BrokerServices`` (local mode).

Routes name every replica's door for its group (``proxy.routes``), so a call may reach a
follower. While this replica is not the master, what only the master serves goes there through
a ``RemoteBackend`` (the stand-alone proxy's way, over remoting, signed with the broker's own
account: the call was authorized at this door): acknowledgements, invisible-time changes and
dead letters (POP's state is the master's), transaction ends, and recalls (also those whose
handle names another broker group, whatever this replica's role). A door with no NameServer to
find its master by has no remote backend, and a follower answers as its services do.

A transaction id is the half message's offset message id (``proxy.transactions``); a service's
refusal becomes a status through ``proxy.status``, its one table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import NotMasterError, ServiceError
from ledgermq.broker.service.access import OPEN_ACCESS
from ledgermq.broker.service.timers import RecallHandle
from ledgermq.broker.service.transactions import EndTransactionRequest
from ledgermq.broker.service.transactions import Resolution as ServiceResolution
from ledgermq.errors import MessageFormatError
from ledgermq.proxy.backend import Resolution
from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.replica_access import GrpcAccess
from ledgermq.proxy.status import Code, error_status, status
from ledgermq.wire.message import decode_offset_message_id

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.proxy.backend import AckEntry, Caller, EndTransaction
    from ledgermq.proxy.remote_backend import RemoteBackend
    from ledgermq.security import AclGate

__all__ = ["LocalBackend"]

_RESOLUTIONS: Final = {
    Resolution.COMMIT: ServiceResolution.COMMIT,
    Resolution.ROLLBACK: ServiceResolution.ROLLBACK,
    Resolution.UNKNOWN: ServiceResolution.UNKNOWN,
}


class LocalBackend:
    """``Backend`` over a replica's services (module docstring). ``remote``: the way to the
    group's master while this replica is not it (None: none, the services answer)."""

    def __init__(
        self,
        services: BrokerServices,
        state: BrokerState,
        acl: AclGate | None,
        remote: RemoteBackend | None = None,
    ) -> None:
        self._services = services
        self._state = state
        self._acl = acl
        self._remote = remote

    def _master_elsewhere(self) -> RemoteBackend | None:
        """The remote backend, when this replica is not the master and has one."""
        return None if self._state.is_master else self._remote

    async def ack(
        self, group: str, topic: str, entries: Sequence[AckEntry], deadline_s: float
    ) -> list[Refusal | None]:
        if (remote := self._master_elsewhere()) is not None:
            return await remote.ack(group, topic, entries, deadline_s)
        # one replicated op per queue for the whole batch (PopService.ack_many)
        errors = await self._services.pop.ack_many(
            group, topic, [entry.receipt_handle for entry in entries]
        )
        tracer = self._services.trace
        answers: list[Refusal | None] = []
        for entry, error in zip(entries, errors, strict=True):
            if error is not None:
                answers.append(Refusal(error_status(error)))
                continue
            if tracer is not None:
                tracer.acked(group=group, msg_id=entry.message_id, handle=entry.receipt_handle)
            answers.append(None)
        return answers

    async def change_invisible(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int, deadline_s: float
    ) -> str:
        if (remote := self._master_elsewhere()) is not None:
            return await remote.change_invisible(
                group, topic, receipt_handle, invisible_ms, deadline_s
            )
        try:
            handle = await self._services.pop.change_invisible(
                group, topic, receipt_handle, invisible_ms
            )
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        return str(handle)

    async def forward_to_dead_letters(
        self, group: str, topic: str, receipt_handle: str, deadline_s: float
    ) -> None:
        if (remote := self._master_elsewhere()) is not None:
            await remote.forward_to_dead_letters(group, topic, receipt_handle, deadline_s)
            return
        try:
            await self._services.pop.forward_to_dead_letters(group, topic, receipt_handle)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None

    async def end_transaction(
        self, request: EndTransaction, caller: Caller, deadline_s: float
    ) -> None:
        """The caller needs PUB on the half message's real topic (checked by the service on
        the master; a forwarded end names the topic the door granted PUB on, and the master
        checks that it is the half message's)."""
        try:
            offset = decode_offset_message_id(request.transaction_id)[2]
        except (MessageFormatError, ValueError):
            raise Refusal(
                status(
                    Code.INVALID_TRANSACTION_ID,
                    f"transaction_id {request.transaction_id!r} is not one this broker gave",
                )
            ) from None
        remote = self._master_elsewhere()
        if remote is None:
            end = EndTransactionRequest(
                commit_log_offset=offset,
                resolution=_RESOLUTIONS[request.resolution],
                msg_id=request.message_id or None,
                from_check=request.from_check,
                topic=request.topic or None,
            )
            try:
                await self._services.transactions.end(end, self._access(caller))
            except NotMasterError as exc:
                if self._remote is None:
                    raise Refusal(error_status(exc)) from None
                remote = self._remote  # stepped down meanwhile
            except ServiceError as exc:
                raise Refusal(error_status(exc)) from None
            else:
                return
        await remote.end_at(self._state.config.broker_name, offset, request, deadline_s)

    def _access(self, caller: Caller) -> Access:
        """The caller, for the checks the service makes once it has read a record."""
        if self._acl is None:
            return OPEN_ACCESS
        return GrpcAccess(
            self._acl, caller.address, caller.metadata, caller.request,
            self._state.clock.wall_time_s,
        )  # fmt: skip

    async def recall(self, topic: str, recall_handle: str, deadline_s: float) -> str:
        """The handle's master decides: the client calls any endpoint it knows."""
        try:
            handle = RecallHandle.parse(recall_handle)
            if handle.broker_name == self._state.config.broker_name and self._state.is_master:
                return await self._services.timers.recall(topic, recall_handle)
        except ServiceError as exc:
            raise Refusal(error_status(exc)) from None
        if self._remote is None:
            raise Refusal(
                status(
                    Code.HA_NOT_AVAILABLE,
                    f"recall not forwarded: this replica knows no NameServer to find the "
                    f"master of {handle.broker_name} by",
                )
            )
        return await self._remote.recall(topic, recall_handle, deadline_s)
