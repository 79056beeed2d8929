"""Whether the console asks its visitors to sign in, and checking an account that signs in.

A cluster whose brokers enforce ACL (``aclEnable=true``) refuses unsigned requests, so the
console asks each operator for an admin account (access key and secret key, as in
``plain_acl.yml``) and signs their requests with it, rather than acting for everyone with one
account of its own. ``--acl`` says whether that is so:

- ``auto`` (the default): the console finds out. If it was given an account (``--access-key``,
  ``--credentials-file``, ``LEDGERMQ_*``), it signs with that one and asks nobody, as before.
  Otherwise it asks a broker for its runtime info without signing: NO_PERMISSION means ACL is
  on. A cluster that cannot be reached is asked again at the next request; a page refused with
  NO_PERMISSION later (ACL turned on since) turns sign-in on.
- ``on``: always ask (no probe; an account given on the command line is not used).
- ``off``: never ask (a cluster without ACL, or one that trusts the console's address).

A sign-in is checked against the cluster with a signed admin request that changes nothing
(``Admin.check_admin_account``): a wrong key or secret and an account that is not an admin
are each refused with their own message, never with the secret.
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING, Final

from ledgermq.client import Credentials
from ledgermq.client.credentials import STRONG_SIGNATURE_ENV, strong_signature_from_env
from ledgermq.errors import LedgerMQError, MQResponseError
from ledgermq.security.acl.strong import STRONG_REQUIRED
from ledgermq.wire import MQResponseCode

if TYPE_CHECKING:
    from ledgermq.client import Admin
    from ledgermq.clock import Clock
    from ledgermq.console.link import ClusterLink

__all__ = [
    "MAX_KEY_CHARS",
    "PROBE_EVERY_S",
    "AclMode",
    "ConsoleAccess",
    "SignInRefusedError",
    "is_refusal",
]

MAX_KEY_CHARS: Final = 256
"""Longest access key or secret key accepted from the sign-in form."""


REFUSED_DELAY_S: Final = 0.5
"""How long a refused sign-in holds its source's sign-in lock: the sign-ins from one address
go one at a time, so whoever guesses secrets from it gets two refusals a second at most, while
an operator at another address is not kept waiting behind them."""
PROBE_EVERY_S: Final = 5.0
"""While a probe could not tell (no broker answered), how long until the next one: a page of
a cluster that is down costs its own error, not a probe as well each time."""


class AclMode(enum.StrEnum):
    """``--acl``: whether visitors sign in (see the module docstring)."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class SignInRefusedError(LedgerMQError):
    """The account may not use the console; the message says why, for the sign-in page."""


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is the cluster's NO_PERMISSION (the ACL refused a request)."""
    return isinstance(exc, MQResponseError) and exc.code == MQResponseCode.NO_PERMISSION


