"""Backing off after failed sign-ins, per source address and per access key.

A wrong secret costs an attacker nothing but a round trip, and one connection could try 2,871
secrets a second. So every failed sign-in (a request whose access key is unknown or whose
signature is wrong, ``Decision.authenticated`` False) counts against its source IP and against
the access key it named. ``key_failures`` of them for one key, or ``source_failures`` from one
source (more: a host may run many clients, one of them misconfigured), within ``window_s``
lock that key, or that source, for ``first_lock_s``, doubling at each new lock up to a bound,
and forgotten after a quiet spell; while locked, requests are answered NO_PERMISSION with a
remark saying how long to wait, before any signature is computed. Nothing sleeps: a refusal
is an answer like any other.

The bounds are what keep the throttle from being a weapon. A source IP locks for at most
``max_source_lock_s`` (only its own guesses lock it), an access key for at most
``max_key_lock_s``, and neither lock applies to an (access key, source) pair that signed in
correctly within ``trusted_for_s``: an attacker guessing a key from elsewhere cannot lock out
the key's legitimate clients, and one misconfigured client (a wrong secret, retrying) does not
lock out the other clients of its host (or of the NAT it is behind). Memory is bounded: at
most ``max_entries`` records. When the table is full, the records that hold no lock and no
failure within ``window_s`` are forgotten at once (one pass, so a flood of new names costs one
scan per table's worth); if that frees nothing, the oldest record without a lock goes. A lock
is forgotten only when every record holds one: an attacker who fills the table with guesses at
random keys does not free the key it is after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ledgermq.clock import Clock

__all__ = ["SignInThrottle", "ThrottleSettings"]


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """The throttle's thresholds (seconds and counts)."""

    key_failures: int = 5
    """Failed sign-ins for one access key within ``window_s`` that lock the key."""
    source_failures: int = 20
    """Failed sign-ins from one source IP within ``window_s`` that lock the source."""
    window_s: float = 10.0
    first_lock_s: float = 1.0
    """The first lock; each later one (before a quiet spell) is twice the one before."""
    max_source_lock_s: float = 300.0
    max_key_lock_s: float = 60.0
    quiet_s: float = 600.0
    """No failure for this long: the next lock is ``first_lock_s`` again."""
    trusted_for_s: float = 3600.0
    """How long a correct sign-in exempts its (source, key) from the key's lock."""
    max_entries: int = 10_000


class _Record:
    """The failures of one source or one key."""

    __slots__ = ("count", "last_failure_s", "locked_until_s", "strikes", "window_start_s")

    def __init__(self, now_s: float) -> None:
        self.count = 0
        self.window_start_s = now_s
        self.last_failure_s = now_s
        self.locked_until_s = 0.0
        self.strikes = 0
        """Locks so far: the next one is ``first_lock_s * 2 ** strikes``."""


_SOURCE: Final = "source"
_KEY: Final = "key"


class SignInThrottle:
    """Failed sign-ins per source IP and per access key (see the module docstring)."""

    def __init__(self, clock: Clock, settings: ThrottleSettings | None = None) -> None:
        self._clock = clock
        self.settings = settings or ThrottleSettings()
        self._records: dict[tuple[str, str], _Record] = {}
        self._trusted: dict[tuple[str, str], float] = {}
        """(access key, source IP) -> when it last signed in correctly (seconds)."""
        self.locked_out = 0
        """Requests refused because their source or key was locked (a metric)."""

    def _now_s(self) -> float:
        return self._clock.monotonic_ms() / 1000

    def refusal(self, source: str, access_key: str | None) -> str | None:
        """The remark to refuse with when ``source`` or ``access_key`` is locked, else None."""
        if not self._records:
            return None  # the usual case: nobody failed lately
        now = self._now_s()
        record = self._records.get((_SOURCE, source))
        if (
            record is not None
            and record.locked_until_s > now
            and not (access_key and self._is_trusted(access_key, source, now))
        ):
            self.locked_out += 1
            return (
                f"too many failed sign-ins from {source}: wait "
                f"{math.ceil(record.locked_until_s - now)} s before trying again"
            )
        if access_key:
            record = self._records.get((_KEY, access_key))
            if (
                record is not None
                and record.locked_until_s > now
                and not self._is_trusted(access_key, source, now)
            ):
                self.locked_out += 1
                return (
                    f"too many failed sign-ins for access key {access_key}: wait "
                    f"{math.ceil(record.locked_until_s - now)} s before trying again"
                )
        return None

    def _is_trusted(self, access_key: str, source: str, now: float) -> bool:
        since = self._trusted.get((access_key, source))
        return since is not None and now - since < self.settings.trusted_for_s

    def failed(self, source: str, access_key: str | None) -> None:
        """A sign-in from ``source`` as ``access_key`` was refused (unknown key, bad signature)."""
        now = self._now_s()
        settings = self.settings
        self._count(_SOURCE, source, now, settings.source_failures, settings.max_source_lock_s)
        if access_key:
            self._count(_KEY, access_key, now, settings.key_failures, settings.max_key_lock_s)

    def succeeded(self, source: str, access_key: str | None) -> None:
        """A request from ``source`` signed correctly as ``access_key``."""
        if access_key:
            trusted = self._trusted
            if len(trusted) >= self.settings.max_entries and (access_key, source) not in trusted:
                del trusted[next(iter(trusted))]
            trusted[access_key, source] = self._now_s()
        # the source's failures stay counted: a good client of a host does not wipe the slate
        # of a bad one there (the good one is exempt from the lock instead)

    def _count(self, kind: str, name: str, now: float, failures: int, max_lock_s: float) -> None:
        settings = self.settings
        records = self._records
        record = records.get((kind, name))
        if record is None:
            if len(records) >= settings.max_entries:
                self._make_room(now)
            record = records[kind, name] = _Record(now)
        if now - record.last_failure_s > settings.quiet_s:
            record.strikes = 0
        if now - record.window_start_s > settings.window_s:
            record.window_start_s = now
            record.count = 0
        record.count += 1
        record.last_failure_s = now
        if record.count >= failures:
            lock_s = min(settings.first_lock_s * 2**record.strikes, max_lock_s)
            record.locked_until_s = now + lock_s
            record.strikes += 1
            record.count = 0
            record.window_start_s = now

    def _make_room(self, now: float) -> None:
        """Forget what no longer matters, or else the oldest record without a lock (the
        module docstring)."""
        records = self._records
        window_s = self.settings.window_s
        idle = [
            key
            for key, record in records.items()
            if record.locked_until_s <= now and now - record.last_failure_s > window_s
        ]
        for key in idle:
            del records[key]
        if len(records) < self.settings.max_entries:
            return
        unlocked = next((k for k, r in records.items() if r.locked_until_s <= now), None)
        del records[unlocked if unlocked is not None else next(iter(records))]
