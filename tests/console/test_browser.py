"""``ledgermq console`` in a real browser against a real cluster (issue 18 section 1).

Headless Chromium from Debian (``apt-get install chromium``, or ``$LEDGERMQ_CHROMIUM``) driven
by Playwright for Python with ``executable_path`` (Playwright never downloads a browser here).
The console runs as a user starts it (``python -m ledgermq console``), the cluster as real
NameServer and broker processes. Each page is checked for the numbers it must show and each
action for its effect on the cluster, asked through ``Admin`` rather than through the page.

Screenshots (1366x768) are kept under the test's tmp folder; with
``LEDGERMQ_CONSOLE_SCREENSHOTS=docs`` the ones the README shows are also written to docs/.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from ledgermq.bench.processes import child_env, ledgermq_command
from ledgermq.client import Admin, ConsumeStatus, Credentials, Producer, SyncPushConsumer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

T = TypeVar("T")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CHROMIUM = os.environ.get("LEDGERMQ_CHROMIUM", "/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[2] / "docs"
_CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # no calls home: this machine's network is closed, and each refused call costs time
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _require_browser() -> Any:
    """Playwright's sync API, or a one-line skip saying what is missing."""
    pytest.importorskip("uvicorn", reason="the console extra is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests need Playwright for Python: pip install playwright")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM}: apt-get install chromium")
    return sync_playwright


@contextmanager
def console(namesrv: str, *options: str) -> Iterator[str]:
    """``ledgermq console -n NAMESRV --listen 127.0.0.1:0`` as a child; yields its URL."""
    child = subprocess.Popen(
        ledgermq_command("console", "-n", namesrv, "--listen", "127.0.0.1:0", *options),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("LedgerMQ console: http://127.0.0.1:"), line + child.stdout.read()
        yield line.split()[2]
    finally:
        child.terminate()
        try:
            output, _ = child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            output, _ = child.communicate()
        assert "Traceback" not in output, output


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    sync_playwright = _require_browser()
    from playwright.sync_api import expect

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=_CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.set_default_timeout(20_000)
            expect.set_options(timeout=15_000)
            yield page
        finally:
            browser.close()


def shoot(page: Any, tmp_path: Path, name: str, *, docs: bool = False) -> None:
    """A screenshot under the test's tmp folder (and in docs/ when asked, for the README)."""
    path = tmp_path / "screenshots" / f"console-{name}.png"
    path.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(path))
    if docs and os.environ.get("LEDGERMQ_CONSOLE_SCREENSHOTS") == "docs":
        shutil.copyfile(path, DOCS / path.name)


