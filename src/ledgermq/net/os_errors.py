"""The one place where operating-system errors become LedgerMQ errors (STYLE.md section 7.1).

Callers above ``net`` then handle three cases by meaning (could not connect, connection gone,
no answer in time) instead of a dozen ``OSError`` subclasses and errno values, and every message
has the same one-line shape: ``cannot connect to 127.0.0.1:40911: connection refused``.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
from typing import Final

from ledgermq.errors import ConnectError, ConnectionClosedError, NetworkError

__all__ = ["describe_os_error", "describe_tls_error", "format_address", "map_os_error"]

# Errors that mean "no connection was made", whatever the caller was doing.
_CONNECT_ERRNOS = frozenset(
    {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}
)


def format_address(host: str, port: int) -> str:
    """``host:port``, with IPv6 literals in brackets as in URLs."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def describe_os_error(exc: OSError, *, server: bool = False) -> str:
    """A short lower-case reason for ``exc`` (no errno numbers, no Python class names);
    ``server``: it was raised on the server's side of a TLS handshake."""
    if isinstance(exc, ssl.SSLError):
        return describe_tls_error(exc, server=server)
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, BrokenPipeError):
        return "broken pipe (the peer closed the connection)"
    if isinstance(exc, ConnectionAbortedError):
        return "connection aborted"
    if isinstance(exc, TimeoutError):
        return "timed out"
    # Without an errno, asyncio has joined the errors of several addresses (IPv4 and IPv6).
    reason = os.strerror(exc.errno) if exc.errno is not None else str(exc) or type(exc).__name__
    reason = " ".join(reason.split())  # one line, whatever the platform put in it
    return reason[:1].lower() + reason[1:]


_TLS_HINTS: Final = (
    (
        "CERTIFICATE_REQUIRED",
        (
            "the server requires a client certificate: give one (--tls-cert and --tls-key, "
            "tls.client.certPath and tls.client.keyPath)"
        ),
    ),
    (
        "UNKNOWN_CA",
        "the server does not trust our client certificate's CA (tls.server.trustCertPath)",
    ),
    (
        "BAD_CERTIFICATE",
        "the server refused our client certificate (tls.server.trustCertPath)",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "the other side does not speak TLS (a plain port: tls.server.mode=disabled)",
    ),
    (
        "UNEXPECTED_EOF",
        (
            "the other side closed the connection during the TLS handshake (a plain port, "
            "tls.server.mode=disabled, or it refused our certificate)"
        ),
    ),
)
"""OpenSSL reasons (substrings) -> what they mean for a client, whoever reads the message."""

_SERVER_TLS_HINTS: Final = (
    (
        "UNKNOWN_CA",
        (
            "the client does not trust the CA of this server's certificate: give the client "
            "that CA (its --tls-ca, tls.client.trustCertPath)"
        ),
    ),
    (
        "CERTIFICATE_UNKNOWN",
        (
            "the client refused this server's certificate (tls.server.certPath must name the "
            "address the client dials and chain to a CA it trusts)"
        ),
    ),
    (
        "BAD_CERTIFICATE",
        (
            "the client refused this server's certificate (tls.server.certPath must name the "
            "address the client dials and chain to a CA it trusts)"
        ),
    ),
    (
        "UNEXPECTED_EOF",
        (
            "the client closed the connection during the TLS handshake (it may have refused "
            "this server's certificate, tls.server.certPath)"
        ),
    ),
    (
        "WRONG_VERSION_NUMBER",
        "the client does not speak TLS",
    ),
    (
        "UNSUPPORTED_PROTOCOL",
        "the client offers no TLS version this server accepts (TLS 1.2 and 1.3 only)",
    ),
    (
        "VERSION",
        "the client offers no TLS version this server accepts (TLS 1.2 and 1.3 only)",
    ),
    (
        "NO_SHARED_CIPHER",
        "the client offers no cipher this server accepts",
    ),
)
"""The same on the server's side of a handshake: there the certificate checked is the client's
(issue 25 item 15), and an alert received says what the client thought of ours."""


def describe_tls_error(exc: ssl.SSLError, *, server: bool = False) -> str:
    """``describe_os_error`` for TLS: what failed and, where known, which setting to look at,
    seen from the side that raised it (``server``: a server's handshake with a client)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        if server:
            return (
                "TLS: the client's certificate was refused: "
                f"{exc.verify_message or exc.reason} (this server trusts only the CAs in "
                "tls.server.trustCertPath: add the client certificate's CA there, or give the "
                "client a certificate one of them signed)"
            )
        return (
            f"TLS: the server's certificate was refused: {exc.verify_message or exc.reason} "
            "(trust its CA with --tls-ca, tls.client.trustCertPath)"
        )
    reason = str(exc.reason or exc.strerror or exc)
    for marker, hint in _SERVER_TLS_HINTS if server else _TLS_HINTS:
        if marker in reason.upper():
            return f"TLS handshake failed ({reason.lower()}): {hint}"
    return f"TLS failed: {reason.lower()}"


def map_os_error(
    exc: OSError, address: str, *, connecting: bool = False, tls: bool = False
) -> NetworkError:
    """Our error for ``exc``, raised while connecting to or talking with ``address``.

    ``connecting`` says whether the connection was still being made; if so the result is always
    a ``ConnectError`` (nothing was sent). On an established connection refusals still mean
    ``ConnectError`` and everything else means the connection is gone. ``tls``: the connection
    was being made with TLS, so a reset or an early close most likely means the server does not
    speak it.
    """
    reason = describe_os_error(exc)
    if (
        tls
        and connecting
        and isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError)
    ):
        reason += (
            " during the TLS handshake (does the server serve TLS? tls.server.mode must be "
            "permissive or enforcing)"
        )
    if (
        connecting
        or isinstance(exc, ConnectionRefusedError | socket.gaierror)
        or exc.errno in _CONNECT_ERRNOS
    ):
        return ConnectError(f"cannot connect to {address}: {reason}", address)
    return ConnectionClosedError(f"connection to {address} lost: {reason}", address)
