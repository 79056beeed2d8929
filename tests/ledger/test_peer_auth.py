"""The ledger port with a group secret: only peers that prove they know it are served."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import ConnectError, LedgerRequestError, PeerAuthenticationError
from ledgermq.ledger.client import AsyncLedgerClient
from ledgermq.ledger.config import LedgerConfig
from ledgermq.ledger.peer_auth import PeerAuthenticator, authenticate
from ledgermq.ledger.server import LedgerServer
from ledgermq.net import MemoryNetwork, TcpNetwork
from ledgermq.raft import ResponseCode
from ledgermq.wire import FLAG_RESPONSE, LedgerRequestCode, RemotingCommand
from tests.ledger.test_server_inprocess import _leader

if TYPE_CHECKING:
    from pathlib import Path

    from ledgermq.net import Connection, Listener

pytestmark = pytest.mark.timeout(60)

PEERS = {"n0": ("10.0.0.1", 40911), "n1": ("10.0.0.2", 40911), "n2": ("10.0.0.3", 40911)}
SECRET = "group-g-secret-0123456789"


@dataclass
class Gate:
    """A TCP listener whose frames pass ``PeerAuthenticator``; admitted ones are collected."""

    auth: PeerAuthenticator
    listener: Listener
    served: list[RemotingCommand]

    @property
    def port(self) -> int:
        return self.listener.port

    async def connect(self) -> Connection:
        return await TcpNetwork().connect("127.0.0.1", self.port, _ignore, timeout_s=2)


def _ignore(conn: Connection, cmd: RemotingCommand) -> None:
    pass


async def _gate() -> Gate:
    auth = PeerAuthenticator(SECRET.encode(), "g")
    served: list[RemotingCommand] = []

    def on_frame(conn: Connection, cmd: RemotingCommand) -> None:
        if auth.admit(conn, cmd):
            served.append(cmd)
            conn.send(RemotingCommand(int(ResponseCode.SUCCESS), cmd.opaque, FLAG_RESPONSE))

    listener = await TcpNetwork().serve("127.0.0.1", 0, on_frame)
    return Gate(auth, listener, served)


def test_the_handshake_admits_a_peer_that_knows_the_secret() -> None:
    async def main() -> None:
        gate = await _gate()
        conn = await gate.connect()
        await authenticate(conn, SECRET.encode(), "g", "n1")
        answer = await conn.request(RemotingCommand(int(LedgerRequestCode.APPEND), 0), 2)
        assert answer.code == ResponseCode.SUCCESS
        assert [c.code for c in gate.served] == [LedgerRequestCode.APPEND]
        conn.close()
        gate.listener.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("secret", "group", "complaint"),
    [
        ("another-secret-0123456", "g", "does not know group g's secret"),
        (SECRET, "h", "this is a replica of group g"),
    ],
)
def test_a_wrong_secret_or_group_is_refused(secret: str, group: str, complaint: str) -> None:
    async def main() -> None:
        gate = await _gate()
        conn = await gate.connect()
        with pytest.raises(PeerAuthenticationError, match=complaint):
            await authenticate(conn, secret.encode(), group, "intruder")
        assert gate.served == []
        conn.close()
        gate.listener.close()

    asyncio.run(main())


def test_a_raw_append_is_refused_and_the_connection_closed() -> None:
    async def main() -> None:
        gate = await _gate()
        conn = await gate.connect()
        answer = await conn.request(RemotingCommand(int(LedgerRequestCode.APPEND), 0, body=b"x"), 2)
        assert answer.code == ResponseCode.NOT_AUTHENTICATED
        assert "serves only group g's peers" in (answer.remark or "")
        await asyncio.wait_for(conn.wait_closed(), 2)
        assert gate.served == []
        assert gate.auth.refused == 1
        gate.listener.close()

    asyncio.run(main())


def test_a_proof_replayed_on_another_connection_is_refused() -> None:
    """A recorded AUTH_PROOF is bound to its connection's nonces: elsewhere it fails."""

    async def main() -> None:
        gate = await _gate()
        sent: list[RemotingCommand] = []
        honest = await gate.connect()
        original = honest.request

        async def recording(command: RemotingCommand, timeout_s: float) -> RemotingCommand:
            sent.append(command)
            return await original(command, timeout_s)

        honest.request = recording  # type: ignore[method-assign]
        await authenticate(honest, SECRET.encode(), "g", "n1")
        hello, proof = sent
        thief = await gate.connect()
        assert (await thief.request(hello, 2)).code == ResponseCode.SUCCESS  # a fresh nonce
        assert (await thief.request(proof, 2)).code == ResponseCode.NOT_AUTHENTICATED
        honest.close()
        gate.listener.close()

    asyncio.run(main())


async def _cluster(tmp: Path, network: MemoryNetwork) -> dict[str, LedgerServer]:
    servers = {}
    for node in PEERS:
        config = LedgerConfig(
            group="g",
            self_id=node,
            peers=PEERS,
            store_base_dir=os.fspath(tmp),
            data_segment_bytes=1 << 20,
            peer_secret=SECRET,
        )
        servers[node] = LedgerServer(config, network=network)
        await servers[node].start()
    return servers


def test_a_group_with_a_secret_elects_and_commits_and_outsiders_are_refused(tmp_path: Path) -> None:
    async def main() -> None:
        network = MemoryNetwork()
        servers = await _cluster(tmp_path, network)
        member = AsyncLedgerClient("g", PEERS, network=network, peer_secret=SECRET)
        outsider = AsyncLedgerClient(
            "g", PEERS, network=network, peer_secret="not-the-secret-0123", retry_timeout_s=1
        )
        try:
            await _leader(servers)
            index = await member.append(b"hello")
            assert (await member.get(index)).body == b"hello"
            with pytest.raises(ConnectError):
                await outsider.append(b"forged")
            anonymous = AsyncLedgerClient("g", PEERS, network=network, retry_timeout_s=1)
            try:
                with pytest.raises(LedgerRequestError, match="before authentication"):
                    await anonymous.append(b"raw")
            finally:
                await anonymous.close()
            assert all(s.store.end_index == index for s in servers.values())  # nothing stored
            assert sum(s.peer_auth.refused for s in servers.values() if s.peer_auth) == 1
        finally:
            await member.close()
            await outsider.close()
            for server in servers.values():
                await server.close()

    asyncio.run(asyncio.wait_for(main(), 45))
