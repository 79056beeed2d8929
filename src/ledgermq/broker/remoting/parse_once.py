"""Parse once, before the ACL: what a request needs is computed from the object its handler gets.

Sends (their header), the typed headers (``ledgermq.wire.headers``), heartbeats and locks (their
bodies) are parsed here, once, into a ``Parsed``: the ACL checks its ``needs`` and the door runs
its handler, bound to that same object, so that the ACL and the handler cannot read different
fields (issue 25: PUB was checked on a V2 send's ``b`` and the message stored in its ``topic``).
A request that does not parse needs a valid account (an admin one for an admin code) and is
answered with the parser's error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

from ledgermq.broker.remoting.consumers import parse_heartbeat, parse_lock_body
from ledgermq.broker.remoting.send import parse_send_request
from ledgermq.errors import RequestRejectedError
from ledgermq.security.acl import Needs, header_needs, heartbeat_needs, lock_needs, send_needs
from ledgermq.security.acl.resources import ADMIN_CODES
from ledgermq.wire import MQRequestCode
from ledgermq.wire.headers import HEADER_TYPES, parse_header

if TYPE_CHECKING:
    from ledgermq.broker.remoting.clients import ClientProcessor
    from ledgermq.broker.remoting.consumers import Heartbeat
    from ledgermq.broker.remoting.handlers import Handler, Serve
    from ledgermq.broker.service.send import SendRequest
    from ledgermq.net import Connection
    from ledgermq.wire import RemotingCommand

__all__ = ["PARSED_CODES", "SEND_CODES", "Parsed", "RequestParser"]

SEND_CODES: Final = frozenset(
    {MQRequestCode.SEND_MESSAGE, MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE}
)
"""Requests ``SendProcessor.start`` takes without a task when their topic is known."""
_LOCK_CODES: Final = frozenset({MQRequestCode.LOCK_BATCH_MQ, MQRequestCode.UNLOCK_BATCH_MQ})
PARSED_CODES: Final = (
    SEND_CODES | _LOCK_CODES | frozenset(HEADER_TYPES) | {MQRequestCode.HEART_BEAT}
)
"""Requests parsed once, before the ACL (``Parsed``): sends, typed headers
(``ledgermq.wire.headers``), heartbeats and locks (their bodies)."""
_NO_NEEDS: Final = Needs()
"""A request's needs when there is no ACL to ask (not computed: sends are the hot path)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Parsed:
    """A request parsed before the ACL: what it needs, computed from the parsed object, and its
    handler, bound to that same object."""

    needs: Needs
    handler: Handler | None = None
    """None for a send: the door's send path takes ``send``."""
    send: SendRequest | None = None


class RequestParser:
    """Makes the ``Parsed`` of a request of ``PARSED_CODES``."""

    def __init__(self, typed: dict[int, Serve], clients: ClientProcessor, *, acl: bool) -> None:
        """``typed``: the translators of the typed headers (``handlers.typed_table``);
        ``acl``: whether an ACL asks what requests need (else it is not computed)."""
        self.typed = typed
        self._clients = clients
        self._acl = acl

    def parse(self, command: RemotingCommand) -> Parsed:
        """Parse a send's header, a typed header, a heartbeat's or a lock's body once
        (``Parsed``): what the request needs is computed from the object its handler gets."""
        code = command.code
        try:
            if code in SEND_CODES:
                request = parse_send_request(command)
                needs = send_needs(request.topic) if self._acl else _NO_NEEDS
                return Parsed(needs, send=request)
            header = parse_header(code, command.ext_fields)
            if header is not None:
                return self._bind(code, header, header_needs(header) if self._acl else _NO_NEEDS)
            if code == MQRequestCode.HEART_BEAT:
                return self._heartbeat(parse_heartbeat(command.body))
            body = parse_lock_body(command.body)
        except RequestRejectedError as exc:
            error = exc

            async def refuse(conn: Connection, command: RemotingCommand) -> RemotingCommand:
                raise error

            # an admin request that does not parse is still refused to all but an admin: the
            # parser's error is no answer for anyone else to read
            return Parsed(Needs(admin=True) if code in ADMIN_CODES else Needs(), refuse)
        clients = self._clients
        serve = clients.lock if code == MQRequestCode.LOCK_BATCH_MQ else clients.unlock

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return serve(command, body)

        return Parsed(lock_needs(body[1], {queue.topic for queue in body[2]}), handle)

    def _bind(self, code: int, header: object, needs: Needs) -> Parsed:
        """A typed header's handler (``typed``), bound to the header the door parsed."""
        serve = self.typed[code]

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await serve(conn, command, header)

        return Parsed(needs, handle)

    def _heartbeat(self, beat: Heartbeat) -> Parsed:
        """HEART_BEAT: SUB on each consumer group and subscribed topic of the parsed body,
        which is what the client registry is then given."""
        clients = self._clients

        async def handle(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await clients.heartbeat(conn, command, beat)

        needs = heartbeat_needs((c.group, c.subscriptions.keys()) for c in beat.consumers)
        return Parsed(needs, handle)
