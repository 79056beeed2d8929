"""RocketMQ 5's gRPC protocol (``apache.rocketmq.v2``), generated from vendored ``.proto`` files.

What is here: ``definition_pb2`` and ``service_pb2`` (messages), ``service_pb2_grpc`` (the
``MessagingService`` servicer base class, client stub and
``add_MessagingServiceServicer_to_server``), each with its ``.pyi`` types, all made by
``scripts/gen-grpc-stubs`` from ``proto/apache/rocketmq/v2/`` (apache/rocketmq-apis, Apache-2.0,
unmodified; the commit is in ``proto/README.md``). Do not edit the generated files: change the
script and run it again.

Why a private descriptor pool (``_pool.POOL``) instead of protobuf's default one: every other
program that speaks this protocol in Python (the official ``rocketmq-python-client`` above all)
registers the same symbols, ``apache.rocketmq.v2.Message`` and the rest, in the process-wide
default pool, and protobuf refuses a second file that defines a symbol already there
("Couldn't build proto file into descriptor pool: duplicate symbol", spec
protocol-remoting-and-grpc.md section 3.4). A test harness, a benchmark or a user's process that
loads that client beside the broker or proxy would fail at import. The two ways out were to
rename the proto package (``package ledgermq...;``) or to build our files into a pool of our own.
Renaming edits the vendored files and changes every full name, and the gRPC method paths are made
from the package name (``/apache.rocketmq.v2.MessagingService/SendMessage``): they would have to
be patched back by hand, and anything that derives a path from the descriptors (server
reflection, a regenerated ``_grpc`` module without the patch) would silently answer real clients
``UNIMPLEMENTED``. A private pool keeps the files byte-for-byte upstream, keeps the real full
names (logs, text format and reflection say ``apache.rocketmq.v2.Message``, as the Java proxy's
do) and changes only where the descriptors live. The wire format carries field numbers, never
type names, so the bytes are the same either way (``tests/proxy/test_protocol_stubs.py`` parses
our bytes with the client's classes and back, and calls our servicer through the client's stub,
in one process).

The price of the private pool, and the rule that follows: the pool holds its own copies of
``google/protobuf/timestamp.proto`` and ``duration.proto``, so a ``Timestamp`` field of our
messages takes our ``Timestamp`` class, not ``google.protobuf.timestamp_pb2.Timestamp``
(protobuf raises ``TypeError`` on the mix). Set such fields in place
(``m.born_timestamp.FromMilliseconds(ms)``, ``r.invisible_duration.FromTimedelta(td)``) or use
``Timestamp`` / ``Duration`` from here; the ``.pyi`` files name these classes, so mypy rejects
the mix before it runs.
"""

from ledgermq.proxy.protocol._pool import POOL, Duration, Timestamp

__all__ = ["POOL", "Duration", "Timestamp"]
