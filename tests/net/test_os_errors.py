"""map_os_error: the one place OS errors become ours, with one-line messages."""

from __future__ import annotations

import errno
import pickle
import socket

import pytest

from ledgermq.errors import (
    ConnectError,
    ConnectionClosedError,
    LedgerMQError,
    NetworkError,
    RequestTimeoutError,
)
from ledgermq.net import TcpNetwork, map_os_error

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
