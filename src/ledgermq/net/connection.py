"""One framed connection, client or server side: the asyncio shell around ``wire.FrameDecoder``.

A ``Connection`` is the asyncio *protocol* object of one transport (TCP, or the in-memory pipe of
``MemoryNetwork``), so it works over anything that speaks the ``asyncio.Transport`` interface.
It does four things and nothing else:

- frames out: commands are encoded and queued; everything queued during one pass of the event
  loop leaves in a single ``transport.write`` (one system call for a whole burst of Raft pushes
  or responses, instead of one per frame), or a single ``writelines`` when it holds a large
  body, which is then not copied;
- frames in: bytes go through one ``FrameDecoder``; a broken stream closes the connection (a
  gRPC client that dialled this port gets a log line naming the gRPC port, ``wire/http2.py``),
  and a refused frame (too long, a header over the limits, a header that does not parse) is
  answered first, ``MESSAGE_ILLEGAL`` with the reason, so that its sender learns why;
- request ids: ``request`` gives each command a fresh ``opaque`` and completes its future when a
  response with that ``opaque`` arrives; timed-out answers that arrive late are dropped;
- everything else that arrives (requests, one-way commands, responses nobody waits for) goes to
  the ``Handler``, synchronously and in arrival order, at most ``COMMANDS_PER_PASS`` per pass
  of the event loop: a read can hold thousands of small requests (one 256 KiB read of 29-byte
  frames held a broker's loop, which also runs its replica's Raft, for 200 ms), so the rest
  wait in the decoder for the next pass, with reading paused meanwhile.

Dispatch by request code belongs to the handler (the ledger, broker and name server each have
their own table), not here.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, TypeAlias, cast

from ledgermq.errors import (
    ConnectionClosedError,
    FrameRefusedError,
    Http2PrefaceError,
    ProtocolError,
    RequestTimeoutError,
)
from ledgermq.net.os_errors import format_address, map_os_error
from ledgermq.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SEPARATE_BODY_BYTES,
    FrameDecoder,
    MQResponseCode,
    RemotingCommand,
    SerializeType,
    encode_frame_parts,
    with_opaque,
)

__all__ = ["Connection", "Handler"]

logger = logging.getLogger(__name__)

Handler: TypeAlias = Callable[["Connection", RemotingCommand], None]
"""Receives every command that is not the answer to a pending ``request``.

