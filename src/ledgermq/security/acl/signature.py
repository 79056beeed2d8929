"""Request signatures of RocketMQ's ACL (``AclUtils.combineRequestContent`` / ``calSignature``).

The signed content is the values of every extField except ``Signature`` (``AccessKey`` and
``SecurityToken`` included), ordered by field name as Java's ``TreeMap`` orders strings (UTF-16
code units), concatenated and UTF-8 encoded, followed by the body. The signature is the Base64
of its HMAC-SHA1 under the account's secret key. The server recomputes it from the fields it
received, so a client may sign any set of fields as long as it sends exactly those.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "request_content",
    "sign",
    "sign_request",
    "signature_matches",
]

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"  # noqa: S105 - a field name, not a secret


def _java_order(name: str) -> bytes:
    """Java's ``String.compareTo`` order: by UTF-16 code units (big-endian bytes compare alike)."""
    return name.encode("utf-16-be", "surrogatepass")


def request_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """The bytes a request's signature covers."""
    # Python orders str by code point, Java by UTF-16 code unit: the two agree unless a name
    # holds a character beyond U+FFFF, so the plain sort serves every ASCII header.
    ascii_names = all(name.isascii() for name in ext_fields)
    names = sorted(ext_fields) if ascii_names else sorted(ext_fields, key=_java_order)
    values = "".join([ext_fields[name] for name in names if name != SIGNATURE])
    content = values.encode("utf-8", "surrogatepass")
    return content + body if body else content


def sign(content: bytes, secret_key: str) -> str:
    """Base64 of HMAC-SHA1(secret_key, content)."""
    digest = hmac.new(secret_key.encode(), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_request(
    ext_fields: Mapping[str, str],
    body: bytes | None,
    access_key: str,
    secret_key: str,
    security_token: str | None = None,
) -> dict[str, str]:
    """``ext_fields`` with ``AccessKey`` (and ``SecurityToken``) added and signed, as
    RocketMQ's ``AclClientRPCHook`` sends them."""
    fields = {k: v for k, v in ext_fields.items() if k != SIGNATURE}
    fields[ACCESS_KEY] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN] = security_token
    fields[SIGNATURE] = sign(request_content(fields, body), secret_key)
    return fields


def signature_matches(ext_fields: Mapping[str, str], body: bytes | None, secret_key: str) -> bool:
    """Whether the request's ``Signature`` is right for ``secret_key`` (constant-time compare)."""
    given = ext_fields.get(SIGNATURE)
    if given is None:
        return False
    expected = sign(request_content(ext_fields, body), secret_key)
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass"))
