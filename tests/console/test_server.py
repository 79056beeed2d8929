"""The console's web layer over real HTTP with no cluster behind it: clear error pages (never a
traceback), the form token, the loopback host check, the packaged assets, ``--listen``."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("uvicorn", reason="the console extra is not installed")

from ledgermq.console.link import ClusterLink
from ledgermq.console.server import ConsoleServer, parse_listen
from ledgermq.errors import LedgerMQError, NetworkError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

DEAD_NAMESRV = "127.0.0.1:1"


def fetch(
    url: str, *, data: bytes | None = None, host: str | None = None
) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, data=data)
    if host is not None:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(), dict(exc.headers)


def with_console(check: Callable[[ConsoleServer], Awaitable[None]]) -> None:
    async def main() -> None:
        server = ConsoleServer(ClusterLink(DEAD_NAMESRV, request_timeout_s=1.0), port=0)
        await server.start()
        try:
            await check(server)
        finally:
            await server.close()

    asyncio.run(main())


@pytest.mark.timeout(60)
def test_an_unreachable_cluster_is_a_clear_page_not_a_traceback() -> None:
    async def check(server: ConsoleServer) -> None:
        for path in ("", "topics", "groups", "topics/Orders", "groups/g1"):
            status, page, _ = await asyncio.to_thread(fetch, server.url + path)
            assert status == 502, path
            assert "The cluster cannot be reached" in page
            assert f"NameServer <code>{DEAD_NAMESRV}</code>" in page
            assert "connection refused" in page
            assert "Traceback" not in page
        status, fragment, _ = await asyncio.to_thread(fetch, server.url + "live/cluster")
        assert status == 502
        assert fragment.startswith('<div class="banner failure" role="alert">')
        status, page, _ = await asyncio.to_thread(fetch, server.url + "messages/nonsense")
        assert status == 400
        assert "That request cannot be answered" in page
        assert "is not a message id: a message id is 32 to 56 hexadecimal digits" in page
        status, page, _ = await asyncio.to_thread(
            fetch, server.url + "messages?by=time&topic=T&from=yesterday"
        )
        assert status == 400
        assert "is not a time" in page
        status, page, _ = await asyncio.to_thread(fetch, server.url + "messages")
        assert status == 200  # the search form needs no cluster
        assert "By topic and time" in page

    with_console(check)


@pytest.mark.timeout(60)
def test_actions_need_the_form_token_of_this_console() -> None:
    async def check(server: ConsoleServer) -> None:
        status, page, _ = await asyncio.to_thread(
            fetch, server.url + "topics/create", data=b"topic=Evil&queues=1&token=guess"
        )
        assert status == 403
        assert "not from this console" in page
        status, page, _ = await asyncio.to_thread(
            fetch, server.url + "topics/create", data="topic=T&token=é".encode()
        )
        assert status == 403
        status, page, _ = await asyncio.to_thread(fetch, server.url + "groups/g/delete", data=b"")
        assert status == 403  # no token at all
        assert "Traceback" not in page

    with_console(check)


@pytest.mark.timeout(60)
def test_on_loopback_only_loopback_host_names_are_served() -> None:
    """Against DNS rebinding: a page of evil.example resolved to 127.0.0.1 gets nothing."""

    async def check(server: ConsoleServer) -> None:
        status, _, _ = await asyncio.to_thread(fetch, server.url, host="evil.example")
        assert status == 400
        status, _, _ = await asyncio.to_thread(
            fetch, server.url + "static/console.css", host=f"localhost:{server.port}"
        )
        assert status == 200

    with_console(check)


@pytest.mark.timeout(60)
def test_the_assets_come_from_the_package() -> None:
    async def check(server: ConsoleServer) -> None:
        status, script, _ = await asyncio.to_thread(fetch, server.url + "static/console.js")
        assert status == 200
        assert "data-live" in script
        status, page, _ = await asyncio.to_thread(fetch, server.url + "messages")
        assert "http://" not in page.replace(server.url, "")  # nothing from elsewhere
        assert "https://" not in page

    with_console(check)


def test_a_taken_port_is_a_network_error_naming_it() -> None:
    async def main() -> None:
        first = ConsoleServer(ClusterLink(DEAD_NAMESRV), port=0)
        await first.start()
        try:
            second = ConsoleServer(ClusterLink(DEAD_NAMESRV), port=first.port)
            with pytest.raises(NetworkError, match=f"cannot listen on 127.0.0.1:{first.port}"):
                await second.start()
        finally:
            await first.close()

    asyncio.run(main())


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_listen("0.0.0.0:0") == ("0.0.0.0", 0)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    with pytest.raises(LedgerMQError, match="the port is not a number"):
        parse_listen("localhost:http")
    with pytest.raises(LedgerMQError, match=r"0\.\.65535"):
        parse_listen("localhost:70000")


@pytest.mark.timeout(60)
def test_an_unexpected_error_is_a_short_page_and_a_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ledgermq.console import views

    async def broken(admin: object) -> None:
        raise RuntimeError("a bug in the console")

    monkeypatch.setattr(views, "cluster_view", broken)

    async def check(server: ConsoleServer) -> None:
        status, page, _ = await asyncio.to_thread(fetch, server.url)
        assert status == 500
        assert "Something went wrong" in page
        assert "a bug in the console" not in page
        assert "Traceback" not in page

    with_console(check)
    assert "console: GET / failed" in caplog.text


@pytest.mark.timeout(60)
def test_every_response_forbids_framing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against clickjacking: pages, errors, redirects, assets and refusals all carry
    ``X-Frame-Options: DENY`` and ``Content-Security-Policy: frame-ancestors 'none'``."""
    from ledgermq.console import views

    async def check(server: ConsoleServer) -> None:
        answers = [
            await asyncio.to_thread(fetch, server.url + "topics"),  # 502: no cluster
            await asyncio.to_thread(fetch, server.url + "static/console.css"),
            await asyncio.to_thread(fetch, server.url + "no/such/page"),
            await asyncio.to_thread(fetch, server.url, host="evil.example"),  # 400
            await asyncio.to_thread(fetch, server.url + "topics/create", data=b"topic=T"),
        ]

        async def broken(admin: object) -> None:
            raise RuntimeError("a bug in the console")

        monkeypatch.setattr(views, "cluster_view", broken)
        answers.append(await asyncio.to_thread(fetch, server.url))  # 500
        assert sorted({status for status, _, _ in answers}) == [200, 400, 403, 404, 500, 502]
        for status, _, headers in answers:
            lower = {name.lower(): value for name, value in headers.items()}
            assert lower.get("x-frame-options") == "DENY", status
            assert lower.get("content-security-policy") == "frame-ancestors 'none'", status

    with_console(check)
