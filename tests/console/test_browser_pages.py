"""The console's pages added next to RocketMQ's Dashboard (issue 28 item 6), in Debian's
Chromium against real processes: paged message search, the last hour's strips, the producer
page, a topic's consumer groups, the trace search, the broker config view, reserved names
refused, and the reset form's subscriptions. The helpers (the console as a child process,
screenshots, Playwright's skip) are test_browser.py's.

Select with ``-m integration``; skip with ``-m "not integration"``.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import TYPE_CHECKING, Any

import pytest

from ledgermq.client import ConsumeStatus, Producer, SyncProducer, SyncPushConsumer
from tests.console import test_browser
from tests.console.test_browser import ask, console, off_loop, shoot, wait_for

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.testing.broker_cluster import BrokerCluster

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

browser_page = test_browser.browser_page
"""The fixture: headless Chromium, one page (test_browser.py's)."""

TOPIC = "PagesTopic"
GROUP = "PagesGroup"
PRODUCER = "PagesProducer"


def test_the_pages_next_to_rocketmqs_dashboard(
    broker_clusters: MakeCluster, browser_page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = browser_page
    cluster = off_loop(broker_clusters, replicas=1)
    off_loop(cluster.wait_routable)
    ns = cluster.namesrv_addr
    ask(ns, lambda admin: admin.create_topic(TOPIC, 2, wait_s=20))
    received: list[str] = []
    lock = threading.Lock()

    def listener(messages: list[Any]) -> ConsumeStatus:
        with lock:
            received.extend(m.msg_id for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = SyncPushConsumer(GROUP, ns, enable_msg_trace=True)
    # a producer heartbeats the brokers of the topics it sends to, from the first beat after a send
    producer = SyncProducer(PRODUCER, ns, enable_msg_trace=True, heartbeat_interval_s=0.5)
    try:
        consumer.subscribe(TOPIC, "*")
        consumer.register_listener(listener)
        consumer.start()
        producer.start()
        first = producer.send(TOPIC, b"first", keys="page-key")
        for n in range(1, 130):
            producer.send(TOPIC, b"message %d" % n, keys="page-key")
        wait_for(lambda: len(received) >= 130, timeout_s=60)
        with console(ns, "--history-interval", "1") as url:
            # ---- Messages by key: 130 matches, 64 a page, a next page, &max= honoured
            page.goto(url + f"messages?by=key&topic={TOPIC}&key=page-key")
            expect(page.locator("#found-summary")).to_have_text("Messages 1 to 64 (more follow)")
            expect(page.locator("table.found tbody tr")).to_have_count(64)
            page.click('a[rel="next"]')
            expect(page.locator("#found-summary")).to_have_text("Messages 65 to 128 (more follow)")
            page.click('a[rel="next"]')
            expect(page.locator("#found-summary")).to_have_text("Messages 129 to 130 of 130")
            expect(page.locator("table.found tbody tr")).to_have_count(2)
            expect(page.locator('a[rel="next"]')).to_have_count(0)
            shoot(page, tmp_path, "messages-paged")
            page.goto(url + f"messages?by=key&topic={TOPIC}&key=page-key&max=200")
            expect(page.locator("table.found tbody tr")).to_have_count(130)

            # ---- the last hour: strips per replica and per topic, drawn while traffic runs
            stop = threading.Event()
            sender = threading.Thread(target=_send_until, args=(ns, stop))
            sender.start()
            try:
                page.goto(url)
                put_line = page.locator("section.group svg.strip polyline.put")
                expect(put_line).to_have_count(1, timeout=30_000)  # live part: no reload
                expect(page.locator("section.group figcaption .put")).to_have_text(
                    re.compile(r"^put \d+\.\d/s$")
                )
                page.goto(url + f"topics/{TOPIC}")
                expect(page.locator("svg.strip polyline.put")).to_have_count(1, timeout=30_000)
                expect(page.locator("svg.strip polyline.get")).to_have_count(1)
                expect(page.locator("figure.strip figcaption .put")).to_have_text(
                    re.compile(r"^put (?!0\.0/s)\d+\.\d/s$"), timeout=30_000
                )

                page.goto(url)
                expect(page.locator("section.group figcaption .put")).to_have_text(
                    re.compile(r"^put (?!0\.0/s)\d+\.\d/s$"), timeout=30_000
                )
                shoot(page, tmp_path, "history-cluster", docs=True)
                page.goto(url + f"topics/{TOPIC}")

                # ---- the topic's consumer groups
                consumers = page.locator(f'table.consumers tr[data-group="{GROUP}"]')
                expect(consumers).to_have_count(1)
                expect(consumers.locator("td").nth(1)).to_have_text("1")  # a client online
                shoot(page, tmp_path, "topic-history-and-groups")

                # ---- producers: the group's connection, found from the nav
                page.click('nav a:text-is("Producers")')
                page.fill('input[name="group"]', PRODUCER)
                page.click('button:text-is("Show connections")')
                expect(page.locator("#producer-count")).to_have_text(f"1 connection of {PRODUCER}")
                expect(page.locator("table.producers tbody tr")).to_contain_text("broker-a")
                shoot(page, tmp_path, "producers")
            finally:
                stop.set()
                sender.join(timeout=30)

            # ---- traces: by the id send printed, and by key
            page.click('nav a:text-is("Traces")')
            page.locator("form.card").nth(0).locator('input[name="id"]').fill(first.msg_id)
            page.locator("form.card").nth(0).locator("button").click()
            traced = page.locator(f'section.traced[data-msg-id="{first.msg_id}"]')
            expect(traced.locator("table.trace")).to_contain_text("sent to")
            expect(traced.locator("table.trace")).to_contain_text("consumed")
            expect(traced.locator("table.trace")).to_contain_text(GROUP)
            shoot(page, tmp_path, "traces")
            page.goto(url + f"traces?by=key&topic={TOPIC}&key=page-key")
            expect(page.locator("section.traced")).to_have_count(20)

            # ---- broker config: from the replica's address on the cluster page, read-only
            page.goto(url)
            page.locator("section.group a.config").first.click()
            expect(page.locator('table.config tr[data-key="brokerName"] td').nth(1)).to_have_text(
                "broker-a"
            )
            page.fill('input[name="q"]', "flushDisk")
            page.click('button:text-is("Filter")')
            expect(page.locator("table.config tbody tr")).to_have_count(1)
            expect(page.locator("main form[method=post]")).to_have_count(0)
            shoot(page, tmp_path, "broker-config")

            # ---- reserved names: the retry topic's name is no group to create, nor a topic
            page.goto(url + f"groups/%25RETRY%25{GROUP}")
            expect(page.locator("#reserved")).to_contain_text(
                f"it is the retry topic of consumer group {GROUP}"
            )
            expect(page.locator("form.group-form")).to_have_count(0)
            page.goto(url + "topics")
            page.fill('input[name="topic"]', f"%DLQ%{GROUP}")
            page.click('button:text-is("Create")')
            expect(page.locator(".banner.failure")).to_contain_text(
                f"is the dead-letter topic of consumer group {GROUP}"
            )
            assert f"%DLQ%{GROUP}" not in ask(ns, lambda admin: admin.topic_list())

            # ---- the reset form offers the group's subscriptions
            page.goto(url + f"groups/{GROUP}")
            options = page.locator('select[name="topic"] option')
            expect(options.first).to_have_text(TOPIC)
            shoot(page, tmp_path, "group-reset-select")
    finally:
        producer.close()
        consumer.shutdown()


def _send_until(namesrv: str, stop: threading.Event) -> None:
    """About 20 messages a second until ``stop``, so the strips have something to draw."""

    async def go() -> None:
        producer = Producer("PagesTraffic", namesrv)
        await producer.start()
        try:
            n = 0
            while not stop.is_set():
                await producer.send(TOPIC, b"tick %d" % n)
                n += 1
                await asyncio.sleep(0.05)
        finally:
            await producer.shutdown()

    asyncio.run(go())
