"""map_os_error: the one place OS errors become ours, with one-line messages."""

from __future__ import annotations

import errno
import pickle
import socket
import ssl

import pytest

from ledgermq.errors import (
    ConnectError,
    ConnectionClosedError,
    LedgerMQError,
    NetworkError,
    RequestTimeoutError,
)
from ledgermq.net import TcpNetwork, map_os_error
from ledgermq.net.os_errors import describe_os_error

from .conftest import HOST, arun, ignore

pytestmark = pytest.mark.timeout(10)

ADDRESS = "127.0.0.1:40911"


@pytest.mark.parametrize(
    ("exc", "connecting", "kind", "message"),
    [
        (
            ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
            False,
            ConnectError,
            "cannot connect to 127.0.0.1:40911: connection refused",
        ),
        (
            ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
            False,
            ConnectionClosedError,
            "connection to 127.0.0.1:40911 lost: connection reset by peer",
        ),
        (
            BrokenPipeError(errno.EPIPE, "Broken pipe"),
            False,
            ConnectionClosedError,
            "connection to 127.0.0.1:40911 lost: broken pipe (the peer closed the connection)",
        ),
        (
            TimeoutError(),
            True,
            ConnectError,
            "cannot connect to 127.0.0.1:40911: timed out",
        ),
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            True,
            ConnectError,
            (
                "cannot connect to 127.0.0.1:40911: cannot resolve the host name "
                "(Name or service not known)"
            ),
        ),
        (
            OSError(errno.ENETUNREACH, "Network is unreachable"),
            False,
            ConnectError,
            "cannot connect to 127.0.0.1:40911: network is unreachable",
        ),
        (
            OSError(errno.EIO, "I/O error"),
            False,
            ConnectionClosedError,
            "connection to 127.0.0.1:40911 lost: input/output error",
        ),
        (
            OSError("Multiple exceptions: [Errno 111] Connect call failed,\n [Errno 99] x"),
            True,
            ConnectError,
            (
                "cannot connect to 127.0.0.1:40911: multiple exceptions: [Errno 111] Connect "
                "call failed, [Errno 99] x"
            ),
        ),
    ],
)
def test_messages_and_classes(
    exc: OSError, connecting: bool, kind: type[NetworkError], message: str
) -> None:
    mapped = map_os_error(exc, ADDRESS, connecting=connecting)
    assert type(mapped) is kind
    assert str(mapped) == message
    assert mapped.address == ADDRESS


def test_network_errors_are_retriable_and_pickle() -> None:
    for kind in (ConnectError, ConnectionClosedError, RequestTimeoutError):
        err = kind("boom", ADDRESS)
        assert isinstance(err, NetworkError)
        assert isinstance(err, LedgerMQError)
        assert err.retriable
        copy = pickle.loads(pickle.dumps(err))
        assert (type(copy), str(copy), copy.address) == (kind, "boom", ADDRESS)
    assert NetworkError("no address").address is None


def test_tcp_connect_to_a_closed_port_is_one_line_connect_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, now closed
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        with pytest.raises(ConnectError) as info:
            await TcpNetwork().connect(HOST, port, ignore, timeout_s=1)
        assert str(info.value) == f"cannot connect to {HOST}:{port}: connection refused"
        assert info.value.address == f"{HOST}:{port}"

    arun(main())


def test_tcp_serve_on_a_busy_port_is_a_network_error() -> None:
    async def main() -> None:
        network = TcpNetwork()
        with socket.socket() as busy:
            busy.bind((HOST, 0))
            busy.listen()
            port = busy.getsockname()[1]
            with pytest.raises(NetworkError, match=f"cannot listen on {HOST}:{port}: address"):
                await network.serve(HOST, port, ignore)

    arun(main())


def _tls_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    exc.reason = reason
    return exc


def test_a_server_reads_tls_failures_from_its_own_side() -> None:
    """Issue 25 item 15: a server's handshake failure named the *server's* certificate and gave
    a client's advice (--tls-ca). On the server's side the certificate checked is the client's,
    and an alert received is the client's opinion of ours."""
    refused = ssl.SSLCertVerificationError(1, "certificate verify failed")
    refused.verify_message = "unable to get local issuer certificate"
    server_view = describe_os_error(refused, server=True)
    assert server_view.startswith(
        "TLS: the client's certificate was refused: unable to get local issuer certificate"
    )
    assert "tls.server.trustCertPath" in server_view
    assert "--tls-ca" not in server_view
    assert describe_os_error(refused).startswith("TLS: the server's certificate was refused")
    unknown_ca = describe_os_error(_tls_error("TLSV1_ALERT_UNKNOWN_CA"), server=True)
    assert "the client does not trust the CA of this server's certificate" in unknown_ca
    client_view = describe_os_error(_tls_error("TLSV1_ALERT_UNKNOWN_CA"))
    assert "the server does not trust our client certificate's CA" in client_view
