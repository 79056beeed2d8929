"""A replica's gRPC door, when its replica is not the master: the writes go to the group's master.

Routes name every replica's door for its group (``proxy.routes``), so a v5 client may send to a
follower: right after a failover the client's retry goes to another endpoint of the route, and
the official Node.js client (1.0.8) keeps the endpoints of its first route for good. Such a
door serves the send as the master's door would: the request is read, checked (the ACL, at the
door the call arrives at) and placed exactly as there (``servicer``), and only storing it goes
to the master, over remoting, through the stand-alone proxy's ``Forwarder`` (``proxy.forward``:
the master found in the NameServers' route, retried with a back-off across an election until
the client's deadline). The client reads the same answer it would have from the master's door:
the queue offset, the offset message id as the transaction id, the recall handle.

The forwarded request is signed with the broker's own account (``aclAccessKey``), as the door's
route lookups are: the client's ``authorization`` (an HMAC of a date, over the gRPC metadata)
cannot be replayed as a remoting signature, so the door that received the call is the one that
authorizes it (PUB on each message's topic), and the master trusts the broker's account. What
the master checks beyond the ACL still holds for a forwarded request: a send never creates its
topic (no default topic is named), and an EndTransaction (forwarded by ``proxy.local_backend``
through ``proxy.remote_backend``) names the topic the door granted, which the master compares
with the half message's real one.

Send is at-least-once across the failover, as through the stand-alone proxy: a send whose
outcome is unknown (the master died with it in flight) is sent again to the new master.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.errors import NotMasterError
from ledgermq.broker.service.send import SendResult
from ledgermq.errors import LedgerMQError, TopicNotFoundError
from ledgermq.proxy.messages import Refusal
from ledgermq.proxy.remote_status import remote_status
from ledgermq.proxy.status import Code, status
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.service.send import SendRequest
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.broker.state.broker_state import BrokerState
    from ledgermq.proxy.forward import Forwarder

__all__ = ["MasterLink"]

_log = logging.getLogger(__name__)

_SEND_ANSWERS: Final = (
    MQResponseCode.SUCCESS,
    MQResponseCode.FLUSH_DISK_TIMEOUT,
    MQResponseCode.FLUSH_SLAVE_TIMEOUT,
    MQResponseCode.SLAVE_NOT_AVAILABLE,
)
"""A stored send's answers (the last three: stored, a durability wait not met), as the
stand-alone proxy takes them."""


class MasterLink:
    """``send``: the service here when this replica is the master, else forwarded to
    the group's master (module docstring). ``forwarder`` None: nothing is forwarded (a broker
    with no NameServer), and a follower answers as its services do."""

    def __init__(
        self, state: BrokerState, services: BrokerServices, forwarder: Forwarder | None
    ) -> None:
        self._state = state
        self._services = services
        self._forwarder = forwarder
        self._counter = itertools.count()

    def _forwards(self) -> bool:
        return self._forwarder is not None and not self._state.is_master

    async def send(
        self, request: SendRequest, body: bytes, peer: str, deadline_s: float, write_queues: int
    ) -> SendResult:
        """Store ``request``; ``write_queues``: the topic's write queue count here (0: not
        known here), for a message the door left to any queue. ``Refusal`` with the status
        of a forwarded send that failed."""
        if not self._forwards():
            try:
                return await self._services.send.send(request, body, peer)
            except NotMasterError:
                if self._forwarder is None:
                    raise  # nothing to forward with: the client goes elsewhere
        return await self._forward_send(request, body, deadline_s, write_queues)

    async def _forward_send(
        self, request: SendRequest, body: bytes, deadline_s: float, write_queues: int
    ) -> SendResult:
        assert self._forwarder is not None
        queue_id = request.queue_id
        if queue_id < 0 and write_queues > 0:
            queue_id = next(self._counter) % write_queues  # what the master's service would pick
        fields = {
            "a": request.producer_group, "b": request.topic,
            "d": str(request.default_topic_queue_nums), "e": str(queue_id),
            "f": str(request.sys_flag), "g": str(request.born_timestamp), "h": str(request.flag),
            "i": request.properties, "j": str(request.reconsume_times), "k": "false",
            "m": "true" if request.batch else "false", "n": self._state.config.broker_name,
        }  # fmt: skip
        if request.max_reconsume_times is not None:
            fields["l"] = str(request.max_reconsume_times)
        try:
            forwarded = await self._forwarder.call(
                request.topic, self._state.config.broker_name, MQRequestCode.SEND_MESSAGE_V2,
                fields, body, deadline_s=deadline_s, expect=_SEND_ANSWERS,
            )  # fmt: skip
        except TopicNotFoundError:
            raise Refusal(
                status(Code.TOPIC_NOT_FOUND, f"topic {request.topic} does not exist")
            ) from None
        except LedgerMQError as exc:
            raise Refusal(remote_status(exc)) from None
        if forwarded.unknown_before:
            _log.warning("a send to %s was sent again after a failover; it may be stored twice",
                         request.topic)  # fmt: skip
        ext = forwarded.response.ext_fields
        return SendResult(
            msg_ids=[m for m in ext.get("msgId", "").split(",") if m],
            queue_id=int(ext.get("queueId", queue_id) or queue_id),
            queue_offset=int(ext.get("queueOffset", "0") or 0),
            unique_key=ext.get("transactionId"),
            recall_handle=ext.get("recallHandle") or None,
        )
