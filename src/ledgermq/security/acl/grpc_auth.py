"""The v5 gRPC protocol's request signature (RocketMQ 5 clients' ``authorization`` metadata).

A client sends ``x-mq-date-time: yyyyMMddTHHmmssZ`` and ``authorization: MQv2-HMAC-SHA1
Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>``, where the signature is
the hex HMAC-SHA1 of the date-time under the account's secret key (the official clients'
``Signature.sign``; hex compared without regard to case). The date-time must be within
``SKEW_S`` of the server's clock, so a recorded header stops working. Pure, like the rest of
``ledgermq.security.acl``: the caller gives the time.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "SKEW_S",
    "GrpcAuthorization",
    "date_time_within",
    "grpc_signature",
    "parse_authorization",
]

SKEW_S: Final = 900.0
"""How far (seconds, either way) a request's ``x-mq-date-time`` may be from the server's clock."""
ALGORITHM: Final = "MQv2-HMAC-SHA1"
DATE_TIME_HEADER: Final = "x-mq-date-time"
_FORMAT: Final = "%Y%m%dT%H%M%SZ"
_PART: Final = re.compile(r"\s*([A-Za-z]+)=([^,]*)\s*(?:,|$)")


@dataclass(frozen=True, slots=True)
class GrpcAuthorization:
    access_key: str
    signed_headers: str
    signature: str


def parse_authorization(value: str) -> GrpcAuthorization | None:
    """The parts of an ``authorization`` value, or None when it is not MQv2-HMAC-SHA1's."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        return None
    parts = {m.group(1): m.group(2).strip() for m in _PART.finditer(rest)}
    credential, signature = parts.get("Credential"), parts.get("Signature")
    if not credential or not signature:
        return None
    return GrpcAuthorization(credential, parts.get("SignedHeaders", ""), signature)


def grpc_signature(secret_key: str, date_time: str) -> str:
    """Hex HMAC-SHA1 of ``date_time`` under ``secret_key`` (what the clients send)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def signature_matches(secret_key: str, date_time: str, signature: str) -> bool:
    expected = grpc_signature(secret_key, date_time)
    return hmac.compare_digest(expected.encode(), signature.lower().encode("ascii", "replace"))


def date_time_within(date_time: str, now_s: float, skew_s: float = SKEW_S) -> bool:
    """Whether ``date_time`` (``yyyyMMddTHHmmssZ``, UTC) is within ``skew_s`` of ``now_s``."""
    try:
        moment = datetime.datetime.strptime(date_time, _FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return False
    return abs(moment.timestamp() - now_s) <= skew_s
