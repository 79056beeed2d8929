"""Child process of ``test_protocol_stubs.py``: the official client's stubs and ours in one process.

Run as ``python coexist_child.py MODE``; prints one JSON object. A child because the official
modules register ``apache.rocketmq.v2.*`` in protobuf's process-wide default pool, which no test
in the pytest process should inherit. Modes:

- ``ours-first`` / ``theirs-first``: import both in that order, then check that bytes made by one
  side parse on the other and that a real gRPC call between them works (our servicer, their stub).
- ``default-pool``: import theirs, then register our ``definition.proto`` in the default pool, as
  protoc's unmodified output would: this must fail with protobuf's duplicate-symbol error. It
  shows the trap the private pool avoids is real in this protobuf, so the other modes prove
  something.
"""

from __future__ import annotations

import json
import sys
from concurrent import futures
from importlib import import_module
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "rocketmq_python_client_5_1_2"


def _import_theirs() -> dict[str, Any]:
    sys.path.insert(0, str(DATA))
    return {
        name: import_module(f"rocketmq.grpc_protocol.{name}")
        for name in ("definition_pb2", "service_pb2", "service_pb2_grpc")
    }


def _import_ours() -> dict[str, Any]:
    return {
        name: import_module(f"ledgermq.proxy.protocol.{name}")
        for name in ("definition_pb2", "service_pb2", "service_pb2_grpc")
    }


def _round_trip(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    request = ours["service_pb2"].SendMessageRequest()
    message = request.messages.add()
    message.topic.name = "TopicTest"
    message.body = b"\x00hello\xff"
    message.user_properties["k"] = "v"
    props = message.system_properties
    props.message_id = "01ABC"
    props.message_group = "g1"
    props.message_type = ours["definition_pb2"].FIFO
    props.born_timestamp.FromMilliseconds(1_700_000_000_123)
    props.delivery_attempt = 3
    parsed = theirs["service_pb2"].SendMessageRequest.FromString(request.SerializeToString())
    theirs_message = parsed.messages[0]
    back = ours["service_pb2"].SendMessageRequest.FromString(parsed.SerializeToString())
    return {
        "topic": theirs_message.topic.name,
        "body": theirs_message.body.hex(),
        "user_properties": dict(theirs_message.user_properties),
        "message_type": theirs["definition_pb2"].MessageType.Name(
            theirs_message.system_properties.message_type
        ),
        "born_ms": theirs_message.system_properties.born_timestamp.ToMilliseconds(),
        "back_equal": back == request,
    }


def _grpc_call(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Our servicer behind a real HTTP/2 listener, called through the official client's stub."""
    import grpc

    service, definition = ours["service_pb2"], ours["definition_pb2"]

    class Servicer(ours["service_pb2_grpc"].MessagingServiceServicer):  # type: ignore[misc]
        def QueryRoute(self, request: Any, context: Any) -> Any:
            response = service.QueryRouteResponse()
            response.status.code = definition.OK
            queue = response.message_queues.add()
            queue.topic.name = request.topic.name
            queue.id = 7
            queue.permission = definition.READ_WRITE
            return response

        def ReceiveMessage(self, request: Any, context: Any) -> Any:
            yield service.ReceiveMessageResponse(
                status=definition.Status(code=definition.MESSAGE_NOT_FOUND)
            )

    # grpc.so_reuseport 0: grpcio turns SO_REUSEPORT on by default (spec section 3.4)
    server = grpc.server(futures.ThreadPoolExecutor(2), options=[("grpc.so_reuseport", 0)])
    ours["service_pb2_grpc"].add_MessagingServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = theirs["service_pb2_grpc"].MessagingServiceStub(channel)
            tservice = theirs["service_pb2"]
            route = stub.QueryRoute(
                tservice.QueryRouteRequest(topic={"name": "TopicTest"}), timeout=10
            )
            received = list(stub.ReceiveMessage(tservice.ReceiveMessageRequest(), timeout=10))
            try:
                stub.AckMessage(tservice.AckMessageRequest(), timeout=10)
                unimplemented = "no error"
            except grpc.RpcError as exc:
                unimplemented = exc.code().name
    finally:
        server.stop(None)
    tcode = theirs["definition_pb2"].Code
    return {
        "route_status": tcode.Name(route.status.code),
        "route_queue": [route.message_queues[0].topic.name, route.message_queues[0].id],
        "receive_status": [tcode.Name(r.status.code) for r in received],
        "ack_on_base_servicer": unimplemented,
    }


def main(mode: str) -> None:
    if mode == "default-pool":
        from google.protobuf import descriptor_pool

        _import_theirs()
        ours = _import_ours()
        try:
            descriptor_pool.Default().AddSerializedFile(
                ours["definition_pb2"].DESCRIPTOR.serialized_pb
            )
            outcome = "registered"
        except TypeError as exc:
            outcome = str(exc)
        print(json.dumps({"outcome": outcome}))
        return
    if mode == "ours-first":
        ours = _import_ours()
        theirs = _import_theirs()
    else:
        theirs = _import_theirs()
        ours = _import_ours()
    result = _round_trip(ours, theirs)
    result.update(_grpc_call(ours, theirs))
    result["service"] = [
        module["service_pb2"].DESCRIPTOR.services_by_name["MessagingService"].full_name
        for module in (ours, theirs)
    ]
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