def wait_for(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_every_page_and_action_against_a_real_cluster(
    broker_clusters: MakeCluster, browser_page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    cluster = off_loop(broker_clusters, replicas=3)
    off_loop(cluster.wait_routable)
    master = off_loop(cluster.wait_master, "broker-a")
    ns = cluster.namesrv_addr
    consumer: SyncPushConsumer | None = None
    try:
        with console(cluster.namesrv_addr) as url:
            # ---- Cluster: one group, three replicas, the real master marked as leader
            page.goto(url)
            group = page.locator('section.group[data-broker="broker-a"]')
            expect(group.locator("tbody tr")).to_have_count(3)
            expect(group.locator("tr.master")).to_have_count(1)
            expect(group.locator("tr.master")).to_have_attribute("data-replica", master)
            expect(group.locator("h2 .leader")).to_have_text(master)
            # rates need two samples: the live refresh brings the second
            expect(group.locator("tr.master td.put-tps")).to_have_text(re.compile(r"^\d+$"))
            shoot(page, tmp_path, "cluster", docs=True)

            # ---- Topics: create one with 4 queues, send a JSON test message with a key
            page.goto(url + "topics")
            page.fill('input[name="topic"]', "ConsoleTopic")
            page.fill('input[name="queues"]', "4")
            page.click('button:text-is("Create")')
            expect(page).to_have_url(re.compile(re.escape(url + "topics/ConsoleTopic?notice=")))
            expect(page.locator(".banner.notice")).to_contain_text(
                "topic ConsoleTopic created with 4 queues on broker-a"
            )
            expect(page.locator("#topic-queues")).to_have_text("4")
            expect(page.locator("tr[data-queue]")).to_have_count(4)
            assert len(ask(ns, lambda admin: admin.topic_stats("ConsoleTopic"))) == 4
            page.fill('textarea[name="body"]', '{"order": 42, "note": "from the console"}')
            page.fill('input[name="tags"]', "TagC")
            page.fill('input[name="keys"]', "console-key")
            page.click('button:text-is("Send")')
            expect(page.locator(".banner.notice")).to_contain_text("sent SEND_OK: message ")
            expect(page.locator("#topic-messages")).to_have_text("1")  # live, if not at once
            shoot(page, tmp_path, "topic")
            page.goto(url + "topics")
            expect(page.locator('tr[data-topic="ConsoleTopic"]')).to_contain_text("broker-a: 4 / 4")
            # update: more queues; the message stays where it is
            page.click('a:text-is("ConsoleTopic")')
            page.fill('form.inline input[name="queues"]', "6")
            page.click('button:text-is("Update")')
            expect(page.locator(".banner.notice")).to_contain_text(
                "topic ConsoleTopic updated to 6 queues on broker-a"
            )
            expect(page.locator("#topic-queues")).to_have_text("6")
            expect(page.locator("#topic-messages")).to_have_text("1")

            # ---- Messages: by key, then the message itself with its JSON body
            page.goto(url + "messages?by=key&topic=ConsoleTopic&key=console-key")
            expect(page.locator("table.found tbody tr")).to_have_count(1)
            page.click("table.found tbody tr a")
            expect(page.locator("#body-json")).to_contain_text('"order": 42')
            expect(page.locator("table.properties")).to_contain_text("console-key")
            expect(page.locator("table.properties")).to_contain_text("TagC")
            expect(page.locator("#body-hex")).to_contain_text('|{"order": 42, "n|')
            shoot(page, tmp_path, "message")
            page.goto(url + "messages?by=time&topic=ConsoleTopic")
            expect(page.locator("table.found tbody tr")).to_have_count(1)
            response = page.goto(url + "messages?by=key&topic=NoSuchTopic&key=k")
            assert response is not None
            assert response.status == 404
            expect(page.locator("h1")).to_have_text("Not found")

            # ---- Consumer groups: create with settings, update them, see a member and its lag
            page.goto(url + "groups")
            form = page.locator("form.group-form")
            form.locator('input[name="group"]').fill("ConsoleGroup")
            form.locator('input[name="retryMaxTimes"]').fill("5")
            form.locator("button").click()
            expect(page.locator(".banner.notice")).to_contain_text(
                "subscription group ConsoleGroup saved on broker-a"
            )
            assert group_settings(ns, "ConsoleGroup")["retryMaxTimes"] == 5
            form = page.locator("form.group-form")
            form.locator('input[name="retryMaxTimes"]').fill("7")
            form.locator('input[name="consumeMessageOrderly"]').check()
            form.locator("button").click()
            expect(page.locator(".banner.notice")).to_contain_text("saved on broker-a")
            saved = group_settings(ns, "ConsoleGroup")
            assert (saved["retryMaxTimes"], saved["consumeMessageOrderly"]) == (7, True)
            expect(page.locator('input[name="retryMaxTimes"]')).to_have_value("7")

            received: list[bytes] = []
            consumer = SyncPushConsumer("ConsoleGroup", cluster.namesrv_addr)
            consumer.subscribe("ConsoleTopic", "*")

            def listener(messages: list[Any]) -> ConsumeStatus:
                received.extend(m.body for m in messages)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer.register_listener(listener)
            consumer.start()
            wait_for(lambda: len(received) == 1)
            # live: the member and its committed progress appear without a reload
            expect(page.locator("#group-clients")).to_have_text("1", timeout=30_000)
            expect(page.locator("table.members tbody tr")).to_have_count(1)
            expect(page.locator('table.progress tr[data-queue^="ConsoleTopic/"]')).to_have_count(
                6, timeout=30_000
            )
            expect(page.locator("#group-lag")).to_have_text("0")
            retry = page.locator('table.side-topics tr[data-topic="%RETRY%ConsoleGroup"]')
            expect(retry).to_contain_text("retry")
            dlq = page.locator('table.side-topics tr[data-topic="%DLQ%ConsoleGroup"]')
            expect(dlq).to_contain_text("not made yet")
            shoot(page, tmp_path, "group", docs=True)
            page.goto(url + "groups")
            row = page.locator('tr[data-group="ConsoleGroup"]')
            expect(row).to_contain_text("7")
            expect(row.locator("td").nth(5)).to_have_text("1")  # clients

            # ---- Cluster: move the leadership to another replica, confirming the dialog
            target = next(n for n in cluster.nodes if n != master)
            page.goto(url)
            page.once("dialog", lambda dialog: dialog.accept())
            page.click(f'tr[data-replica="{target}"] button')
            expect(page.locator(".banner.notice")).to_contain_text(
                f"{target} now leads broker group broker-a"
            )
            wait_for(lambda: off_loop(cluster.master, "broker-a") == target)
            expect(page.locator("tr.master")).to_have_attribute("data-replica", target)
            # a refused dialog posts nothing
            page.once("dialog", lambda dialog: dialog.dismiss())
            page.click(f'tr[data-replica="{master}"] button')
            assert off_loop(cluster.master, "broker-a") == target

            # ---- deletes, each after its confirmation
            ask(ns, lambda admin: admin.create_topic("DoomedTopic", 1, wait_s=10))
            ask(ns, lambda admin: admin.update_group("DoomedGroup", retryMaxTimes=1))
            page.goto(url + "topics/DoomedTopic")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click('button:text-is("Delete topic")')
            expect(page.locator(".banner.notice")).to_have_text("topic DoomedTopic deleted")
            assert "DoomedTopic" not in ask(ns, lambda admin: admin.topic_list())
            page.goto(url + "groups/DoomedGroup")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click('button:text-is("Delete group")')
            expect(page.locator(".banner.notice")).to_have_text(
                "group DoomedGroup deleted on broker-a"
            )
            assert "DoomedGroup" not in ask(ns, lambda admin: admin.consumer_groups())
    finally:
        if consumer is not None:
            consumer.shutdown()


def test_an_unreachable_cluster_shows_a_clear_page(browser_page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = browser_page
    with console("127.0.0.1:1") as url:
        response = page.goto(url)
        assert response is not None
        assert response.status == 502
        expect(page.locator("h1")).to_have_text("The cluster cannot be reached")
        expect(page.locator(".detail")).to_contain_text("127.0.0.1:1")
        assert "Traceback" not in page.content()
        shoot(page, tmp_path, "unreachable")


ACL = """
accounts:
  - accessKey: ops-admin
    secretKey: ops-admin-secret
    admin: true
  - accessKey: app-user
    secretKey: app-user-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""
ADMIN = Credentials("ops-admin", "ops-admin-secret")


def test_with_acl_on_the_console_asks_for_an_admin_account(
    broker_clusters: MakeCluster, browser_page: Any, tmp_path: Path
) -> None:
    """ACL on the brokers, the console started with no account: every page asks for a sign-in;
    a wrong secret and a non-admin account are refused; an admin signs in, creates a topic
    (checked through Admin), sees live send and consume TPS, and signs out."""
    from playwright.sync_api import expect

    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    cluster = off_loop(
        broker_clusters,
        replicas=1,
        credentials=(ADMIN.access_key, ADMIN.secret_key),
        extra_settings={
            "aclEnable": "true",
            "aclFilePath": str(acl),
            "aclAccessKey": ADMIN.access_key,
            "aclSecretKey": ADMIN.secret_key,
        },
    )
    off_loop(cluster.wait_routable)
    ns = cluster.namesrv_addr
    page = browser_page
    stop = threading.Event()
    traffic: Future[int] | None = None
    consumer: SyncPushConsumer | None = None
    try:
        with console(ns) as url:
            # ---- every page asks for a sign-in first
            page.goto(url + "topics")
            expect(page).to_have_url(url + "login?next=/topics")
            expect(page.locator("h1")).to_have_text("Sign in")
            shoot(page, tmp_path, "login", docs=True)
            page.goto(url + "groups")
            expect(page.locator("h1")).to_have_text("Sign in")

            # ---- a wrong secret, then an account that is not an admin
            page.fill('input[name="access_key"]', "ops-admin")
            page.fill('input[name="secret_key"]', "not-the-secret")
            page.click('button:text-is("Sign in")')
            expect(page.locator(".banner.failure")).to_have_text(
                "not signed in: the access key and secret key do not match an account of the "
                "cluster"
            )
            assert "not-the-secret" not in page.content()
            page.fill('input[name="access_key"]', "app-user")
            page.fill('input[name="secret_key"]', "app-user-secret")
            page.click('button:text-is("Sign in")')
            expect(page.locator(".banner.failure")).to_contain_text(
                "app-user is not an admin account: the console needs one"
            )
            assert "ledgermq console sign-in check" not in ask(ns, lambda a: a.topic_list(), ADMIN)

            # ---- the admin signs in, lands where it was going, creates a topic
            page.fill('input[name="access_key"]', "ops-admin")
            page.fill('input[name="secret_key"]', "ops-admin-secret")
            page.click('button:text-is("Sign in")')
            expect(page).to_have_url(url + "groups")
            expect(page.locator("#account")).to_have_text("ops-admin")
            cookies = page.context.cookies()
            assert [c["sameSite"] for c in cookies] == ["Strict"]
            assert all(c["httpOnly"] for c in cookies)
            assert not any("secret" in c["value"] for c in cookies)
            page.goto(url + "topics")
            page.fill('input[name="topic"]', "AclTopic")
            page.fill('input[name="queues"]', "2")
            page.click('button:text-is("Create")')
            expect(page.locator(".banner.notice")).to_contain_text(
                "topic AclTopic created with 2 queues on broker-a"
            )
            assert len(ask(ns, lambda admin: admin.topic_stats("AclTopic"), ADMIN)) == 2

            # ---- live TPS: a producer and a consumer at work
            consumer = SyncPushConsumer("AclGroup", ns, credentials=ADMIN)
            consumer.subscribe("AclTopic", "*")
            consumer.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
            consumer.start()
            traffic = ThreadPoolExecutor(1).submit(send_until, ns, "AclTopic", stop)
            nonzero_rate = re.compile(r"^(?!0\.0$)\d+\.\d$")
            page.goto(url + "topics")
            send_tps = page.locator('tr[data-topic="AclTopic"] td.send-tps')
            expect(send_tps).to_have_text(nonzero_rate, timeout=30_000)
            shoot(page, tmp_path, "topics-tps")
            page.goto(url + "groups")
            consume_tps = page.locator('tr[data-group="AclGroup"] td.consume-tps')
            expect(consume_tps).to_have_text(nonzero_rate, timeout=30_000)
            shoot(page, tmp_path, "groups-tps")
            page.goto(url + "groups/AclGroup")
            expect(page.locator("#group-tps")).to_have_text(nonzero_rate, timeout=30_000)
            page.goto(url + "topics/AclTopic")
            expect(page.locator("#topic-tps")).to_have_text(nonzero_rate, timeout=30_000)

            # ---- sign out: the next page asks again
            page.click('button:text-is("Sign out")')
            expect(page.locator(".banner.notice")).to_have_text("signed out")
            page.goto(url + "topics")
            expect(page.locator("h1")).to_have_text("Sign in")
    finally:
        stop.set()
        if traffic is not None:
            assert traffic.result(timeout=30) > 0
        if consumer is not None:
            consumer.shutdown()


def send_until(namesrv: str, topic: str, stop: threading.Event) -> int:
    """Send to ``topic`` about 20 times a second until ``stop``; how many were sent."""

    async def go() -> int:
        sent = 0
        producer = Producer("AclProducer", namesrv, credentials=ADMIN)
        await producer.start()
        try:
            while not stop.is_set():
                await producer.send(topic, b"tick %d" % sent)
                sent += 1
                await asyncio.sleep(0.05)
        finally:
            await producer.shutdown()
        return sent

    return asyncio.run(go())


def ask(
    namesrv: str, call: Callable[[Admin], Awaitable[T]], credentials: Credentials | None = None
) -> T:
    """What ``call`` gets from the cluster through an ``Admin`` of its own."""

    async def go() -> T:
        async with Admin(namesrv, credentials=credentials) as admin:
            return await call(admin)

    result: T = off_loop(asyncio.run, go())
    return result


def group_settings(namesrv: str, group: str) -> dict[str, Any]:
    """``group``'s settings on broker-a, as the master holds them."""
    groups = ask(namesrv, lambda admin: admin.consumer_groups())
    return groups[group]["broker-a"]


def off_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args)`` in another thread: Playwright's sync API keeps an event loop
    running in this one, where ``asyncio.run`` (used by the cluster helpers) is refused."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()
