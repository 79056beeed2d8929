"""LedgerMQ's strong request signature: an opt-in for our own clients, beside RocketMQ's.

RocketMQ's signature (``ledgermq.security.acl.signature``) is HMAC-SHA1 over the extFields' values
joined without separators, and the body. It does not cover the request code, has no time and
no nonce: a captured request can be sent again for ever, and as another request with the same
fields (a topic-create replayed as DELETE_TOPIC_IN_BROKER deletes the topic), and values can
be moved between fields. Only TLS keeps a signature from being captured.

The strong signature closes those gaps for clients that send it. Three more extFields:
``LmqSigTime`` (the client's wall clock, ms since the epoch), ``LmqSigNonce`` (16 random bytes,
hex) and ``LmqSignature``: the Base64 of HMAC-SHA256, under the account's secret key, of::

    LedgerMQ-Signature-1\\n
    code:<request code>\\n
    <len(name)>:<name>=<len(value)>:<value>\\n      for every extField but Signature and
                                                    LmqSignature, sorted by name (UTF-8 bytes)
    body:<len(body)>:<body>

(lengths in bytes of the UTF-8 text, so no two different requests have the same content). A
server checks that the time is within ``SKEW_S`` of its clock and that the (access key, nonce)
pair was not seen before (``NonceCache`` remembers each for as long as its time is acceptable),
so a request is accepted once, as the request it was, for ``SKEW_S`` at most. A client that
sends it still sends RocketMQ's ``Signature`` over all the fields (these three included), so a
RocketMQ server, which ignores fields it does not know, accepts the request as before.

Pure, like the rest of ``ledgermq.security.acl``: the caller gives the time and the nonce.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import TYPE_CHECKING, Final

from ledgermq.security.acl.signature import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, sign_request

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_NONCES",
    "SKEW_S",
    "STRONG_NONCE",
    "STRONG_REQUIRED",
    "STRONG_SIGNATURE",
    "STRONG_TIME",
    "NonceCache",
    "sign_strong",
    "strong_content",
    "strong_matches",
    "strong_problem",
]

STRONG_TIME: Final = "LmqSigTime"
STRONG_NONCE: Final = "LmqSigNonce"
STRONG_SIGNATURE: Final = "LmqSignature"
SKEW_S: Final = 300.0
"""How far (seconds, either way) a strong request's time may be from the server's clock; its
nonce is remembered that long after its time."""
MAX_NONCES: Final = 200_000
"""Nonces a server remembers at most (about 30 MB); see ``NonceCache``."""
_VERSION: Final = b"LedgerMQ-Signature-1\n"
_NONCE_HEX: Final = 32


def _item(name: str, value: str) -> bytes:
    key = name.encode("utf-8", "surrogatepass")
    data = value.encode("utf-8", "surrogatepass")
    return b"%d:%s=%d:%s\n" % (len(key), key, len(data), data)


def strong_content(code: int, ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes a strong signature covers (see the module docstring)."""
    names = sorted(
        (name for name in ext_fields if name not in (SIGNATURE, STRONG_SIGNATURE)),
        key=lambda name: name.encode("utf-8", "surrogatepass"),
    )
    body = body or b""
    return b"".join(
        [
            _VERSION,
            b"code:%d\n" % code,
            *(_item(name, ext_fields[name]) for name in names),
            b"body:%d:" % len(body),
            body,
        ]
    )


