"""What the gRPC door (``proxy.door``, in a replica and in the stand-alone proxy) answers about
routes, assignments and settings: pure; the backends differ only in which endpoints they name
and where the facts come from.

The layout is the Java proxy's: ``RouteActivity`` for the queues of a route (queues read and
written get the topic's permission, the surplus of one kind gets that kind alone),
``QueryAssignment`` as one "any queue" (-1) per broker group with readable queues, and
``GrpcClientSettingsManager`` for the settings a client is answered with.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Final

from ledgermq.proxy.protocol import definition_pb2, service_pb2
from ledgermq.proxy.status import Code, ok, status
from ledgermq.wire.route import is_readable, is_writable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    import grpc.aio

    from ledgermq.wire.route import QueueData

__all__ = [
    "MAX_ATTEMPTS",
    "address_scheme",
    "assignments",
    "broker_at",
    "peer_address",
    "permission",
    "replica_route_queues",
    "route_queues",
    "server_settings",
]

MAX_ATTEMPTS: Final = 3
"""Send attempts a producer is told to make (RocketMQ's proxy default, ``maxAttempts``)."""
_LONG_POLLING_S: Final = 20
_RECEIVE_BATCH: Final = 32


def address_scheme(host: str) -> definition_pb2.AddressScheme.ValueType:
    """The v2 scheme of an endpoint's host: ``IPv4`` / ``IPv6`` for addresses, ``DOMAIN_NAME``
    for a name (a ``brokerIP1`` such as ``broker-a.example.com``). The clients dial
    ``ipv4:`` / ``ipv6:`` / ``dns:`` targets by it, and over TLS check the server's certificate
    against that host: a name labelled IPv4 would be dialled as an address and fail."""
    try:
        parsed = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return definition_pb2.DOMAIN_NAME
    return definition_pb2.IPv4 if parsed.version == 4 else definition_pb2.IPv6


def broker_at(name: str, host: str, port: int) -> definition_pb2.Broker:
    """Broker group ``name`` as a route names it, reached at ``host:port``."""
    return definition_pb2.Broker(
        name=name,
        id=0,
        endpoints=definition_pb2.Endpoints(
            scheme=address_scheme(host),
            addresses=[definition_pb2.Address(host=host, port=port)],
        ),
    )


def permission(perm: int) -> definition_pb2.Permission.ValueType:
    """RocketMQ's permission bits as the v2 enum."""
    if is_readable(perm) and is_writable(perm):
        return definition_pb2.READ_WRITE
    if is_readable(perm):
        return definition_pb2.READ
    if is_writable(perm):
        return definition_pb2.WRITE
    return definition_pb2.NONE


def route_queues(
    topic: str,
    queue_datas: Iterable[QueueData],
    broker_of: Callable[[str], definition_pb2.Broker | None],
    accepted: Sequence[definition_pb2.MessageType.ValueType],
) -> list[definition_pb2.MessageQueue]:
    """The v2 queues of ``topic``'s broker groups, in the order given; a group whose
    ``broker_of`` is None (no master to name now) is left out."""

    def brokers_of(name: str) -> list[definition_pb2.Broker]:
        broker = broker_of(name)
        return [] if broker is None else [broker]

    return replica_route_queues(topic, queue_datas, brokers_of, accepted)


def replica_route_queues(
    topic: str,
    queue_datas: Iterable[QueueData],
    brokers_of: Callable[[str], Sequence[definition_pb2.Broker]],
    accepted: Sequence[definition_pb2.MessageType.ValueType],
) -> list[definition_pb2.MessageQueue]:
    """As ``route_queues``, each queue once per door of its group that ``brokers_of`` names
    (every replica's, in the local mode: ``local_backend``), the doors of one queue next to each
    other: a client that retries a failed send on the next queue of the route (the official
    Python client) tries another door, and one that picks a single queue per group (the
    official Node.js client takes queue id 0) gets one per door to go round."""
    queues: list[definition_pb2.MessageQueue] = []
    for data in queue_datas:
        brokers = brokers_of(data.broker_name)
        both = min(data.read_queue_nums, data.write_queue_nums)
        for queue_id in range(max(data.read_queue_nums, data.write_queue_nums)):
            if queue_id < both:
                perm = data.perm
            elif data.read_queue_nums > data.write_queue_nums:
                perm = data.perm & 4
            else:
                perm = data.perm & 2
            queues.extend(
                definition_pb2.MessageQueue(
                    topic=definition_pb2.Resource(name=topic),
                    id=queue_id,
                    permission=permission(perm),
                    broker=broker,
                    accept_message_types=accepted,
                )
                for broker in brokers
            )
    return queues


def assignments(
    topic: str, queues: Sequence[definition_pb2.MessageQueue]
) -> service_pb2.QueryAssignmentResponse:
    """One assignment per broker group with readable queues, queue id -1 ("any queue of this
    group", POP), as the Java proxy answers; FORBIDDEN when no queue is readable."""
    found = []
    seen: set[str] = set()
    for queue in queues:
        readable = queue.permission in (definition_pb2.READ, definition_pb2.READ_WRITE)
        if not readable or queue.broker.name in seen:
            continue
        seen.add(queue.broker.name)
        any_queue = definition_pb2.MessageQueue()
        any_queue.CopyFrom(queue)
        any_queue.id = -1
        found.append(definition_pb2.Assignment(message_queue=any_queue))
    if not found:
        return service_pb2.QueryAssignmentResponse(
            status=status(Code.FORBIDDEN, f"topic {topic} has no readable queue")
        )
    return service_pb2.QueryAssignmentResponse(status=ok(), assignments=found)


def server_settings(
    client: definition_pb2.Settings,
    *,
    max_body_size: int,
    validate_message_type: bool,
    fifo: bool,
) -> definition_pb2.Settings:
    """The client's settings merged with the server's: the backoff policy, and the producer's
    publishing limits or the consumer's subscription (``fifo``: its group consumes in
    order, ``consumeMessageOrderly``)."""
    settings = definition_pb2.Settings()
    settings.CopyFrom(client)
    backoff = settings.backoff_policy
    backoff.max_attempts = MAX_ATTEMPTS
    exponential = backoff.exponential_backoff
    exponential.initial.FromMilliseconds(10)
    exponential.max.FromMilliseconds(1000)
    exponential.multiplier = 2.0
    if client.client_type == definition_pb2.PRODUCER:
        settings.publishing.max_body_size = max_body_size
        settings.publishing.validate_message_type = validate_message_type
    elif client.HasField("subscription"):
        settings.subscription.fifo = fifo
        settings.subscription.receive_batch_size = _RECEIVE_BATCH
        settings.subscription.long_polling_timeout.FromSeconds(_LONG_POLLING_S)
    return settings


def peer_address(context: grpc.aio.ServicerContext[object, object]) -> str:
    """``ipv4:127.0.0.1:5555`` -> ``127.0.0.1:5555`` (``ipv6:[::1]:5555`` -> ``[::1]:5555``)."""
    peer = context.peer() or ""
    _, _, address = peer.partition(":")
    return address or peer
