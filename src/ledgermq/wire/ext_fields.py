"""Reading a request's ``extFields`` (the RocketMQ "custom header") with clear errors.

Java fills ``extFields`` from a header class and parses it back with ``Integer.parseInt``,
``Long.parseLong`` and ``Boolean.parseBoolean``. Clients we did not write are looser: the C++
client sends some numbers as JSON numbers (the frame decoder makes them strings) and booleans as
``"0"`` / ``"1"`` (protocol-remoting-and-grpc.md section 2.2). Every reader here accepts what a
real client sends and raises ``BadRequestError`` naming the field otherwise, so a processor never
fails with a bare ``KeyError`` or ``ValueError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.errors import BadRequestError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SEND_V2_FIELD_NAMES",
    "expand_send_v2_fields",
    "ext_bool",
    "ext_int",
    "ext_str",
    "optional_int",
    "optional_str",
    "send_v2_topic",
]

SEND_V2_FIELD_NAMES: Final = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
"""SEND_MESSAGE_V2's one-letter header names (``SendMessageRequestHeaderV2``) -> SEND_MESSAGE's."""


_SEND_V1_NAMES: Final = frozenset(SEND_V2_FIELD_NAMES.values())


def send_v2_topic(fields: Mapping[str, str]) -> str:
    """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header's topic, its field ``b``, once the header is
    known to be a V2 one: ``BadRequestError`` if ``b`` is missing or the header also carries a
    SEND_MESSAGE (V1) name (``topic``, ``producerGroup``, ...). Why: a V1 name beside the
    one-letter ones is ambiguous, and the ACL and the handler once read different ones (issue
    25: PUB checked on ``b``, the message stored in ``topic``); no client sends both."""
    mixed = _SEND_V1_NAMES.intersection(fields)
    if mixed:
        raise BadRequestError(
            f"a SEND_MESSAGE_V2 header names its fields a..n; it may not also carry "
            f"SEND_MESSAGE's {', '.join(repr(n) for n in sorted(mixed))}"
        )
    topic = fields.get("b")
    if topic is None:
        raise BadRequestError("the SEND_MESSAGE_V2 header lacks the field 'b' (the topic)")
    return topic


def expand_send_v2_fields(fields: Mapping[str, str]) -> dict[str, str]:
    """A SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header with SEND_MESSAGE's field names; call
    ``send_v2_topic`` first, which refuses a header whose names would collide here."""
    return {SEND_V2_FIELD_NAMES.get(k, k): v for k, v in fields.items()}


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0", ""})


def ext_str(fields: Mapping[str, str], name: str) -> str:
    """The value of a required field."""
    value = fields.get(name)
    if value is None:
        raise BadRequestError(f"the request header lacks the field {name!r}")
    return value


def optional_str(fields: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    return fields.get(name, default)


def ext_int(fields: Mapping[str, str], name: str, default: int | None = None) -> int:
    """A required integer field (or ``default`` when it is absent and a default is given)."""
    value = fields.get(name)
    if value is None or value == "":
        if default is None:
            raise BadRequestError(f"the request header lacks the field {name!r}")
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise BadRequestError(
            f"header field {name!r} must be an integer, got {value!r:.40}"
        ) from None
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise BadRequestError(f"header field {name!r} = {number} is outside the int64 range")
    return number


def optional_int(fields: Mapping[str, str], name: str) -> int | None:
    """An integer field that may be absent."""
    if fields.get(name) in (None, ""):
        return None
    return ext_int(fields, name)


def ext_bool(fields: Mapping[str, str], name: str, *, default: bool = False) -> bool:
    """A boolean field: ``true`` / ``false`` (Java) or ``1`` / ``0`` (the C++ client)."""
    value = fields.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise BadRequestError(f"header field {name!r} must be true/false or 1/0, got {value!r:.40}")
