"""The console's sign-in for ACL clusters, in-process with Starlette's TestClient and a stand-in
cluster that answers as an ACL broker does (NO_PERMISSION with RocketMQ's remarks); the real
brokers are in test_browser.py's ACL test.

What is checked: every page and action sends an unsigned visitor to the sign-in page; a wrong
secret and a non-admin account are refused with their own message; a signed-in operator's
actions go out signed as their account; the cookie holds neither key; forms need the session's
token and are refused from another site; signing out ends the session.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, cast

import pytest

pytest.importorskip("httpx2", reason="Starlette's TestClient needs httpx")
pytest.importorskip("starlette", reason="the console extra is not installed")

from starlette.testclient import TestClient

from ledgermq.cli.main import build_parser
from ledgermq.client import Credentials
from ledgermq.console.access import REFUSED_DELAY_S, AclMode, ConsoleAccess
from ledgermq.console.app import create_app
from ledgermq.console.link import ClusterLink
from ledgermq.console.sessions import COOKIE, IDLE_S
from ledgermq.errors import MQResponseError, NetworkError
from ledgermq.wire import MQResponseCode
from ledgermq.wire.route import BrokerData, ClusterInfo
from tests.console.test_rates import FakeClock

if TYPE_CHECKING:
    from ledgermq.client import Admin

ACCOUNTS = {
    "ops-admin": ("ops-admin-secret", True),
    "app": ("app-secret", False),
    "strict-admin": ("strict-secret", True),
}
STRICT = "strict-admin"
"""An account whose cluster requires LedgerMQ's strong signature (aclRequireStrongSignature)."""
BROKER = "127.0.0.1:10911"


def _refused(remark: str) -> MQResponseError:
    return MQResponseError(
        f"{BROKER} answered 16 NO_PERMISSION: {remark}", MQResponseCode.NO_PERMISSION, BROKER
    )


class FakeAdmin:
    """The calls the sign-in makes, answered as an ACL broker answers ``credentials``."""

    def __init__(self, credentials: Credentials | None, calls: list[tuple[str, str]]) -> None:
        self.credentials = credentials
        self.calls = calls

    def _account(self) -> tuple[str, bool]:
        """The account if the ACL lets it through; NO_PERMISSION as RocketMQ words it."""
        if self.credentials is None:
            raise _refused(
                "GET_BROKER_RUNTIME_INFO needs credentials: ACL is on and it is not signed"
            )
        if self.credentials.access_key == STRICT and not self.credentials.strong_signature:
            raise _refused(
                "this server requires LedgerMQ's strong signature (aclRequireStrongSignature="
                "true): sign with Credentials(..., strong_signature=True)"
            )
        secret, admin = ACCOUNTS.get(self.credentials.access_key, ("", False))
        if secret != self.credentials.secret_key:
            raise _refused("the AccessKey and Signature do not match an account")
        return self.credentials.access_key, admin

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: BROKER})},
            {"DefaultCluster": ("broker-a",)},
        )

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        self._account()
        return {"brokerRole": "ASYNC_MASTER"}

    async def check_admin_account(self) -> None:
        key, admin = self._account()
        if not admin:
            raise _refused(f"UPDATE_AND_CREATE_TOPIC needs an admin account; {key} is not")

    async def create_topic(self, topic: str, queue_nums: int, **_: Any) -> list[str]:
        key, admin = self._account()
        assert admin
        self.calls.append(("create_topic", f"{topic} by {key}"))
        return ["broker-a"]


