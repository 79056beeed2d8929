"""``LedgerClient``: append to and read from a ledger group, wherever its leader is now.

The client keeps one connection per replica, remembers the leader, follows NOT_LEADER hints,
and retries what is safe to retry until ``retry_timeout_s`` runs out:

- NOT_LEADER, LEADER_TRANSFERRING, a connection that cannot be made: the request was not
  applied; it goes to the hinted leader or the next replica.
- LEADER_PENDING_FULL: back off, same replica.
- a timeout, a connection lost after sending, TERM_CHANGED, WAIT_QUORUM_ACK_TIMEOUT: the
  outcome is unknown. Appends are retried too (the issue's and DLedger's client behaviour), so an
  entry can be stored twice, never lost: at-least-once. ``retry_unknown=False`` turns this off
  and raises ``OutcomeUnknownError`` instead.

Everything else (a bad index, an oversized entry, a wrong group) raises at once.

``AsyncLedgerClient`` is the asyncio form; ``LedgerClient`` wraps it for blocking code (it runs
a private event loop in a daemon thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import random
import threading
from typing import TYPE_CHECKING, Final, TypeVar

from ledgermq.errors import (
    ConfigError,
    ConnectionClosedError,
    LeaderPendingFullError,
    LedgerMQError,
    NetworkError,
    NotLeaderError,
    OutcomeUnknownError,
    RequestTimeoutError,
)
from ledgermq.ledger.config import parse_peers
from ledgermq.ledger.peer_auth import authenticate
from ledgermq.ledger.requests import (
    LedgerEntry,
    Metadata,
    decode_entry_body,
    encode_bodies,
    error_for,
)
from ledgermq.net import PeerLink, TcpNetwork
from ledgermq.raft import ResponseCode
from ledgermq.wire import LedgerRequestCode, RemotingCommand

if TYPE_CHECKING:
    from collections.abc import Coroutine, Mapping, Sequence
    from typing import Any

    from ledgermq.net import Connection, Network, TlsClientConfig

__all__ = ["AsyncLedgerClient", "LedgerClient"]

_log = logging.getLogger(__name__)
T = TypeVar("T")
_MIN_BACKOFF_S: Final = 0.02
_MAX_BACKOFF_S: Final = 0.5


class AsyncLedgerClient:
    """A client of one ledger group. Use from one event loop; ``await close()`` at the end.

    ``peer_secret``: the group's ``peerSecret``, when its replicas authenticate connections.
    ``tls``: dial the replicas with TLS (their ``tls.server.mode`` is permissive or enforcing);
    ignored when ``network`` is given.
    """

    def __init__(
        self,
        group: str,
        peers: str | Mapping[str, tuple[str, int]],
        *,
        network: Network | None = None,
        request_timeout_s: float = 3.0,
        retry_timeout_s: float = 15.0,
        retry_unknown: bool = True,
        peer_secret: str | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        self.group = group
        self._on_connect = (
            functools.partial(
                authenticate, secret=peer_secret.encode(), group=group, who=f"client-{os.getpid()}"
            )
            if peer_secret
            else None
        )
        self.peers = dict(parse_peers(peers) if isinstance(peers, str) else peers)
        if not self.peers:
            raise ConfigError("a ledger client needs at least one peer")
        self._network: Network = network or TcpNetwork(tls_client=tls)
        self.request_timeout_s = request_timeout_s
        self.retry_timeout_s = retry_timeout_s
        self.retry_unknown = retry_unknown
        self._links: dict[str, PeerLink] = {}
        self._order = sorted(self.peers)
        self._next = 0
        self.leader: str | None = None
        """The replica this client believes leads (None until it has found out)."""
        self._rng = random.Random()  # noqa: S311 - back-off jitter

    # ------------------------------------------------------------------ API
    async def append(self, body: bytes) -> int:
        """Append one entry; returns its index once it is committed."""
        return (await self.append_batch([body]))[0]

    async def append_batch(self, bodies: Sequence[bytes]) -> list[int]:
        """Append entries in one request (one Raft proposal); returns their indexes."""
        command = RemotingCommand(
            LedgerRequestCode.APPEND, 0, ext_fields={"group": self.group},
            body=encode_bodies(bodies),
        )  # fmt: skip
        response = await self._call(command, unknown_retriable=self.retry_unknown)
        try:
            first = int(response.ext_fields["index"])
            last = int(response.ext_fields["lastIndex"])
        except (KeyError, ValueError):
            raise OutcomeUnknownError("the leader's APPEND answer has no index") from None
        return list(range(first, last + 1))

    async def get(self, index: int) -> LedgerEntry:
        """The committed entry at ``index`` (asked of the leader)."""
        command = RemotingCommand(
            LedgerRequestCode.GET, 0, ext_fields={"group": self.group, "index": str(index)}
        )
        response = await self._call(command, unknown_retriable=True)
        return decode_entry_body(response.body)

    async def metadata(self, node: str | None = None) -> Metadata:
        """``node``'s view of the group (the leader's when ``node`` is None)."""
        command = RemotingCommand(LedgerRequestCode.METADATA, 0, ext_fields={"group": self.group})
        if node is None:
            response = await self._call(command, unknown_retriable=True, any_replica=True)
            meta = Metadata.from_json(response.body)
            if meta.leader is not None and meta.leader != meta.self_id:
                with contextlib.suppress(LedgerMQError):
                    return await self.metadata(meta.leader)
            return meta
        if node not in self.peers:
            raise ConfigError(f"unknown replica {node!r}; peers are {', '.join(self._order)}")
        response = await self._link(node).request(command, self.request_timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise error_for(response.code, response.remark, response.ext_fields)
        return Metadata.from_json(response.body)

    async def transfer_leadership(self, to: str) -> None:
        """Ask the leader to hand leadership to ``to``; returns once ``to`` leads."""
        if to not in self.peers:
            raise ConfigError(f"unknown replica {to!r}; peers are {', '.join(self._order)}")
        body = json.dumps({"group": self.group, "transfereeId": to}).encode()
        command = RemotingCommand(LedgerRequestCode.LEADERSHIP_TRANSFER, 0, body=body)
        await self._call(command, unknown_retriable=False, timeout_s=self.request_timeout_s + 5)
        self.leader = to

    async def close(self) -> None:
        for link in self._links.values():
            link.close()
        for link in self._links.values():
            await link.wait_closed()
        self._links.clear()

    # ------------------------------------------------------------------ plumbing
    def _link(self, node: str) -> PeerLink:
        link = self._links.get(node)
        if link is None:
            host, port = self.peers[node]
            link = PeerLink(
                self._network, host, port, _ignore_unsolicited, on_connect=self._on_connect
            )
            self._links[node] = link
        return link

    def _rotate(self) -> str:
        node = self._order[self._next % len(self._order)]
        self._next += 1
        return node

    async def _call(
        self,
        command: RemotingCommand,
        *,
        unknown_retriable: bool,
        any_replica: bool = False,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """Send ``command`` to the leader until it succeeds or the retry budget is spent."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_timeout_s
        backoff = _MIN_BACKOFF_S
        last_error: LedgerMQError | None = None
        while True:
            target = self.leader if self.leader is not None else self._rotate()
            wait = backoff
            try:
                response = await self._link(target).request(
                    command, timeout_s or self.request_timeout_s
                )
            except NetworkError as exc:
                # A connection that closes with the request in flight leaves the outcome as
                # unknown as a timeout does (PeerLink.request only sends on an open connection,
                # so a ConnectionClosedError here always comes after the request went out).
                unknown = isinstance(exc, RequestTimeoutError | ConnectionClosedError)
                if unknown and not unknown_retriable:
                    raise OutcomeUnknownError(f"{target}: {exc}") from None
                last_error = exc
                self.leader = None
            else:
                if response.code == ResponseCode.SUCCESS:
                    if not any_replica:
                        self.leader = target
                    return response
                error = error_for(response.code, response.remark, response.ext_fields)
                last_error = error
                if isinstance(error, NotLeaderError):
                    hint = error.leader_hint
                    if hint in self.peers and hint != target:
                        self.leader = hint
                        wait = 0.0  # a fresh hint: go there at once
                    else:
                        self.leader = None
                elif isinstance(error, OutcomeUnknownError):
                    if not unknown_retriable:
                        raise error
                    self.leader = None
                elif not error.retriable:
                    raise error
                elif not isinstance(error, LeaderPendingFullError):
                    self.leader = None
            remaining = deadline - loop.time()
            if remaining <= 0:
                assert last_error is not None
                last_error.add_note(f"(the client retried for {self.retry_timeout_s:g} s)")
                raise last_error
            if wait:
                await asyncio.sleep(min(wait * (0.5 + self._rng.random()), remaining))
                backoff = min(backoff * 2, _MAX_BACKOFF_S)


def _ignore_unsolicited(conn: Connection, command: RemotingCommand) -> None:
    _log.debug("ignoring unsolicited frame code %d from %s", command.code, conn.address)


class LedgerClient:
    """The blocking form of ``AsyncLedgerClient`` (same arguments, same methods)."""

    def __init__(self, group: str, peers: str | Mapping[str, tuple[str, int]], **options: Any):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ledgermq-client", daemon=True
        )
        self._thread.start()
        try:
            self._client = AsyncLedgerClient(group, peers, **options)
        except BaseException:
            self._stop_loop()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def leader(self) -> str | None:
        return self._client.leader

    def append(self, body: bytes) -> int:
        return self._run(self._client.append(body))

    def append_batch(self, bodies: Sequence[bytes]) -> list[int]:
        return self._run(self._client.append_batch(bodies))

    def get(self, index: int) -> LedgerEntry:
        return self._run(self._client.get(index))

    def metadata(self, node: str | None = None) -> Metadata:
        return self._run(self._client.metadata(node))

    def transfer_leadership(self, to: str) -> None:
        self._run(self._client.transfer_leadership(to))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
