"""A request's protobuf ``Timestamp`` and ``Duration`` fields as milliseconds, or a refusal.

Pure. protobuf's ``Timestamp.ToMilliseconds`` raises ``ValueError`` for a value outside
0001-01-01 .. 9999-12-31 or nanos outside 0..999,999,999, so a client's bad value reached the
doors' catch-all as INTERNAL_ERROR; here every such value is a ``Refusal`` with the code the
field's rule has (ILLEGAL_DELIVERY_TIME for a delivery time, as the Java proxy answers) and a
message naming the field and the rule.

The official Python client (``rocketmq-python-client`` 5.1.2) puts the delivery time its user
gives into ``Timestamp.seconds`` as it is, and its docstring and its own tests give
milliseconds (``now_ms + 60_000``): a time some 57,000 years ahead, which no Timestamp can
hold. A ``delivery_timestamp`` whose seconds lie beyond 9999-12-31 is therefore read as
milliseconds (every millisecond time since 1978 is such a number, and no seconds value there
is a valid Timestamp, so nothing valid is read differently).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.proxy.refusal import Refusal
from ledgermq.proxy.status import Code, status

if TYPE_CHECKING:
    from ledgermq.proxy.protocol import Duration, Timestamp, definition_pb2

__all__ = ["MAX_TIMESTAMP_SECONDS", "delivery_time_ms", "duration_ms", "timestamp_ms"]

MIN_TIMESTAMP_SECONDS: Final = -62_135_596_800
"""0001-01-01T00:00:00Z, the earliest a ``Timestamp`` may be (google/protobuf/timestamp.proto)."""
MAX_TIMESTAMP_SECONDS: Final = 253_402_300_799
"""9999-12-31T23:59:59Z, the latest a ``Timestamp`` may be."""
MAX_DURATION_SECONDS: Final = 315_576_000_000
"""About 10,000 years, the longest a ``Duration`` may be (google/protobuf/duration.proto)."""
_MAX_NANOS: Final = 999_999_999


def _timestamp_problem(seconds: int, nanos: int) -> str | None:
    if not MIN_TIMESTAMP_SECONDS <= seconds <= MAX_TIMESTAMP_SECONDS:
        return (
            f"seconds {seconds} is not between {MIN_TIMESTAMP_SECONDS} and "
            f"{MAX_TIMESTAMP_SECONDS} (years 1 to 9999)"
        )
    if not 0 <= nanos <= _MAX_NANOS:
        return f"nanos {nanos} is not between 0 and {_MAX_NANOS}"
    return None


def timestamp_ms(
    value: Timestamp, field: str, code: definition_pb2.Code.ValueType = Code.BAD_REQUEST
) -> int:
    """``value`` in epoch milliseconds; ``Refusal`` (``code``) naming ``field`` if it is not
    a valid Timestamp."""
    if (problem := _timestamp_problem(value.seconds, value.nanos)) is not None:
        raise Refusal(status(code, f"{field} is not a valid Timestamp: {problem}"))
    return value.seconds * 1000 + value.nanos // 1_000_000


def delivery_time_ms(value: Timestamp) -> int:
    """A message's ``delivery_timestamp`` in epoch milliseconds, seconds beyond 9999-12-31
    read as milliseconds (the module docstring); ``Refusal`` ILLEGAL_DELIVERY_TIME otherwise."""
    if value.seconds > MAX_TIMESTAMP_SECONDS and value.nanos == 0:
        millis = value.seconds
        if millis <= MAX_TIMESTAMP_SECONDS * 1000:
            return millis
        raise Refusal(
            status(
                Code.ILLEGAL_DELIVERY_TIME,
                f"delivery_timestamp is not a valid Timestamp: seconds {value.seconds} is past "
                "9999-12-31 even read as milliseconds",
            )
        )
    return timestamp_ms(value, "delivery_timestamp", Code.ILLEGAL_DELIVERY_TIME)


def duration_ms(
    value: Duration, field: str, code: definition_pb2.Code.ValueType = Code.BAD_REQUEST
) -> int:
    """``value`` in milliseconds; ``Refusal`` (``code``) naming ``field`` if it is not a valid
    Duration (at most about 10,000 years either way, nanos of the seconds' sign)."""
    seconds, nanos = value.seconds, value.nanos
    problem = None
    if not -MAX_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS:
        problem = f"seconds {seconds} is beyond +-{MAX_DURATION_SECONDS}"
    elif not -_MAX_NANOS <= nanos <= _MAX_NANOS:
        problem = f"nanos {nanos} is not between -{_MAX_NANOS} and {_MAX_NANOS}"
    elif (seconds < 0 < nanos) or (nanos < 0 < seconds):
        problem = f"seconds {seconds} and nanos {nanos} have different signs"
    if problem is not None:
        raise Refusal(status(code, f"{field} is not a valid Duration: {problem}"))
    return seconds * 1000 + int(nanos / 1_000_000)
