"""Authentication of a gRPC call from its metadata, before its request is read (both doors).

grpcio reads and parses a unary call's request before its handler runs: with the ACL checked
only in the servicer (``_admit``), anyone could make a door read and parse requests of up to
``grpc.max_receive_message_length`` (130 MiB, ``proxy.server_options``) without signing them
(issue 25: eight unsigned clients took a master from 334 MB to 987 MB). ``Admission`` is a
``grpc.aio`` server interceptor that, with ``aclEnable``, hands grpcio a request-streaming
handler for every method instead: grpcio then reads nothing before that handler runs, and it
first checks the ``authorization`` metadata (``AclGate.check_grpc`` with no permission needed:
who the caller is, not what it may do). A caller that is not signed, or not signed by an
account, is answered UNAUTHORIZED in the method's own response status (as the servicers answer
every refusal, the gRPC status OK) without its request being read or parsed, and its handler
never runs; once the answer is sent the call is over, and whatever of its request had arrived
(no more than HTTP/2 flow control let through, as nothing was reading it) is dropped. A signed
caller's request is then read and given to the servicer, which checks the permissions that
depend on it (FORBIDDEN) as before.

The wire is the same either way: a unary request is one message on a stream, whichever kind of
handler reads it.

With or without the ACL, every call's request is then read through the door's bounds
(``proxy.request_budget``): a unary request is read only once the door's ``ByteBudget`` has room
for the largest request it accepts, and keeps what it holds until it is answered, so the request
bytes a door holds at once are bounded whoever sends them; and a request holding more protobuf
fields than ``MAX_REQUEST_FIELDS`` is answered BAD_REQUEST before it is parsed (parsing costs per
field, on the loop that runs the replica's Raft).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio

from ledgermq.proxy.protocol import service_pb2
from ledgermq.proxy.request_budget import (
    DEFAULT_INFLIGHT_REQUEST_BYTES,
    READ_TIMEOUT_S,
    RequestBytes,
    RequestTooComplexError,
    check_field_budget,
)
from ledgermq.proxy.status import Code, status
from ledgermq.security.acl import Needs

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from google.protobuf.descriptor import Descriptor
    from google.protobuf.message import Message

    from ledgermq.proxy.protocol import definition_pb2
    from ledgermq.security.gate import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]
    Handler = grpc.RpcMethodHandler[Any, Any]

__all__ = ["Admission"]

_SERVICE: Final = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
_ANSWERS: Final[dict[str, type[Message]]] = {
    method.name: getattr(service_pb2, method.output_type.name) for method in _SERVICE.methods
}
"""Each method's response type: a refusal is one of them with its ``status`` set."""
_REQUESTS: Final[dict[str, Descriptor]] = {
    method.name: method.input_type for method in _SERVICE.methods
}
"""Each method's request type, whose fields ``check_field_budget`` counts."""
_PREFIX: Final = f"/{_SERVICE.full_name}/"


