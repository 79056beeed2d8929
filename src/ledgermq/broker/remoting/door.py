"""The remoting door: RocketMQ's remoting port of one replica, from a frame to its answer.

Every request gets an answer unless it is one-way: a refusal answers with its RocketMQ code and
a remark that says why, a malformed request with SYSTEM_ERROR, an unknown code with
REQUEST_CODE_NOT_SUPPORTED, and an unexpected failure with SYSTEM_ERROR after it is logged.

The way of a request (``on_frame``): its body bounded by its code (``bounds``, from the length
alone), parsed once if its code is one of ``PARSED_CODES``
(``parse_once``), admitted by the ACL (``aclEnable``) on what that parse says it needs, then
either the send fast path (``_start_send``: no task, the answer goes out from the commit's
completion and is written by ``AnswerWriter`` before the dispatcher's pass) or a task that runs
the translator of its code (``handlers``) and answers. After the replica's fail-stop only
outcomes a majority committed still go out; everything else is refused SERVICE_NOT_AVAILABLE.

Why a module of its own: the door was half of ``BrokerServer``, the replica. It knows the
replica only as a ``House`` (its config, its failure, live config updates) and its services.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from ledgermq.broker.errors import ServiceError
from ledgermq.broker.remoting.access import GateAccess
from ledgermq.broker.remoting.answers import AnswerWriter
from ledgermq.broker.remoting.bounds import MAX_REQUEST_BODY_BYTES, body_refusal
from ledgermq.broker.remoting.errors import response_code
from ledgermq.broker.remoting.handlers import Processors, handler_table, typed_table
from ledgermq.broker.remoting.parse_once import PARSED_CODES, SEND_CODES, RequestParser
from ledgermq.broker.remoting.send import send_response
from ledgermq.broker.remoting.transactions import RemotingCheckBack
from ledgermq.broker.service.access import OPEN_ACCESS
from ledgermq.errors import LedgerMQError, NetworkError, RequestRejectedError
from ledgermq.wire import MQRequestCode, MQResponseCode

if TYPE_CHECKING:
    from ledgermq.broker.metrics import BrokerMetrics
    from ledgermq.broker.remoting.access import SignedIn
    from ledgermq.broker.remoting.consumers import Registry
    from ledgermq.broker.remoting.handlers import Handler
    from ledgermq.broker.remoting.house import House
    from ledgermq.broker.remoting.parse_once import Parsed
    from ledgermq.broker.service.access import Access
    from ledgermq.broker.service.client_registry import QueueLockManager
    from ledgermq.broker.service.send import SendRequest, SendResult
    from ledgermq.broker.service.services import BrokerServices
    from ledgermq.net import Connection, Listener, Network
    from ledgermq.security.gate import AclGate
    from ledgermq.wire import RemotingCommand

__all__ = ["RemotingDoor"]

_log = logging.getLogger(__name__)

_OUTCOMES_KEPT: Final = frozenset(
    {
        MQRequestCode.SEND_MESSAGE,
        MQRequestCode.SEND_MESSAGE_V2,
        MQRequestCode.SEND_BATCH_MESSAGE,
        MQRequestCode.CONSUMER_SEND_MSG_BACK,
        MQRequestCode.UPDATE_CONSUMER_OFFSET,
    }
)
"""Requests whose SUCCESS is still sent after a store failure: it reports a change a majority
committed, which stays true (refusing it would only make the client send it again)."""

_REQUEST_KINDS: Final[dict[int, str]] = {
    **dict.fromkeys(SEND_CODES, "send"),
    MQRequestCode.PULL_MESSAGE: "pull",
    MQRequestCode.CONSUMER_SEND_MSG_BACK: "send_back",
}
"""Requests whose latency is kept per topic (``ledgermq_broker_request_latency_seconds``)."""


class RemotingDoor:
    """``await open(...)``, serve until ``close_listener()`` and ``wait_closed()``."""

    _handlers: dict[int, Handler]
    """Request code -> translator of the requests served as they came, set by ``open``."""
    _parser: RequestParser
    """Parses requests of ``PARSED_CODES`` once (``parse_once``), set by ``open``."""
    _processors: Processors

    def __init__(
        self,
        house: House,
        *,
        network: Network,
        metrics: BrokerMetrics,
        consumers: Registry,
        locks: QueueLockManager,
        acl: AclGate | None,
        signed_in: SignedIn | None,
    ) -> None:
        """``acl``: the ACL gate every request passes first (``aclEnable``), None when off;
        ``signed_in``: who each connection's admitted heartbeat was signed by (check-backs'
        addressees)."""
        self._house = house
        self._failed = house.failed
        self._network = network
        self.metrics = metrics
        self.consumers = consumers
        self.locks = locks
        self.acl = acl
        self.signed_in = signed_in
        self._answers = AnswerWriter()
        self._listener: Listener | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        """Requests being served (``close`` lets them finish for a moment, then cancels)."""

    # ================================================================== life cycle
    @property
    def answers(self) -> AnswerWriter:
        """Its answers' writer: a ``CommitListener`` of the replica (``broker.events``), which
        the composition root subscribes before the replica opens."""
        return self._answers

    async def open(self, services: BrokerServices, *, grpc_port: int | None) -> int:
        """Make the translators over ``services``, offer producers' check-backs, and listen;
        returns the port. ``grpc_port``: where a gRPC client that knocks on this port is
        sent."""
        consumers = self.consumers
        processors = Processors.over(services, self.locks)
        self._processors = processors
        self._handlers = handler_table(processors, consumers, self._house, self._access)
        self._parser = RequestParser(
            typed_table(processors, consumers, self._access),
            processors.clients,
            acl=self.acl is not None,
        )
        config = self._house.config
        # The master's check-backs of open half messages reach producers connected here too
        # (after the gRPC door's channel, which opened first).
        services.transactions.channels.append(
            RemotingCheckBack(consumers, config.broker_name, self.signed_in)
        )
        self._listener = await self._network.serve(
            config.broker_ip1, config.listen_port, self.on_frame, grpc_port=grpc_port
        )
        return self._listener.port

    @property
    def port(self) -> int:
        assert self._listener is not None, "open() first"
        return self._listener.port

    @property
    def handled_codes(self) -> frozenset[int]:
        """Codes served from the request as it came (the typed ones: ``typed_codes``)."""
        return frozenset(self._handlers)

    @property
    def typed_codes(self) -> frozenset[int]:
        """Codes served from the typed header the door parsed."""
        return frozenset(self._parser.typed)

    def connection_count(self) -> int:
        return self._listener.connection_count if self._listener is not None else 0

    def close_listener(self) -> None:
        if self._listener is not None:
            self._listener.close()

    def cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    async def wait_closed(self) -> None:
        if self._listener is not None:
            await self._listener.wait_closed()

    # ================================================================== requests
    def on_frame(self, conn: Connection, command: RemotingCommand) -> None:
        if command.is_response:
            return  # answers to our one-way notifications: nothing waits for them
        if len(command.body) > MAX_REQUEST_BODY_BYTES and self._oversized(conn, command):
            return
        parsed = self._parser.parse(command) if command.code in PARSED_CODES else None
        if self.acl is not None and not self._admitted(conn, command, parsed):
            return
        started = time.perf_counter()
        if parsed is not None:
            send = parsed.send
            if send is not None:
                if self._start_send(conn, command, send, started):
                    return
                handler: Handler | None = self._send_handler(send)
            else:
                handler = parsed.handler
        else:
            handler = self._handlers.get(command.code)
        if handler is None:
            if not command.is_oneway:
                conn.send(
                    command.response(
                        MQResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        remark=f"request type {command.code} not supported",
                    )
                )
            return
        task = asyncio.get_running_loop().create_task(self._serve(handler, conn, command, started))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _oversized(self, conn: Connection, command: RemotingCommand) -> bool:
        """Whether ``command``'s body is over its code's bound (``remoting.bounds``); if so it
        was answered, before the ACL signs or any parser reads the body."""
        max_message_size = self._house.config.max_message_size
        refusal = body_refusal(command.code, len(command.body), max_message_size)
        if refusal is None:
            return False
        if not command.is_oneway and not conn.closed:
            with contextlib.suppress(NetworkError):
                conn.send(command.response(response_code(refusal), remark=str(refusal)))
        return True

    def _send_handler(self, request: SendRequest) -> Handler:
        """The task path of ``request`` (a send ``_start_send`` did not take)."""
        send = self._processors.send

        async def do_send(conn: Connection, command: RemotingCommand) -> RemotingCommand:
            return await send.process(request, command, conn.address)

        return do_send

    def _access(self, conn: Connection, command: RemotingCommand) -> Access:
        """``command``'s requester, for the checks a service makes once it has read a record."""
        acl = self.acl
        return OPEN_ACCESS if acl is None else GateAccess(acl, conn.address, command)

    def _admitted(self, conn: Connection, command: RemotingCommand, parsed: Parsed | None) -> bool:
        """Whether the ACL lets ``command`` through; if not, it was answered NO_PERMISSION."""
        acl = self.acl
        assert acl is not None
        needs = None if parsed is None else parsed.needs
        refusal = acl.check(conn.address, command, needs)
        if refusal is None:
            if command.code == MQRequestCode.HEART_BEAT and self.signed_in is not None:
                self.signed_in.heartbeat_admitted(conn, command)
            return True
        if not command.is_oneway and not conn.closed:
            with contextlib.suppress(NetworkError):
                conn.send(refusal)
        return False

    def _start_send(
        self, conn: Connection, command: RemotingCommand, request: SendRequest, started: float
    ) -> bool:
        """A send to a known topic, without a task: its answer goes out from the commit's
        completion (``SendProcessor.start``) and is written by ``AnswerWriter``. False when it
        needs the task path (a topic to create, a retry topic) or the broker has failed;
        nothing has been done then."""
        if self._failed() is not None:
            return False
        answers = self._answers

        def answer(outcome: SendResult | ServiceError) -> None:
            if isinstance(outcome, ServiceError):
                response = command.response(response_code(outcome), remark=str(outcome))
            else:
                response = send_response(command, outcome)
            self._answer(conn, command, response, started)
            answers.answered.add(conn)
            answers.awaiting -= 1

        try:
            taken = self._processors.send.start(request, command, conn.address, answer)
        except Exception as exc:  # noqa: BLE001 - mapped exactly as _serve maps it
            self._answer(conn, command, self._error_response(conn, command, exc), started)
            return True
        if taken:
            answers.awaiting += 1
        return taken

    async def _serve(
        self, handler: Handler, conn: Connection, command: RemotingCommand, started: float
    ) -> None:
        failure = self._failed()
        if failure is not None:
            if not command.is_oneway and not conn.closed:
                with contextlib.suppress(NetworkError):
                    conn.send(self._refusal(command, failure))
            return
        try:
            response = await handler(conn, command)
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - the client is answered
            response = self._error_response(conn, command, exc)
        self._answer(conn, command, response, started)

    def _error_response(
        self, conn: Connection, command: RemotingCommand, exc: BaseException
    ) -> RemotingCommand:
        """What the client is told when handling its request raised ``exc``."""
        if isinstance(exc, ServiceError):
            return command.response(response_code(exc), remark=str(exc))
        if isinstance(exc, RequestRejectedError):
            return command.response(exc.code, remark=str(exc))
        if isinstance(exc, LedgerMQError):
            return command.response(MQResponseCode.SYSTEM_ERROR, remark=str(exc))
        if isinstance(exc, asyncio.CancelledError):
            return command.response(
                MQResponseCode.SYSTEM_ERROR, remark="the broker is shutting down"
            )
        _log.error(
            "request %d from %s failed", command.code, conn.address,
            exc_info=(type(exc), exc, exc.__traceback__),
        )  # fmt: skip
        return command.response(
            MQResponseCode.SYSTEM_ERROR, remark=f"internal error: {type(exc).__name__}: {exc}"
        )

    def _answer(
        self,
        conn: Connection,
        command: RemotingCommand,
        response: RemotingCommand | None,
        started: float | None = None,
    ) -> None:
        """Send ``response`` unless the request was one-way or the client has gone; after a
        store failure, only outcomes a majority committed (``_OUTCOMES_KEPT``) still go out.
        With ``started`` (its arrival), the request is counted in the metrics."""
        if started is not None:
            code = command.code
            kind = _REQUEST_KINDS.get(code, "")
            topic = ""
            if kind:
                fields = command.ext_fields
                topic = fields.get("b") or fields.get("topic") or ""
            answered = -1 if response is None else response.code
            self.metrics.record(code, answered, kind, topic, time.perf_counter() - started)
        if response is None or command.is_oneway or conn.closed:
            return
        failure = self._failed()
        if failure is not None and not (
            command.code in _OUTCOMES_KEPT and response.code == MQResponseCode.SUCCESS
        ):
            # Read from queues that stopped following the log (a held pull woken by the
            # shutdown would say "nothing new"): never an answer, only the refusal.
            response = self._refusal(command, failure)
        with contextlib.suppress(NetworkError):
            conn.send(response)

    def _refusal(self, command: RemotingCommand, failure: BaseException) -> RemotingCommand:
        config = self._house.config
        return command.response(
            MQResponseCode.SERVICE_NOT_AVAILABLE,
            remark=f"broker {config.broker_name} replica {config.dleger_self_id} is "
            f"stopping: its store failed ({failure})",
        )
