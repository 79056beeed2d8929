"""Who is signed in to the console: sessions kept in this process, found by an opaque cookie.

When the cluster enforces ACL, each operator signs in with an admin account's access key and
secret key, and every request of theirs is signed with that account. The keys never leave the
server: the browser holds only a random session id (256 bits from ``secrets``), HttpOnly and
SameSite=Strict, which finds the session here. A signed cookie carrying the session itself
(Starlette's ``SessionMiddleware``) would put the account in the browser, readable by anyone
who copies the cookie; an id that is only a key into this table holds nothing, needs no signing
secret and is worthless once the console restarts or the session ends.

Each session has its own form token (against cross-site request forgery) and its own
``ClusterLink`` (an ``Admin`` signing as the account), closed when the session ends: on sign
out, after ``IDLE_S`` without a request, after ``LIFETIME_S`` in all, or when more than
``MAX_SESSIONS`` are open (the least recently used goes).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ledgermq.clock import Clock
    from ledgermq.console.link import ClusterLink

__all__ = ["COOKIE", "IDLE_S", "LIFETIME_S", "MAX_SESSIONS", "Session", "Sessions"]

COOKIE: Final = "ledgermq_console"
IDLE_S: Final = 3600.0
"""A session unused this long ends (an open page polls every 2 s, so only a closed tab idles)."""
LIFETIME_S: Final = 12 * 3600.0
"""A session ends this long after sign-in, used or not: a working day, then sign in again."""
MAX_SESSIONS: Final = 64
"""Sessions kept at once; each holds a connection pool to the cluster."""


@dataclass
class Session:
    """One signed-in browser: its account, form token and link to the cluster."""

    access_key: str
    link: ClusterLink
    started_s: float
    last_seen_s: float
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))


class Sessions:
    """The table of sessions, by id; times from the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._sessions: dict[str, Session] = {}

    def _now(self) -> float:
        return self._clock.monotonic_ms() / 1000

    def __len__(self) -> int:
        return len(self._sessions)

    async def open(self, access_key: str, link: ClusterLink) -> str:
        """A new session for ``link``'s account; its id (the cookie's value)."""
        await self.expire()
        while len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions, key=lambda sid: self._sessions[sid].last_seen_s)
            await self.close(oldest)
        now = self._now()
        session_id = secrets.token_urlsafe(32)
        self._sessions[session_id] = Session(access_key, link, now, now)
        return session_id

    def find(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (touched: it is in use), or None."""
        session = self._sessions.get(session_id or "")
        if session is None:
            return None
        now = self._now()
        if now - session.last_seen_s > IDLE_S or now - session.started_s > LIFETIME_S:
            return None  # expire() closes it
        session.last_seen_s = now
        return session

    def newest_link(self) -> ClusterLink | None:
        """The link of the live session used most recently (not touched by asking), or None:
        what the console's own work (the charts' sampling) signs with when ACL is on."""
        now = self._now()
        live = [
            s
            for s in self._sessions.values()
            if now - s.last_seen_s <= IDLE_S and now - s.started_s <= LIFETIME_S
        ]
        return max(live, key=lambda s: s.last_seen_s).link if live else None

    async def close(self, session_id: str | None) -> None:
        """End ``session_id`` (unknown ids are ignored: signing out twice is harmless)."""
        session = self._sessions.pop(session_id or "", None)
        if session is not None:
            await session.link.close()

    async def expire(self) -> None:
        """Close the sessions that idled or lived too long."""
        now = self._now()
        for session_id, session in list(self._sessions.items()):
            if now - session.last_seen_s > IDLE_S or now - session.started_s > LIFETIME_S:
                await self.close(session_id)

    async def close_all(self) -> None:
        for session_id in list(self._sessions):
            await self.close(session_id)
