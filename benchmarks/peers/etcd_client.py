"""A minimal asyncio gRPC client of etcd (grpcio's ``grpc.aio``, protobuf encoded by hand).

Why not the ``etcd3`` package: it is synchronous (16 concurrent clients would be 16 threads
fighting over the GIL) and its generated protobuf code only imports with
``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` under protobuf 7, a pure-Python encoder that
makes it client-bound on batches (~50 ms of client CPU per transaction of 1024 puts here). Why
not etcd's JSON gateway: the transcoding runs inside etcd and costs it more CPU than the
transaction itself (~115 ms per 1024 puts), which is not etcd's cost. The few messages used
(``PutRequest``, ``TxnRequest`` of puts, ``RangeRequest``/``RangeResponse``, ``StatusResponse``)
are written and read here with the protobuf wire format, and grpcio sends the bytes as they
are. One channel (one HTTP/2 connection) per ``EtcdClient``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Final

from ledgermq.errors import LedgerMQError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["EtcdClient", "EtcdError", "client_unavailable", "decode_fields", "encode_put"]

_TIMEOUT_S: Final = 10.0
_VARINT: Final = 0
_LENGTH_DELIMITED: Final = 2


class EtcdError(LedgerMQError):
    """etcd answered with an error, or the connection failed."""


def client_unavailable() -> str | None:
    """Why the client cannot run (grpcio missing: how to install it), or None."""
    if importlib.util.find_spec("grpc") is None:
        return "grpcio is not installed (pip install grpcio)"
    return None


# ---------------------------------------------------------------- protobuf wire format
def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(data)) + data


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3 | _VARINT) + _varint(value)


def encode_put(key: bytes, value: bytes) -> bytes:
    """``PutRequest{key = 1, value = 2}``."""
    return _bytes_field(1, key) + _bytes_field(2, value)


def encode_txn_of_puts(items: list[tuple[bytes, bytes]]) -> bytes:
    """``TxnRequest{success = 2: [RequestOp{request_put = 2}]}``: no compare, all puts."""
    return b"".join(_bytes_field(2, _bytes_field(2, encode_put(k, v))) for k, v in items)


def encode_range(start: bytes, end: bytes, limit: int) -> bytes:
    """``RangeRequest{key = 1, range_end = 2, limit = 3}``, linearizable (the default)."""
    return _bytes_field(1, start) + _bytes_field(2, end) + _int_field(3, limit)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
            yield number, value
        elif wire == _LENGTH_DELIMITED:
            size, pos = _read_varint(data, pos)
            yield number, data[pos : pos + size]
            pos += size
        elif wire == 1:  # fixed64
            yield number, data[pos : pos + 8]
            pos += 8
        elif wire == 5:  # fixed32
            yield number, data[pos : pos + 4]
            pos += 4
        else:
            raise EtcdError(f"unsupported protobuf wire type {wire}")


def decode_fields(data: bytes) -> dict[int, list[int | bytes]]:
    """A message's fields by number (repeated ones in order); nested messages stay bytes."""
    out: dict[int, list[int | bytes]] = {}
    for number, value in _fields(data):
        out.setdefault(number, []).append(value)
    return out


def _first(fields: dict[int, list[int | bytes]], number: int, default: Any) -> Any:
    values = fields.get(number)
    return values[0] if values else default


# ---------------------------------------------------------------- client
class EtcdClient:
    """Puts, transactions of puts and range reads on one member, over one gRPC channel."""

    def __init__(self, host: str, port: int) -> None:
        self.target = f"{host}:{port}"
        self._channel: Any = None
        self._methods: dict[str, Any] = {}

    def _method(self, name: str) -> Any:
        if self._channel is None:
            import grpc

            self._channel = grpc.aio.insecure_channel(
                self.target,
                options=[
                    ("grpc.max_send_message_length", 8 << 20),
                    ("grpc.max_receive_message_length", 64 << 20),
                ],
            )
            self._methods = {}
        if name not in self._methods:
            self._methods[name] = self._channel.unary_unary(name)  # bytes in, bytes out
        return self._methods[name]

    async def _call(self, name: str, request: bytes) -> bytes:
        import grpc

        try:
            answer: bytes = await self._method(name)(request, timeout=_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise EtcdError(f"etcd {self.target} {name}: {exc}") from exc
        return answer

    async def put(self, key: bytes, value: bytes) -> None:
        await self._call("/etcdserverpb.KV/Put", encode_put(key, value))

    async def put_many(self, items: list[tuple[bytes, bytes]]) -> None:
        """All ``items`` in one transaction: one Raft entry, one WAL fsync on each member."""
        await self._call("/etcdserverpb.KV/Txn", encode_txn_of_puts(items))

    async def range(self, start: bytes, end: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` keys in ``[start, end)``, in key order (a linearizable read)."""
        answer = decode_fields(
            await self._call("/etcdserverpb.KV/Range", encode_range(start, end, limit))
        )
        out = []
        for kv in answer.get(2, []):  # RangeResponse.kvs: KeyValue{key = 1, value = 5}
            assert isinstance(kv, bytes)
            fields = decode_fields(kv)
            out.append((bytes(_first(fields, 1, b"")), bytes(_first(fields, 5, b""))))
        return out

    async def is_leader(self) -> bool:
        """``StatusResponse.leader`` (4) equals ``header.member_id`` (1.2): this member leads."""
        status = decode_fields(await self._call("/etcdserverpb.Maintenance/Status", b""))
        header = decode_fields(_first(status, 1, b""))
        return bool(_first(status, 4, -1) == _first(header, 2, -2))

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        self._methods = {}
        if channel is not None:
            await channel.close()
