"""A minimal asyncio client of etcd's gRPC gateway (JSON over HTTP/1.1) for the benchmarks.

Why not the ``etcd3`` package: it is synchronous (16 concurrent clients would be 16 threads
fighting over the GIL) and its generated protobuf code only imports with
``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` under protobuf 7, a pure-Python parser that
makes it client-bound on batches. The gateway is part of every etcd 3.4 server (``/v3/kv/put``,
``/v3/kv/txn``, ``/v3/kv/range``; keys and values base64 in JSON), so one event loop drives the
load exactly as it drives our client. One connection per ``EtcdClient``, one request at a time on
it (HTTP/1.1 keep-alive, no pipelining).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any, Final

from ledgermq.errors import LedgerMQError

__all__ = ["EtcdClient", "EtcdError"]

_TIMEOUT_S: Final = 10.0


class EtcdError(LedgerMQError):
    """etcd answered with an error, or the connection failed."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class EtcdClient:
    """Puts, transactions of puts and range reads on one member."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def put(self, key: bytes, value: bytes) -> None:
        await self.call("/v3/kv/put", {"key": _b64(key), "value": _b64(value)})

    async def put_many(self, items: list[tuple[bytes, bytes]]) -> None:
        """All ``items`` in one transaction: one Raft entry, one WAL fsync on each member."""
        success = [{"requestPut": {"key": _b64(k), "value": _b64(v)}} for k, v in items]
        await self.call("/v3/kv/txn", {"success": success})

    async def range(self, start: bytes, end: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` keys in ``[start, end)``, in key order (a linearizable read)."""
        answer = await self.call(
            "/v3/kv/range", {"key": _b64(start), "range_end": _b64(end), "limit": limit}
        )
        return [
            (base64.b64decode(kv["key"]), base64.b64decode(kv.get("value", "")))
            for kv in answer.get("kvs", [])
        ]

    async def status(self) -> dict[str, Any]:
        """This member's status: ``header.member_id`` and ``leader`` say whether it leads."""
        return await self.call("/v3/maintenance/status", {})

    async def call(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        """POST ``request`` as JSON to ``path``; the decoded answer, or EtcdError."""
        body = json.dumps(request, separators=(",", ":")).encode()
        try:
            return await asyncio.wait_for(self._exchange(path, body), _TIMEOUT_S)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.close()
            raise EtcdError(f"etcd {self.host}:{self.port}{path}: {exc!r}") from exc

    async def _exchange(self, path: str, body: bytes) -> dict[str, Any]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status_line = await reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length: int | None = None
        chunked = False
        while True:
            line = await reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            data = await _read_chunked(reader)
        elif length is not None:
            data = await reader.readexactly(length)
        else:
            raise ValueError("an HTTP answer without a length")
        answer: dict[str, Any] = json.loads(data) if data else {}
        if status != 200 or "error" in answer:
            raise EtcdError(f"etcd {path}: HTTP {status}: {data[:300]!r}")
        return answer

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
