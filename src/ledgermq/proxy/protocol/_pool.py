"""The private descriptor pool our generated modules register into (why: ``__init__``'s docstring).

The generated ``*_pb2.py`` files call ``_pool.POOL.AddSerializedFile(...)`` where protoc's output
calls ``descriptor_pool.Default().AddSerializedFile(...)``; ``scripts/gen-grpc-stubs`` makes that
one change. A fresh pool knows no files at all, so the two well-known types our ``.proto`` files
import are added first, from the serialized descriptors protobuf itself ships.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import descriptor_pool, duration_pb2, message_factory, timestamp_pb2

__all__ = ["POOL", "Duration", "Timestamp"]

POOL = descriptor_pool.DescriptorPool()
POOL.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
POOL.AddSerializedFile(duration_pb2.DESCRIPTOR.serialized_pb)

if TYPE_CHECKING:
    # Types of their own, so that mypy tells them from the default pool's classes (which are
    # final in the protobuf stubs, so these cannot subclass them): the generated .pyi files
    # import these where protoc's output imports google.protobuf.timestamp_pb2 / duration_pb2.
    from google.protobuf import message
    from google.protobuf.internal import well_known_types

    class Timestamp(message.Message, well_known_types.Timestamp):
        """``google.protobuf.Timestamp`` of the private pool."""

        seconds: int
        nanos: int

        def __init__(self, *, seconds: int | None = ..., nanos: int | None = ...) -> None: ...

    class Duration(message.Message, well_known_types.Duration):
        """``google.protobuf.Duration`` of the private pool."""

        seconds: int
        nanos: int

        def __init__(self, *, seconds: int | None = ..., nanos: int | None = ...) -> None: ...

else:
    # GetMessageClass caches the class on the descriptor: the message fields of our generated
    # classes hold instances of exactly these classes.
    Timestamp = message_factory.GetMessageClass(
        POOL.FindMessageTypeByName("google.protobuf.Timestamp")
    )
    Duration = message_factory.GetMessageClass(
        POOL.FindMessageTypeByName("google.protobuf.Duration")
    )