def _sign(content: bytes, secret_key: str) -> str:
    digest = hmac.new(secret_key.encode(), content, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_strong(
    code: int,
    ext_fields: Mapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    *,
    now_s: float,
    nonce: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """``ext_fields`` with the account, the strong signature's three fields and RocketMQ's
    ``Signature`` over all of them (``nonce``: 32 hex digits, fresh for every request)."""
    fields = {k: v for k, v in ext_fields.items() if k not in (SIGNATURE, STRONG_SIGNATURE)}
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[STRONG_TIME] = str(int(now_s * 1000))
    fields[STRONG_NONCE] = nonce
    fields[STRONG_SIGNATURE] = _sign(strong_content(code, fields, body), secret_key)
    return sign_request(fields, body, access_key, secret_key, security_token)


def strong_matches(
    code: int, ext_fields: Mapping[str, str], body: bytes | None, secret_key: str
) -> bool:
    """Whether ``LmqSignature`` is right for ``secret_key`` (constant-time compare)."""
    given = ext_fields.get(STRONG_SIGNATURE)
    if given is None:
        return False
    expected = _sign(strong_content(code, ext_fields, body), secret_key)
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass"))


def strong_time_ms(ext_fields: Mapping[str, str]) -> int | None:
    text = ext_fields.get(STRONG_TIME, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 16 else None


def strong_problem(
    ext_fields: Mapping[str, str], now_s: float, skew_s: float = SKEW_S
) -> str | None:
    """What is wrong with a strong request's time and nonce (None: nothing), before its
    signature is checked: the remark of its refusal."""
    time_ms = strong_time_ms(ext_fields)
    if time_ms is None:
        return f"a strong signature needs {STRONG_TIME}: the client's time in ms since the epoch"
    nonce = ext_fields.get(STRONG_NONCE, "")
    if len(nonce) != _NONCE_HEX or any(c not in "0123456789abcdef" for c in nonce):
        return f"a strong signature needs {STRONG_NONCE}: {_NONCE_HEX} lowercase hex digits"
    off_s = time_ms / 1000 - now_s
    if abs(off_s) > skew_s:
        return (
            f"the request's {STRONG_TIME} is {abs(off_s):.0f} s "
            f"{'ahead of' if off_s > 0 else 'behind'} this server's clock (at most "
            f"{skew_s:.0f} s is accepted): a stale or replayed request, or a clock to set right"
        )
    return None


STRONG_REQUIRED: Final = "requires LedgerMQ's strong signature"
"""The words of the refusal of a request without the strong signature by a server that requires
it: a client (the console) that sees them in a refusal can tell the user what to turn on."""


class NonceCache:
    """The nonces of strong requests accepted in the last ``skew_s``, per access key.

    Bounded: past ``max_nonces``, the oldest remembered nonce is forgotten and every request
    of the same access key whose time is not later than its time is refused from then on (that
    key's floor): what cannot be checked against replays any more is not accepted. The floor is
    per key, so that one account flooding the cache with requests dated ahead of the clock
    cannot make every other account's requests look too old. Clients with fresh clocks never
    notice; memory stays under ``max_nonces`` entries (and one floor per key) whatever the rate.
    """

    def __init__(self, skew_s: float = SKEW_S, max_nonces: int = MAX_NONCES) -> None:
        self.skew_ms = int(skew_s * 1000)
        self.max_nonces = max_nonces
        self._seen: dict[tuple[str, str], int] = {}
        """(access key, nonce) -> the request's time (ms), in the order accepted."""
        self._floors: dict[str, int] = {}
        """Access key -> its requests whose time is at or before this are refused."""

    @property
    def floor_ms(self) -> int:
        """The highest key's floor (-1: no nonce was forgotten while still acceptable)."""
        return max(self._floors.values(), default=-1)

    def __len__(self) -> int:
        return len(self._seen)

    def problem(self, access_key: str, nonce: str, time_ms: int) -> str | None:
        """Why this request may be a replay (None: it is not)."""
        if (access_key, nonce) in self._seen:
            return f"this request's {STRONG_NONCE} was used before: a replayed request"
        if time_ms <= self._floors.get(access_key, -1):
            return (
                f"this request's {STRONG_TIME} is older than the replays this server can "
                "still tell apart: send it again"
            )
        return None

    def remember(self, access_key: str, nonce: str, time_ms: int, now_ms: int) -> None:
        """Remember an accepted request's nonce; forget those no longer acceptable."""
        seen = self._seen
        while seen:
            first = next(iter(seen))
            first_ms = seen[first]
            if first_ms + self.skew_ms >= now_ms and len(seen) < self.max_nonces:
                break
            del seen[first]
            if first_ms + self.skew_ms >= now_ms:  # evicted while still acceptable
                key = first[0]
                self._floors[key] = max(self._floors.get(key, -1), first_ms)
        seen[access_key, nonce] = time_ms
