"""What one gRPC request may make a door's event loop parse, and how many request bytes a door
holds at once (issue 25 items 6 and 8).

A replica's gRPC door runs on the loop that also runs its Raft, and grpcio parses a request on
that loop. Parsing protobuf costs per field, not per byte: a 5 MiB SendMessageRequest of empty
messages (2.6 million of them) took 120 ms to parse, a 130 MiB one would take seconds. So:

- ``check_field_budget`` walks a request's wire format before it is parsed, counting fields
  (into every sub-message, a bytes field skipped in one step) and refusing one that holds more
  than ``MAX_REQUEST_FIELDS``. A request of fewer than ``2 * MAX_REQUEST_FIELDS`` bytes cannot
  hold that many (a field takes at least two bytes) and is not walked: only large requests pay
  for the walk, which is bounded by the budget (a few milliseconds at most).
- ``RequestBytes`` bounds the request bytes a door holds at once, whoever sends them (with the
  ACL off nobody is authenticated): a call reserves the largest request the door accepts before
  it is read, keeps what its request actually holds until it is answered, and waits (it is not
  refused) while the budget is spent; HTTP/2 flow control keeps the waiting calls' bytes with
  their clients (the doors turn off grpcio's window growth, ``server_options``). One source
  address may hold at most a quarter of it (or four of the largest requests), so one client
  that sends slowly or a lot cannot make everyone else wait; a request must arrive within
  ``READ_TIMEOUT_S`` of being asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from google.protobuf.descriptor import Descriptor

__all__ = [
    "DEFAULT_INFLIGHT_REQUEST_BYTES",
    "MAX_REQUEST_FIELDS",
    "READ_TIMEOUT_S",
    "ByteBudget",
    "RequestBytes",
    "RequestTooComplexError",
    "Reservation",
    "check_field_budget",
]

MAX_REQUEST_FIELDS: Final = 8192
"""The most protobuf fields one request may hold. A message with 20 properties is about 60;
a batch of 100 such messages 6,000."""
DEFAULT_INFLIGHT_REQUEST_BYTES: Final = 64 * 1024 * 1024
"""Request bytes a door holds at once, over all its calls: seven of the largest requests a door
takes by default (9 MiB), or 60,000 requests of 1 KiB."""
SOURCE_SHARE: Final = 0.25
"""The part of the budget one source address may hold (at least four of the largest
requests)."""
READ_TIMEOUT_S: Final = 30.0
"""How long a call that holds a reservation may take to deliver its request."""

_MESSAGE: Final = 11  # FieldDescriptor.TYPE_MESSAGE
_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = range(6)


class RequestTooComplexError(ValueError):
    """A request over ``MAX_REQUEST_FIELDS`` fields, or whose wire format does not parse."""


def check_field_budget(
    raw: bytes, descriptor: Descriptor, budget: int = MAX_REQUEST_FIELDS
) -> None:
    """Refuse ``raw`` (a serialized ``descriptor`` message) if it holds more than ``budget``
    fields, counted without parsing it.

    Raises:
        RequestTooComplexError: over the budget, or not protobuf's wire format.
    """
    if len(raw) < 2 * budget:
        return
    left = _walk(memoryview(raw), descriptor, budget)
    if left < 0:
        raise RequestTooComplexError(
            f"the request holds more than {budget} protobuf fields (a bound on what one "
            "request may make the server parse)"
        )


def _walk(view: memoryview, descriptor: Descriptor | None, budget: int) -> int:
    """``budget`` less the fields of ``view``; negative as soon as it is spent."""
    pos, end = 0, len(view)
    fields = None if descriptor is None else descriptor.fields_by_number
    while pos < end:
        budget -= 1
        if budget < 0:
            return budget
        key, pos = _varint(view, pos)
        wire_type, number = key & 7, key >> 3
        if wire_type == _VARINT:
            _, pos = _varint(view, pos)
        elif wire_type == _FIXED64:
            pos += 8
        elif wire_type == _FIXED32:
            pos += 4
        elif wire_type == _LENGTH:
            length, pos = _varint(view, pos)
            if pos + length > end:
                raise RequestTooComplexError(
                    "the request is not protobuf: a field runs past its end"
                )
            field = None if fields is None else fields.get(number)
            if field is not None and field.type == _MESSAGE:
                budget = _walk(view[pos : pos + length], field.message_type, budget)
                if budget < 0:
                    return budget
            elif field is not None and field.is_packed:
                budget -= length // 4  # a packed scalar takes at least one byte each
            pos += length
        else:  # groups (deprecated, unused by this protocol) or an invalid wire type
            raise RequestTooComplexError(f"the request is not protobuf: wire type {wire_type}")
    if pos > end:
        raise RequestTooComplexError("the request is not protobuf: it ends inside a field")
    return budget


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(view) or shift > 63:
            raise RequestTooComplexError("the request is not protobuf: a bad varint")
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


class ByteBudget:
    """Request bytes a door may hold at once (module docstring). Fair: calls get bytes in the
    order they asked for them."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError("the request byte budget must be positive")
        self.limit = limit
        self.available = limit
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    async def reserve(self, size: int) -> int:
        """Wait for, and take, ``min(size, limit)`` bytes; returns what was taken."""
        size = min(size, self.limit)
        if not self._waiters and self.available >= size:
            self.available -= size
            return size
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except BaseException:
            if entry in self._waiters:
                self._waiters.remove(entry)
            elif waiter.done() and not waiter.cancelled():
                self.release(size)  # granted as it was cancelled: give it back
            raise
        return size

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken by ``reserve``, and wake whoever now fits."""
        self.available += size
        while self._waiters and self._waiters[0][0] <= self.available:
            size_needed, waiter = self._waiters.pop(0)
            if waiter.done():
                continue
            self.available -= size_needed
            waiter.set_result(None)

    @property
    def idle(self) -> bool:
        """Nothing taken and nobody waiting."""
        return self.available == self.limit and not self._waiters


class Reservation:
    """Bytes a call holds in its door's budgets until ``release``."""

    def __init__(self, budgets: tuple[ByteBudget, ...], size: int) -> None:
        self._budgets = budgets
        self.size = size

    def shrink(self, size: int) -> None:
        """Keep only ``size`` bytes (what the request turned out to hold)."""
        if 0 <= size < self.size:
            for budget in self._budgets:
                budget.release(self.size - size)
            self.size = size

    def release(self) -> None:
        self.shrink(0)


