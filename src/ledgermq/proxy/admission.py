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
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Final

import grpc
import grpc.aio

from ledgermq.acl import Needs
from ledgermq.proxy.protocol import service_pb2
from ledgermq.proxy.status import Code, status

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from google.protobuf.message import Message

    from ledgermq.proxy.protocol import definition_pb2
    from ledgermq.security import AclGate

    Context = grpc.aio.ServicerContext[Any, Any]
    Handler = grpc.RpcMethodHandler[Any, Any]

__all__ = ["Admission"]

_SERVICE: Final = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
_ANSWERS: Final[dict[str, type[Message]]] = {
    method.name: getattr(service_pb2, method.output_type.name) for method in _SERVICE.methods
}
"""Each method's response type: a refusal is one of them with its ``status`` set."""
_PREFIX: Final = f"/{_SERVICE.full_name}/"


class Admission(grpc.aio.ServerInterceptor):
    """Refuses unauthenticated calls before their request is read (module docstring).

    Args:
        acl: the door's ACL (None: ``aclEnable`` off, and every call goes through as it is).
        now_s: the wall clock, seconds (a signature's date must be near it).
    """

    def __init__(self, acl: AclGate | None, now_s: Callable[[], float]) -> None:
        self._acl = acl
        self._now_s = now_s
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
        if handler is None or self._acl is None or not method.startswith(_PREFIX):
            return handler
        name = method[len(_PREFIX) :]
        answer = _ANSWERS.get(name)
        return handler if answer is None else self._guarded(handler, name, answer)

    def _refusal(self, context: Context, method: str) -> definition_pb2.Status | None:
        """None if the caller is authenticated (or needs not be: a white address), else the
        status to answer with."""
        assert self._acl is not None
        metadata = {
            k.lower(): v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)
        }
        peer = context.peer() or ""
        address = self.real_peer(peer.partition(":")[2] or peer)
        decision = self._acl.check_grpc(address, metadata, method, Needs(), self._now_s())
        if decision.allowed:
            return None
        code = Code.FORBIDDEN if decision.authenticated else Code.UNAUTHORIZED
        return status(code, decision.remark)

    def _guarded(self, handler: Handler, method: str, answer: type[Message]) -> Handler:
        """``handler`` behind the check, as a request-streaming handler (grpcio reads a
        request-streaming call's messages only when its handler asks for them)."""
        deserializer, serializer = handler.request_deserializer, handler.response_serializer
        refusal = self._refusal
        if handler.unary_unary is not None:
            unary_unary: Any = handler.unary_unary

            async def unary_response(requests: object, context: Context) -> Message:
                if (refused := refusal(context, method)) is not None:
                    return answer(status=refused)
                response: Message = await unary_unary(await _the_request(context), context)
                return response

            return grpc.stream_unary_rpc_method_handler(unary_response, deserializer, serializer)
        if handler.stream_unary is not None:
            stream_unary: Any = handler.stream_unary

            async def stream_unary_response(requests: object, context: Context) -> Message:
                if (refused := refusal(context, method)) is not None:
                    return answer(status=refused)
                response: Message = await stream_unary(requests, context)
                return response

            return grpc.stream_unary_rpc_method_handler(
                stream_unary_response, deserializer, serializer
            )
        if handler.unary_stream is not None:
            unary_stream: Any = handler.unary_stream

            async def stream_responses(requests: object, context: Context) -> AsyncIterator[Any]:
                if (refused := refusal(context, method)) is not None:
                    yield answer(status=refused)
                    return
                async for response in _responses(
                    unary_stream(await _the_request(context), context)
                ):
                    yield response

            return grpc.stream_stream_rpc_method_handler(stream_responses, deserializer, serializer)
        stream_stream: Any = handler.stream_stream

        async def stream_stream_responses(requests: object, context: Context) -> AsyncIterator[Any]:
            if (refused := refusal(context, method)) is not None:
                yield answer(status=refused)
                return
            async for response in _responses(stream_stream(requests, context)):
                yield response

        return grpc.stream_stream_rpc_method_handler(
            stream_stream_responses, deserializer, serializer
        )


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
