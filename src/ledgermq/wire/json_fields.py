"""Reading JSON bodies that Java, C++ and our own code send, with one kind of error.

RocketMQ's NameServer and broker exchange JSON bodies produced by fastjson (Java), jsoncpp (C++)
or us. A server must never fail on such a body with a bare ``KeyError``, ``TypeError`` or
``json.JSONDecodeError``: every problem, whatever its kind, becomes a ``BadRequestError`` whose
message names the path of the bad field (``topicConfigTable.T1.perm``), so the dispatcher can
answer it and a client can catch one class. ``bad_json`` is the one place that builds that error.

Two leniencies, both for what real peers send:

- ``load_json`` accepts fastjson's non-standard numeric object keys (``{0:"127.0.0.1:10911"}``,
  emitted by old Java NameServers for ``brokerAddrs``; protocol-remoting-and-grpc.md section 2.5)
  by quoting them and parsing again. Standard JSON never takes that path.
- Missing optional fields take Java's defaults and unknown fields are ignored: fastjson leaves out
  null fields, and newer RocketMQ versions add fields older readers must skip.
"""

from __future__ import annotations

import json
import re
from typing import Final

from ledgermq.errors import BadRequestError

__all__ = [
    "INT32",
    "INT64",
    "MAX_JSON_VALUES",
    "JsonObject",
    "as_array",
    "as_integer",
    "as_text",
    "as_text_array",
    "bad_json",
    "check_json_budget",
    "dump_json",
    "load_json",
    "quote_numeric_keys",
]

INT32: Final = (-(1 << 31), (1 << 31) - 1)
"""Range of a Java ``int``."""
INT64: Final = (-(1 << 63), (1 << 63) - 1)
"""Range of a Java ``long``."""
MAX_JSON_VALUES: Final = 50_000
"""The most separators (``,`` and ``:``) a request's JSON body may hold by default.

Parsing JSON costs per value, not per byte: a 1 MiB body of ``[0,0,0,...]`` holds 500,000 values
and takes 40-80 ms of the event loop, while a heartbeat of 1,000 subscriptions (the most a client
may hold, ``heartbeatMaxSubscriptions``) is 240 KB with about 16,000. Counting separators is a
``memchr`` pass (about 0.1 ms per MiB), and every value but the first follows one, so this bound
keeps the parse of any body within a few milliseconds (issue 25 item 6)."""

# A JSON string literal, so the key fix-up below can skip over strings. The closing quote is
# optional so that an unterminated string is consumed once, to the end: with a required quote,
# every escaped quote after an unterminated one would start another scan to the end (quadratic).
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
# Outside strings: an unquoted integer where an object key belongs ("{0:" or ", 12 :").
_NUMERIC_KEY: Final = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def bad_json(message: str) -> BadRequestError:
    """The error for any malformed body; answered with SYSTEM_ERROR, as RocketMQ does."""
    return BadRequestError(message)


def dump_json(value: object) -> bytes:
    """Standard, compact JSON.

    ASCII only (non-ASCII as ``\\uXXXX``): every JSON reader accepts that, and a string that
    came in with a lone surrogate escape can go out again instead of failing to encode.
    """
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def check_json_budget(raw: bytes, what: str, max_values: int = MAX_JSON_VALUES) -> None:
    """Refuse, before parsing it, a JSON body whose parse would hold the event loop for long:
    more than ``max_values`` separators (``MAX_JSON_VALUES``). Strings containing commas count
    too, so the bound is conservative; nesting is bounded by the parser's recursion limit.

    Raises:
        BadRequestError: naming ``what``, the count and the bound.
    """
    separators = raw.count(b",") + raw.count(b":")
    if separators > max_values:
        raise bad_json(
            f"{what} holds {separators} JSON values; the limit is {max_values} (a bound on "
            "what one request may make the server parse)"
        )


