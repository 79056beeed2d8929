"""Headers every console response carries, whatever produced it (a page, a redirect, an error,
a static file, the trusted-host refusal): an ASGI middleware outside all the others.

The console acts on a click (delete a topic, reset a group's offsets), so a page of another
site must not be able to show it in a frame and lure a click onto it (clickjacking; with ACL
off nobody even signs in first). ``X-Frame-Options: DENY`` is what older browsers obey,
``Content-Security-Policy: frame-ancestors 'none'`` what current ones do; both are sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "SECURITY_HEADER_FIELDS", "SecurityHeaders"]

SECURITY_HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
)
"""Added to every HTTP response (replacing any of the same name)."""

SECURITY_HEADER_FIELDS: Final = {name.decode(): value.decode() for name, value in SECURITY_HEADERS}
"""The same as a ``headers=`` mapping, for a response made outside the middleware (Starlette
answers an unexpected error from its outermost layer, past every middleware of the app)."""

_NAMES: Final = frozenset(name for name, _ in SECURITY_HEADERS)


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every HTTP response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers", ())
                    if name.lower() not in _NAMES
                ]
                message["headers"] = [*headers, *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)