class FakeLink(ClusterLink):
    """A ClusterLink whose Admin is the stand-in; ``signed_as`` makes another."""

    def __init__(
        self, credentials: Credentials | None = None, calls: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__("127.0.0.1:9876", credentials=credentials)
        self.calls: list[tuple[str, str]] = [] if calls is None else calls
        self.admin = cast("Admin", FakeAdmin(credentials, self.calls))
        self.closed = False

    def signed_as(self, credentials: Credentials | None) -> ClusterLink:
        return FakeLink(credentials, self.calls)

    async def close(self) -> None:
        self.closed = True


def _client(
    acl: AclMode = AclMode.AUTO, link: FakeLink | None = None, clock: FakeClock | None = None
) -> tuple[TestClient, FakeLink]:
    link = link or FakeLink()
    app = create_app(link, clock=clock or FakeClock(), acl=acl)
    return TestClient(app, follow_redirects=False), link


def _token(page: str) -> str:
    marker = 'name="token" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


def _sign_in(client: TestClient, key: str, secret: str, next_: str = "/") -> Any:
    page = client.get("/login").text
    return client.post(
        "/login",
        data={"token": _token(page), "access_key": key, "secret_key": secret, "next": next_},
    )


def test_acl_detected_every_page_and_action_sends_to_the_sign_in_page() -> None:
    client, _ = _client()
    for path in ("/", "/topics", "/groups/g1", "/messages?by=key&topic=T&key=k"):
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=/"), path
    response = client.post("/topics/create", data={"topic": "T", "token": "x"})
    assert (response.status_code, response.headers["location"]) == (303, "/login")
    live = client.get("/live/topics")
    assert live.status_code == 401
    assert "Signed out" in live.text
    page = client.get("/login")
    assert page.status_code == 200
    assert 'name="secret_key" type="password"' in page.text
    assert "Traceback" not in page.text


def test_a_wrong_secret_and_a_non_admin_account_are_refused_each_with_its_message() -> None:
    client, _ = _client()
    started = time.monotonic()
    wrong = _sign_in(client, "ops-admin", "not-the-secret")
    assert time.monotonic() - started >= REFUSED_DELAY_S  # guesses are slowed down
    assert wrong.status_code == 303
    assert COOKIE not in wrong.cookies
    page = client.get(wrong.headers["location"]).text
    assert "not signed in: the access key and secret key do not match an account" in page
    assert "not-the-secret" not in page
    unknown = client.get(_sign_in(client, "nobody", "x").headers["location"]).text
    assert "do not match an account" in unknown
    app = client.get(_sign_in(client, "app", "app-secret").headers["location"]).text
    assert "not signed in: app is not an admin account: the console needs one" in app
    empty = client.get(_sign_in(client, "ops-admin", "").headers["location"]).text
    assert "enter the access key and the secret key" in empty
    assert client.get("/topics").status_code == 303  # still nobody signed in


def test_an_admin_signs_in_acts_as_its_account_and_signs_out() -> None:
    client, link = _client()
    signed = _sign_in(client, "ops-admin", "ops-admin-secret", next_="/messages")
    assert (signed.status_code, signed.headers["location"]) == (303, "/messages")
    cookie = signed.headers["set-cookie"]
    assert "httponly" in cookie.lower()
    assert "samesite=strict" in cookie.lower()
    session_id = signed.cookies[COOKIE]
    assert "ops-admin" not in session_id
    assert "secret" not in session_id
    page = client.get("/messages")
    assert page.status_code == 200
    assert 'Signed in as <strong id="account">ops-admin</strong>' in page.text
    token = _token(page.text)

    created = client.post("/topics/create", data={"token": token, "topic": "Orders", "queues": "4"})
    assert created.status_code == 303
    assert created.headers["location"].startswith("/topics/Orders?notice=")
    assert link.calls == [("create_topic", "Orders by ops-admin")]

    stale = client.post("/topics/create", data={"token": "not-it", "topic": "Other"})
    assert stale.status_code == 403
    foreign = client.post(
        "/topics/create",
        data={"token": token, "topic": "Other"},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert "posted from another web site" in foreign.text
    assert link.calls == [("create_topic", "Orders by ops-admin")]

    out = client.post("/logout", data={"token": token})
    assert (out.status_code, out.headers["location"]) == (303, "/login?notice=signed+out")
    client.cookies.clear()
    client.cookies.set(COOKIE, session_id)  # the old cookie, kept by a copy: no longer valid
    assert client.get("/messages").status_code == 303


def test_signing_in_again_ends_the_previous_session() -> None:
    client, _ = _client()
    first = _sign_in(client, "ops-admin", "ops-admin-secret").cookies[COOKIE]
    second = _sign_in(client, "ops-admin", "ops-admin-secret").cookies[COOKIE]
    assert first != second
    assert client.get("/messages").status_code == 200
    client.cookies.clear()
    client.cookies.set(COOKIE, first)
    assert client.get("/messages").status_code == 303


def test_the_sign_in_never_redirects_to_another_site() -> None:
    client, _ = _client()
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        response = _sign_in(client, "ops-admin", "ops-admin-secret", next_=target)
        assert response.headers["location"] == "/", target


def test_an_idle_session_ends() -> None:
    clock = FakeClock()
    client, _ = _client(clock=clock)
    _sign_in(client, "ops-admin", "ops-admin-secret")
    assert client.get("/messages").status_code == 200
    clock.ms += int(IDLE_S * 1000) + 1000
    assert client.get("/messages").status_code == 303


def test_acl_off_and_a_console_account_ask_nobody() -> None:
    client, _ = _client(AclMode.OFF)
    assert client.get("/messages").status_code == 200
    assert client.get("/login").headers["location"] == "/"
    client, _ = _client(link=FakeLink(Credentials("ops-admin", "ops-admin-secret")))
    page = client.get("/messages")
    assert page.status_code == 200
    assert "Signed in as" not in page.text


def test_acl_on_asks_without_probing_and_an_unreachable_cluster_is_said() -> None:
    class Unreachable(FakeLink):
        def signed_as(self, credentials: Credentials | None) -> ClusterLink:
            link = FakeLink(credentials)

            async def down() -> None:
                raise NetworkError("connection refused", address=BROKER)

            link.admin.check_admin_account = down  # type: ignore[method-assign]
            return link

    client, _ = _client(AclMode.ON, link=Unreachable())
    assert client.get("/").status_code == 303
    page = client.get(_sign_in(client, "ops-admin", "ops-admin-secret").headers["location"]).text
    assert "the cluster could not check the account: connection refused" in page


def test_the_acl_option_of_ledgermq_console() -> None:
    parser = build_parser()
    assert parser.parse_args(["console"]).acl == "auto"
    assert parser.parse_args(["console", "--acl", "on"]).acl == "on"
    with pytest.raises(SystemExit):
        parser.parse_args(["console", "--acl", "maybe"])


def test_a_page_refused_later_turns_the_sign_in_on() -> None:
    """The cluster could not be asked at first (no sign-in then); when ACL refuses a page
    later, the console asks again, finds ACL and sends the visitor to the sign-in page."""
    down = [True]

    class LateAdmin(FakeAdmin):
        async def cluster_info(self) -> ClusterInfo:
            if down[0]:
                raise NetworkError("connection refused", address="127.0.0.1:9876")
            return await super().cluster_info()

        async def query_message(self, topic: str, key: str, **_: Any) -> list[Any]:
            self._account()
            return []

    class LateLink(FakeLink):
        def __init__(self, credentials: Credentials | None = None) -> None:
            super().__init__(credentials)
            self.admin = cast("Admin", LateAdmin(credentials, self.calls))

        def signed_as(self, credentials: Credentials | None) -> ClusterLink:
            return LateLink(credentials)

    client, _ = _client(link=LateLink())
    assert client.get("/messages").status_code == 200  # nothing known: no sign-in asked
    down[0] = False
    refused = client.get("/messages?by=key&topic=T&key=k")
    assert refused.status_code == 303
    assert refused.headers["location"].startswith("/login?error=the+cluster+enforces+ACL")
    assert client.get("/messages").status_code == 303


def test_wrong_sign_ins_from_one_source_do_not_delay_another_sources_sign_in() -> None:
    """30 parallel wrong sign-ins from one address wait for each other (two refusals a second),
    and an admin at another address signs in at once, not after them."""
    access = ConsoleAccess(FakeLink(), FakeClock(), AclMode.ON)

    async def main() -> None:
        guesses = [
            asyncio.ensure_future(access.sign_in("ops-admin", f"guess-{i}", "203.0.113.9"))
            for i in range(30)
        ]
        await asyncio.sleep(0.05)  # the guesses hold the attacker's lock
        started = time.monotonic()
        link = await asyncio.wait_for(
            access.sign_in("ops-admin", "ops-admin-secret", "192.0.2.10"), timeout=2.0
        )
        assert time.monotonic() - started < 0.3
        assert link.credentials is not None
        assert link.credentials.access_key == "ops-admin"
        await asyncio.sleep(REFUSED_DELAY_S * 2.5)
        assert sum(guess.done() for guess in guesses) <= 3  # the attacker is still slowed down
        for guess in guesses:
            guess.cancel()
        await asyncio.gather(*guesses, return_exceptions=True)
        assert not access._sign_in_locks  # nothing is kept for a source that is done

    asyncio.run(main())


def test_a_cluster_that_requires_strong_signatures_says_so_and_the_console_can_send_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LEDGERMQ_STRONG_SIGNATURE", raising=False)
    client, _ = _client()
    page = client.get(_sign_in(client, STRICT, "strict-secret").headers["location"]).text
    assert "requires LedgerMQ&#39;s strong signature" in page
    assert "LEDGERMQ_STRONG_SIGNATURE=true" in page
    monkeypatch.setenv("LEDGERMQ_STRONG_SIGNATURE", "true")
    client, _ = _client()
    signed_in = _sign_in(client, STRICT, "strict-secret")
    assert COOKIE in signed_in.cookies