class Admission(grpc.aio.ServerInterceptor):
    """Refuses unauthenticated calls before their request is read (module docstring).

    Args:
        acl: the door's ACL (None: ``aclEnable`` off, and every call is authenticated by
            nobody, but still read within the bounds below).
        now_s: the wall clock, seconds (a signature's date must be near it).
        max_request_bytes: the largest request the door accepts (its
            ``grpc.max_receive_message_length``): what a call reserves before it is read.
        inflight_request_bytes: the request bytes the door holds at once (``RequestBytes``).
    """

    def __init__(
        self,
        acl: AclGate | None,
        now_s: Callable[[], float],
        *,
        max_request_bytes: int,
        inflight_request_bytes: int = DEFAULT_INFLIGHT_REQUEST_BYTES,
    ) -> None:
        self._acl = acl
        self._now_s = now_s
        self._max_request_bytes = max_request_bytes
        self.budget = RequestBytes(inflight_request_bytes, max_request_bytes)
        """Request bytes held by the door's calls (``proxy.request_budget``)."""
        self.real_peer: Callable[[str], str] = lambda address: address
        """The client behind a peer address grpcio reports (``proxy.unify``, when the door
        fronts grpcio itself); set by the door once it is bound."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(_PREFIX):
            return handler
        name = method[len(_PREFIX) :]
        answer = _ANSWERS.get(name)
        return handler if answer is None else self._guarded(handler, name, answer)

    def _refusal(self, context: Context, method: str) -> definition_pb2.Status | None:
        """None if the caller is authenticated (or needs not be: the ACL is off, or a white
        address), else the status to answer with."""
        if self._acl is None:
            return None
        metadata = {
            k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)
        }
        address = self._address(context)
        decision = self._acl.check_grpc(address, metadata, method, Needs(), self._now_s())
        if decision.allowed:
            return None
        code = Code.FORBIDDEN if decision.authenticated else Code.UNAUTHORIZED
        return status(code, decision.remark)

    def _address(self, context: Context) -> str:
        """The caller's address (``host:port``), as the ACL sees it."""
        peer = context.peer() or ""
        return self.real_peer(peer.partition(":")[2] or peer)

    @contextlib.asynccontextmanager
    async def _one_request(
        self, context: Context, parse: Callable[[bytes], Any]
    ) -> AsyncIterator[Any]:
        """The call's one request, read within the door's ``RequestBytes`` (its source's
        share and the whole); the bytes it holds are given back when the block (the call) ends.
        A request that does not arrive within ``READ_TIMEOUT_S`` ends the call
        DEADLINE_EXCEEDED.

        Raises:
            RequestTooComplexError: the request is over ``MAX_REQUEST_FIELDS`` (not parsed).
        """
        source = self._address(context).rpartition(":")[0]
        async with self.budget.reserved(source, self._max_request_bytes) as reservation:
            try:
                raw = await asyncio.wait_for(_the_request(context), READ_TIMEOUT_S)
            except TimeoutError:
                await context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"the request did not arrive within {READ_TIMEOUT_S:.0f} s",
                )
                raise
            reservation.shrink(len(raw))
            request = parse(raw)
            del raw  # the parsed request is what the call holds from here on
            yield request

    def _guarded(self, handler: Handler, method: str, answer: type[Message]) -> Handler:
        """``handler`` behind the checks, as a request-streaming handler that reads raw bytes
        (grpcio reads a request-streaming call's messages only when its handler asks for
        them, and hands them over unparsed without a deserializer)."""
        deserializer, serializer = handler.request_deserializer, handler.response_serializer
        assert deserializer is not None
        refusal, one_request = self._refusal, self._one_request
        descriptor = _REQUESTS[method]

        def parse(raw: bytes) -> Any:
            check_field_budget(raw, descriptor)
            return deserializer(raw)

        def too_complex(exc: RequestTooComplexError) -> Message:
            return answer(status=status(Code.BAD_REQUEST, str(exc)))

        async def parsed(requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[Any]:
            async for raw in requests:
                try:
                    yield parse(raw)
                except RequestTooComplexError as exc:
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

        if handler.unary_unary is not None:
            unary_unary: Any = handler.unary_unary

            async def unary_response(requests: object, context: Context) -> Message:
                if (refused := refusal(context, method)) is not None:
                    return answer(status=refused)
                try:
                    async with one_request(context, parse) as request:
                        response: Message = await unary_unary(request, context)
                        return response
                except RequestTooComplexError as exc:
                    return too_complex(exc)

            return grpc.stream_unary_rpc_method_handler(unary_response, None, serializer)
        if handler.stream_unary is not None:
            stream_unary: Any = handler.stream_unary

            async def stream_unary_response(
                requests: AsyncIterator[bytes], context: Context
            ) -> Message:
                if (refused := refusal(context, method)) is not None:
                    return answer(status=refused)
                response: Message = await stream_unary(parsed(requests, context), context)
                return response

            return grpc.stream_unary_rpc_method_handler(stream_unary_response, None, serializer)
        if handler.unary_stream is not None:
            unary_stream: Any = handler.unary_stream

            async def stream_responses(requests: object, context: Context) -> AsyncIterator[Any]:
                if (refused := refusal(context, method)) is not None:
                    yield answer(status=refused)
                    return
                try:
                    async with one_request(context, parse) as request:
                        async for response in _responses(unary_stream(request, context)):
                            yield response
                except RequestTooComplexError as exc:
                    yield too_complex(exc)

            return grpc.stream_stream_rpc_method_handler(stream_responses, None, serializer)
        stream_stream: Any = handler.stream_stream

        async def stream_stream_responses(
            requests: AsyncIterator[bytes], context: Context
        ) -> AsyncIterator[Any]:
            if (refused := refusal(context, method)) is not None:
                yield answer(status=refused)
                return
            async for response in _responses(stream_stream(parsed(requests, context), context)):
                yield response

        return grpc.stream_stream_rpc_method_handler(stream_stream_responses, None, serializer)


async def _the_request(context: Context) -> Any:
    """The one request of a unary-request call; a call that carries none (a broken client)
    is aborted INVALID_ARGUMENT."""
    request = await context.read()
    if request is grpc.aio.EOF:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the call carried no request")
    return request


async def _responses(result: Any) -> AsyncIterator[Any]:
    """The responses of a server-streaming handler: an async generator's items, or nothing
    for one that writes them itself (``context.write``) and returns a coroutine."""
    if inspect.isawaitable(result):
        await result
        return
    async for response in result:
        yield response