class RequestBytes:
    """The request bytes a door holds: the whole budget, and each source's share of it.

    Args:
        limit: the whole budget (``DEFAULT_INFLIGHT_REQUEST_BYTES``).
        max_request: the largest request the door reads; every budget holds at least one.
    """

    def __init__(self, limit: int, max_request: int) -> None:
        self.whole = ByteBudget(max(limit, max_request))
        # at least four of the largest requests, so that one client's calls are not read one
        # at a time (a call reserves the largest request until its own has arrived)
        self._source_limit = min(max(int(limit * SOURCE_SHARE), 4 * max_request), self.whole.limit)
        self._sources: dict[str, ByteBudget] = {}

    @contextlib.asynccontextmanager
    async def reserved(self, source: str, size: int) -> AsyncIterator[Reservation]:
        """``size`` bytes from ``source``'s share and the whole, held for the block."""
        mine = self._sources.get(source)
        if mine is None:
            mine = self._sources[source] = ByteBudget(self._source_limit)
        try:
            taken = await mine.reserve(size)
            try:
                taken = min(taken, await self.whole.reserve(taken))
            except BaseException:
                mine.release(taken)
                raise
            reservation = Reservation((mine, self.whole), taken)
            try:
                yield reservation
            finally:
                reservation.release()
        finally:
            if mine.idle and self._sources.get(source) is mine:
                del self._sources[source]