def load_json(raw: bytes, what: str, max_values: int | None = None) -> object:
    """Parse ``raw`` (UTF-8 JSON, fastjson numeric keys allowed); ``what`` names it in errors.

    With ``max_values``, a body over that budget is refused before it is parsed
    (``check_json_budget``)."""
    if max_values is not None:
        check_json_budget(raw, what, max_values)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        first_error: Exception = exc
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise bad_json(f"{what} is not UTF-8 JSON: {first_error}") from None
    # Only an unquoted key can be fastjson's: anything else is not worth the fix-up, a regular
    # expression over the whole body (a 16 MiB body that is not JSON took 0.5 s of the event
    # loop, from anyone who can reach a NameServer; issue 25 item 6).
    numeric_key = isinstance(first_error, json.JSONDecodeError) and first_error.msg.startswith(
        "Expecting property name"
    )
    fixed = quote_numeric_keys(text) if numeric_key else text
    if fixed != text:
        try:
            return json.loads(fixed)
        except (ValueError, RecursionError):
            pass
    raise bad_json(f"{what} is not valid JSON: {first_error}") from None


def quote_numeric_keys(text: str) -> str:
    """``text`` with fastjson's unquoted integer object keys quoted: ``{0:"a"}`` -> ``{"0":"a"}``.

    String literals are copied untouched, so a value such as ``"x,1:y"`` is never changed.
    """
    parts: list[str] = []
    pos = 0
    for match in _STRING.finditer(text):
        parts.append(_NUMERIC_KEY.sub(r'\1"\2"\3', text[pos : match.start()]))
        parts.append(match.group())
        pos = match.end()
    parts.append(_NUMERIC_KEY.sub(r'\1"\2"\3', text[pos:]))
    return "".join(parts)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class JsonObject:
    """A decoded JSON object read field by field; every accessor checks the type it returns.

    ``path`` is where the object sits in the document, for error messages.
    """

    __slots__ = ("_fields", "path")

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise bad_json(f"{path} must be a JSON object, not {_kind(value)}")
        self._fields: dict[str, object] = value
        self.path = path

    def _where(self, name: str) -> str:
        return f"{self.path}.{name}"

    def get(self, name: str) -> object:
        """A field's raw value (None when absent), for a caller that checks it itself."""
        return self._fields.get(name)

    def entries(self, name: str) -> list[tuple[str, object, str]]:
        """A map field (keys are names or ids) as ``(key, value, path)``; absent or null: none."""
        child = self.child(name)
        if child is None:
            return []
        return [(key, value, f"{child.path}.{key}") for key, value in child._fields.items()]

    def text(self, name: str) -> str:
        """A required string field."""
        value = self._fields.get(name)
        if not isinstance(value, str):
            raise bad_json(f"{self._where(name)} must be a string, not {_kind(value)}")
        return value

    def optional_text(self, name: str, default: str | None = None) -> str | None:
        value = self._fields.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            raise bad_json(f"{self._where(name)} must be a string or null, not {_kind(value)}")
        return value

    def integer(
        self, name: str, default: int | None = None, bounds: tuple[int, int] = INT32
    ) -> int:
        """An integer field within ``bounds`` (Java ``int`` by default); ``default`` if absent."""
        value = self._fields.get(name)
        if value is None and default is not None:
            return default
        return as_integer(value, self._where(name), bounds)

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self._fields.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise bad_json(f"{self._where(name)} must be true or false, not {_kind(value)}")
        return value

    def child(self, name: str) -> JsonObject | None:
        """A nested object, or None when the field is absent or null."""
        value = self._fields.get(name)
        return None if value is None else JsonObject(value, self._where(name))

    def array(self, name: str) -> list[object]:
        """An array field; absent or null is an empty array."""
        return as_array(self._fields.get(name), self._where(name))

    def text_map(self, name: str) -> dict[str, str]:
        """An object of string values (``attributes``); absent or null is empty."""
        return {key: as_text(value, path) for key, value, path in self.entries(name)}


def as_text(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise bad_json(f"{path} must be a string, not {_kind(value)}")
    return value


def as_array(value: object, path: str) -> list[object]:
    """An array; null is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_json(f"{path} must be an array, not {_kind(value)}")
    return value


def as_text_array(value: object, path: str) -> tuple[str, ...]:
    """An array of strings (null is empty); element paths end in ``[i]``."""
    return tuple(as_text(item, f"{path}[{i}]") for i, item in enumerate(as_array(value, path)))


def as_integer(value: object, path: str, bounds: tuple[int, int] = INT32) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad_json(f"{path} must be an integer, not {_kind(value)}")
    low, high = bounds
    if not low <= value <= high:
        raise bad_json(f"{path} = {value} is outside the range {low}..{high}")
    return value