class _SourceLock:
    """The sign-in lock of one source address, and how many sign-ins hold or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class ConsoleAccess:
    """Sign-in policy for one console: ``base`` is the link started with the console."""

    def __init__(self, base: ClusterLink, clock: Clock, mode: AclMode = AclMode.AUTO) -> None:
        self._base = base
        self._clock = clock
        self.mode = mode
        self._detected: bool | None = None
        """AUTO: what the probe found (None: not known yet)."""
        self._next_probe_s = float("-inf")
        self._sign_in_locks: dict[str, _SourceLock] = {}
        """One lock per source address with a sign-in under way or waiting (removed when its
        last one ends, so the table holds only the sources signing in now)."""

    async def sign_in_required(self) -> bool:
        """Whether a visitor without a session must sign in first."""
        if self.mode is not AclMode.AUTO:
            return self.mode is AclMode.ON
        if self._base.credentials is not None:
            return False
        now = self._clock.monotonic_ms() / 1000
        if self._detected is None and now >= self._next_probe_s:
            self._next_probe_s = now + PROBE_EVERY_S
            self._detected = await self._probe()
        return bool(self._detected)

    def refused(self) -> None:
        """An unsigned page was refused with NO_PERMISSION: the cluster may enforce ACL now,
        so the next request asks again (a TLS-only port also answers NO_PERMISSION, and the
        probe tells the two apart)."""
        if self.mode is AclMode.AUTO and self._base.credentials is None:
            self._detected = None
            self._next_probe_s = float("-inf")

    async def _probe(self) -> bool | None:
        """True: an unsigned request to a broker was refused (ACL on); False: answered;
        None: no broker could be asked (ask again next time)."""
        # its own unsigned connections, closed after: a refused connection may be closed by
        # the server (a TLS-only port does), and must not be the one the next page reuses
        link = self._base.signed_as(None)
        try:
            await link.start()
            return await self._ask(link.admin)
        finally:
            await link.close()

    @staticmethod
    async def _ask(admin: Admin) -> bool | None:
        try:
            info = await admin.cluster_info()  # open on an ACL NameServer, as in RocketMQ
        except (LedgerMQError, OSError, TimeoutError):
            return None
        addresses = [
            address
            for data in info.broker_addr_table.values()
            for address in data.broker_addrs.values()
        ]
        if not addresses:
            return None
        try:
            await admin.broker_runtime_info(addresses[0])
        except MQResponseError as exc:
            # a TLS-only port refuses a plain connection with NO_PERMISSION too: that is not ACL
            acl = exc.code == MQResponseCode.NO_PERMISSION and "TLS" not in str(exc)
            return True if acl else None
        except (LedgerMQError, OSError, TimeoutError):
            return None
        return False

    async def sign_in(self, access_key: str, secret_key: str, source: str = "") -> ClusterLink:
        """A started link signing as the account, once the cluster confirmed it is an admin.
        One sign-in at a time per ``source`` (the visitor's address); a refused one keeps that
        source's next ones waiting ``REFUSED_DELAY_S``, and nobody else's.

        Raises:
            SignInRefusedError: empty or overlong keys, wrong keys, not an admin account.
            LedgerMQError / OSError: the cluster could not be asked.
        """
        lock = self._sign_in_locks.get(source)
        if lock is None:
            lock = self._sign_in_locks[source] = _SourceLock()
        lock.users += 1
        try:
            async with lock.lock:
                try:
                    return await self._sign_in(access_key, secret_key)
                except SignInRefusedError:
                    await asyncio.sleep(REFUSED_DELAY_S)
                    raise
        finally:
            lock.users -= 1
            if lock.users == 0:
                del self._sign_in_locks[source]

    async def _sign_in(self, access_key: str, secret_key: str) -> ClusterLink:
        access_key = access_key.strip()
        if not access_key or not secret_key:
            raise SignInRefusedError("enter the access key and the secret key of an admin account")
        if len(access_key) > MAX_KEY_CHARS or len(secret_key) > MAX_KEY_CHARS:
            raise SignInRefusedError(
                f"an access key or secret key has at most {MAX_KEY_CHARS} characters"
            )
        credentials = Credentials(
            access_key, secret_key, strong_signature=strong_signature_from_env()
        )
        link = self._base.signed_as(credentials)
        try:
            await link.start()
            await link.admin.check_admin_account()
        except MQResponseError as exc:
            await link.close()
            if exc.code != MQResponseCode.NO_PERMISSION:
                raise
            if STRONG_REQUIRED in str(exc):
                raise SignInRefusedError(
                    "the cluster requires LedgerMQ's strong signature "
                    f"(aclRequireStrongSignature=true): start the console with "
                    f"{STRONG_SIGNATURE_ENV}=true"
                ) from None
            if "admin" in str(exc).replace(access_key, "").lower():
                raise SignInRefusedError(
                    f"{access_key} is not an admin account: the console needs one "
                    "(admin: true in the brokers' plain_acl.yml)"
                ) from None
            raise SignInRefusedError(
                "the access key and secret key do not match an account of the cluster"
            ) from None
        except BaseException:
            await link.close()
            raise
        return link