Called synchronously from ``data_received`` in arrival order, so it must not block; it may send
on the connection (the frames join the current write batch) or hand work to a task.
"""

_OPAQUE_MAX: Final = (1 << 31) - 1
"""``opaque`` is an int32 on the wire; ours stay positive and wrap back to 1."""
_ABANDONED_MEMORY: Final = 4096
"""How many timed-out or cancelled opaques we remember, to drop their late answers quietly."""
COMMANDS_PER_PASS: Final = 64
"""The most commands one pass of the event loop decodes and hands to the handler for one
connection (a few milliseconds of work at most); the rest wait for the next pass."""
_REFUSAL_LINGER_S: Final = 2.0
"""After answering a refused frame: how long the connection keeps reading (and dropping) what
the peer still sends before it closes. Closing with unread bytes makes the kernel reset the
connection, and a reset can reach the peer before it has read the answer."""


class Connection(asyncio.Protocol):
    """One framed connection (see the module docstring).

    Created by a network's protocol factory; usable once ``connection_made`` has run, which the
    networks guarantee before they hand the object out.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        address: str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        grpc_port: int | None = None,
        request_serialize_type: SerializeType = SerializeType.JSON,
    ) -> None:
        self._handler = handler
        #: The header type of the requests this side starts (responses take their request's).
        #: JSON by default, which every RocketMQ client reads; our client and the replicas'
        #: links ask for the binary header, cheaper to read and write (``wire/frame.py``).
        self._request_type = request_serialize_type
        #: Where this process serves gRPC, named to a gRPC client that dialled us (None: nowhere).
        self._grpc_port = grpc_port
        self._loop = asyncio.get_running_loop()
        self._decoder = FrameDecoder(max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        #: "host:port" of the other side; from the transport's peer name if not given.
        self.address = address or "unknown"
        self._address_given = address is not None

        # Outgoing frames of the current event-loop pass, written together by ``_flush``.
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None

        # Request ids: the next opaque to hand out, the futures of ``request`` calls waiting for
        # their answer, and (bounded, oldest first) the opaques whose caller gave up.
        self._next_opaque = 1
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._abandoned: OrderedDict[int, None] = OrderedDict()

        # Back-pressure: set by the transport's pause_writing / resume_writing.
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

        # Closing: ``_close_reason`` is set once, when the connection stops being usable;
        # ``_lost`` completes when the transport has really gone (``connection_lost``).
        self._close_reason: str | None = None
        self._close_callbacks: list[Callable[[Connection], None]] = []
        self._lost: asyncio.Future[None] = self._loop.create_future()
        #: After a refused frame was answered: the timer that closes the half-closed transport
        #: (``_answer_refusal``); until then the close callbacks wait for ``connection_lost``.
        self._linger: asyncio.TimerHandle | None = None

        # A read that held more than COMMANDS_PER_PASS commands: the pass that goes on with the
        # rest, and what arrived meanwhile (only from a transport that cannot pause reading).
        self._backlog: asyncio.Handle | None = None
        self._held: list[bytes] = []
        self._reading_paused = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Connection {self.address} {state} pending={len(self._pending)}>"

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        """True once the connection is closing or closed; nothing more can be sent."""
        return self._close_reason is not None

    def add_close_callback(self, callback: Callable[[Connection], None]) -> None:
        """Call ``callback(self)`` once when the connection closes (at once if it already has)."""
        if self.closed:
            self._loop.call_soon(self._run_close_callback, callback)
        else:
            self._close_callbacks.append(callback)

    def close(self) -> None:
        """Send what is queued, then close. Pending requests fail with ConnectionClosedError."""
        if self.closed:
            if self._linger is not None and self._transport is not None:
                self._linger.cancel()  # answered a refused frame: stop waiting for the peer
                self._linger = None
                self._transport.close()
            return
        self._flush()
        self._mark_closed(f"connection to {self.address} was closed locally")
        if self._transport is not None:
            self._transport.close()
        elif not self._lost.done():  # never connected: no connection_lost will come
            self._lost.set_result(None)

    async def wait_closed(self) -> None:
        """Return when the transport has gone (after ``close``, or when the peer went away)."""
        await asyncio.shield(self._lost)

    # ------------------------------------------------------------------ sending

    def send(self, command: RemotingCommand) -> None:
        """Queue ``command`` exactly as given (a response, or a request with its own opaque)."""
        self._queue(encode_frame_parts(command))

    def send_request_nowait(self, command: RemotingCommand) -> int:
        """Queue ``command`` with a fresh opaque and return it; its answer goes to the handler."""
        opaque = self._take_opaque()
        self._queue(
            encode_frame_parts(with_opaque(command, opaque, command.flag, self._request_type))
        )
        return opaque

    def send_oneway(self, command: RemotingCommand) -> int:
        """Queue ``command`` with a fresh opaque and the one-way flag; no answer is expected."""
        opaque = self._take_opaque()
        flag = command.flag | FLAG_ONEWAY
        self._queue(encode_frame_parts(with_opaque(command, opaque, flag, self._request_type)))
        return opaque

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``command`` with a fresh opaque and return the response carrying that opaque.

        Raises RequestTimeoutError after ``timeout_s`` seconds (the opaque is forgotten and a
        late answer dropped) and ConnectionClosedError if the connection closes first.

        The deadline is one timer that fails the future, not ``asyncio.timeout``: the context
        manager cost a request about 5 us, a tenth of a client's Python time per send.
        """
        opaque = self._take_opaque()
        frame = encode_frame_parts(with_opaque(command, opaque, command.flag, self._request_type))
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._queue(frame)
        self._pending[opaque] = future
        deadline = self._loop.call_later(
            timeout_s, _expire, future, self.address, command.code, opaque, timeout_s
        )
        try:
            return await future
        finally:
            deadline.cancel()
            if self._pending.pop(opaque, None) is not None:
                self._abandon(opaque)

    def write_buffer_size(self) -> int:
        """Bytes queued here or in the transport that the peer has not taken yet."""
        transport_bytes = 0
        if self._transport is not None and not self._transport.is_closing():
            transport_bytes = self._transport.get_write_buffer_size()
        return self._out_bytes + transport_bytes

    async def drain(self) -> None:
        """Write what is queued now, then wait while the transport's buffer is over its limit.

        Raises ConnectionClosedError if the connection is or becomes closed.
        """
        self._raise_if_closed()
        self._flush()
        if not self._paused:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._drain_waiters:
                self._drain_waiters.remove(waiter)

    def _take_opaque(self) -> int:
        opaque = self._next_opaque
        while opaque in self._pending:  # only after 2**31 requests with one still waiting
            opaque = opaque % _OPAQUE_MAX + 1
        self._next_opaque = opaque % _OPAQUE_MAX + 1
        return opaque

    def _abandon(self, opaque: int) -> None:
        self._abandoned[opaque] = None
        if len(self._abandoned) > _ABANDONED_MEMORY:
            self._abandoned.popitem(last=False)

    def _queue(self, frame: tuple[bytes, ...]) -> None:
        """Queue the pieces of one frame (``encode_frame_parts``) for the next ``_flush``."""
        self._raise_if_closed()
        self._out += frame
        self._out_bytes += sum(map(len, frame))
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush)

    def flush(self) -> None:
        """Write what is queued now rather than in the next loop pass, for a caller about to
        run something long (the broker before a dispatch pass); a no-op when nothing is."""
        if self._out:
            self._flush()

    def _flush(self) -> None:
        """Write every queued frame in one call.

        Small frames are joined into one buffer. Past ``SEPARATE_BODY_BYTES`` in all, the pieces
        go to ``writelines`` as they are: uvloop sends them with one ``writev`` and no copy,
        where a join would copy a large body into a fresh block (see ``encode_frame_parts``).
        """
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._out:
            return
        out, out_bytes = self._out, self._out_bytes
        self._out = []
        self._out_bytes = 0
        if self._transport is None or self._transport.is_closing():
            return
        if len(out) == 1:
            self._transport.write(out[0])
        elif out_bytes < SEPARATE_BODY_BYTES:
            self._transport.write(b"".join(out))
        else:
            self._transport.writelines(out)

    def _is_closed(self) -> bool:
        """``closed`` as a call: handlers run in between, and mypy must not narrow it."""
        return self._close_reason is not None

    def _backlog_pending(self) -> bool:
        """Whether another pass over the decoder's backlog is scheduled (a call, for mypy)."""
        return self._backlog is not None

    def _raise_if_closed(self) -> None:
        if self._close_reason is not None:
            raise ConnectionClosedError(self._close_reason, self.address)

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast("asyncio.Transport", transport)
        if not self._address_given:
            peer = transport.get_extra_info("peername")
            if isinstance(peer, tuple) and len(peer) >= 2:
                self.address = format_address(str(peer[0]), int(peer[1]))
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in {socket.AF_INET, socket.AF_INET6}:
            # Small request/response frames must not wait for Nagle's algorithm; batching is
            # done above, by the write coalescing.
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - the socket died between accept and here
                logger.debug("cannot set TCP_NODELAY on the connection to %s", self.address)

    def data_received(self, data: bytes) -> None:
        if self._is_closed():
            return
        if self._backlog is not None:  # the next pass goes on with the decoder's backlog first
            self._held.append(data)
            return
        self._receive(data)

    def _work_backlog(self) -> None:
        """The next pass over a read that held more than ``COMMANDS_PER_PASS`` commands."""
        self._backlog = None
        if self._is_closed():
            return
        held = b"".join(self._held)
        self._held.clear()
        self._receive(held)
        if self._reading_paused and not self._backlog_pending():
            self._reading_paused = False
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()

    def _receive(self, data: bytes) -> None:
        """Decode and hand out at most ``COMMANDS_PER_PASS`` commands; if there may be more,
        pause reading and go on in the next pass of the loop (after its timers and the other
        connections' reads)."""
        try:
            commands = self._decoder.feed(data, COMMANDS_PER_PASS)
        except Http2PrefaceError:
            self._refuse_grpc_client()
            return
        except ProtocolError as error:
            exc = error
            if data[:2] == b"\x16\x03":  # a TLS ClientHello's first bytes: say so, not "frame"
                exc = ProtocolError(
                    "a TLS client dialled this plain port: serve TLS here with "
                    "tls.server.mode=permissive or enforcing, or connect without TLS"
                )
            elif isinstance(error, FrameRefusedError):
                self._answer_refusal(error)
                return
            logger.warning("closing the connection to %s: %s", self.address, exc)
            self._mark_closed(f"connection to {self.address} closed after a protocol error: {exc}")
            if self._transport is not None:
                self._transport.abort()
            return
        if len(commands) >= COMMANDS_PER_PASS:
            self._backlog = self._loop.call_soon(self._work_backlog)
            if not self._reading_paused and self._transport is not None:
                try:
                    self._transport.pause_reading()
                    self._reading_paused = True
                except NotImplementedError:  # the in-memory pipe: data_received holds it
                    pass
        for command in commands:
            if self._is_closed():  # the handler closed us: the rest of the batch is not wanted
                return
            if command.is_response:
                future = self._pending.pop(command.opaque, None)
                if future is not None:
                    if not future.done():
                        future.set_result(command)
                    continue
                if command.opaque in self._abandoned:
                    del self._abandoned[command.opaque]
                    logger.debug(
                        "dropping a late answer from %s (code %d, opaque %d)",
                        self.address,
                        command.code,
                        command.opaque,
                    )
                    continue
            try:
                self._handler(self, command)
            except Exception:
                logger.exception(
                    "the handler failed on code %d (opaque %d) from %s; the connection stays open",
                    command.code,
                    command.opaque,
                    self.address,
                )

    def _answer_refusal(self, error: FrameRefusedError) -> None:
        """Answer a refused frame (``MESSAGE_ILLEGAL``, the reason, its opaque when known),
        then close: at once for TLS, else after half-closing and reading what the peer still
        sends for ``_REFUSAL_LINGER_S`` (``data_received`` drops it, the decoder being failed),
        so that the answer is not lost to a reset."""
        logger.warning("refusing a frame from %s and closing: %s", self.address, error)
        answer = RemotingCommand(
            code=MQResponseCode.MESSAGE_ILLEGAL,
            opaque=error.opaque,
            flag=FLAG_RESPONSE,
            remark=f"frame refused: {error}",
            serialize_type=error.serialize_type,
        )
        self._queue(encode_frame_parts(answer))
        self._flush()
        reason = f"connection to {self.address} closed after a refused frame: {error}"
        transport = self._transport
        if transport is not None and transport.can_write_eof():
            # closed for sending now; the close callbacks (a listener's bookkeeping) run when
            # the transport has gone, so that closing the listener still closes this one
            self._mark_closed(reason, run_callbacks=False)
            transport.write_eof()
            self._linger = self._loop.call_later(_REFUSAL_LINGER_S, transport.close)
            return
        self._mark_closed(reason)
        if transport is not None:
            transport.close()

    def _refuse_grpc_client(self) -> None:
        """One log line that says where gRPC is, then a plain close (why plain: wire/http2.py)."""
        if self._grpc_port is not None:
            where = f"gRPC is served on port {self._grpc_port}"
        else:
            where = (
                "this process serves no gRPC: RocketMQ 5 clients connect to a broker's or"
                " proxy's gRPC port (grpcServerPort, RocketMQ's default 8081)"
            )
        reason = f"a gRPC (HTTP/2) client dialled this RocketMQ remoting port; {where}"
        logger.warning("closing the connection to %s: %s", self.address, reason)
        self._mark_closed(f"connection to {self.address} closed: {reason}")
        if self._transport is not None:
            self._transport.close()

    def eof_received(self) -> bool | None:
        return None  # the peer is done: let the transport close and call connection_lost

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            reason = f"connection to {self.address} closed by the peer"
        elif isinstance(exc, OSError):
            reason = str(map_os_error(exc, self.address))
        else:
            reason = f"connection to {self.address} lost: {exc}"
        self._out.clear()
        self._out_bytes = 0
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._backlog is not None:
            self._backlog.cancel()
            self._backlog = None
        self._held.clear()
        self._mark_closed(reason)
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ closing

    def _mark_closed(self, reason: str, *, run_callbacks: bool = True) -> None:
        """Stop being usable: fail pending requests and drains, run the close callbacks (now,
        or with ``run_callbacks=False`` at a later call, when the transport has gone)."""
        if self._close_reason is not None:
            if run_callbacks:
                self._run_close_callbacks()
            return
        self._close_reason = reason
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(reason, self.address))
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionClosedError(reason, self.address))
        if run_callbacks:
            self._run_close_callbacks()

    def _run_close_callbacks(self) -> None:
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            self._run_close_callback(callback)

    def _run_close_callback(self, callback: Callable[[Connection], None]) -> None:
        try:
            callback(self)
        except Exception:
            logger.exception("a close callback of the connection to %s failed", self.address)


def _expire(
    future: asyncio.Future[RemotingCommand], address: str, code: int, opaque: int, timeout_s: float
) -> None:
    """``request``'s deadline: no answer came in time."""
    if not future.done():
        future.set_exception(
            RequestTimeoutError(
                f"no answer from {address} to request code {code} (opaque {opaque}) "
                f"within {timeout_s:g} s",
                address,
            )
        )
