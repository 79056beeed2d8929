"""The console's reset-offsets form and a message's trace, over HTTP against real processes."""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("uvicorn", reason="the console extra is not installed")

from ledgermq.client import Admin, ConsumeStatus, Producer, PushConsumer
from ledgermq.console.link import ClusterLink
from ledgermq.console.server import ConsoleServer
from tests.console.test_server import fetch

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster
    from ledgermq.wire import MessageExt

    MakeCluster = Callable[..., BrokerCluster]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_reset_offsets_and_the_trace_of_a_message(broker_clusters: MakeCluster) -> None:
    cluster = broker_clusters(replicas=3)
    cluster.wait_routable()
    ns = cluster.namesrv_addr

    async def main() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic("Console", 1, wait_s=20)
        producer = Producer("console-producer", ns, enable_msg_trace=True)
        got = asyncio.Event()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            got.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer("console-group", ns, enable_msg_trace=True,
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET")  # fmt: skip
        consumer.subscribe("Console", "*")
        consumer.register_listener(listener)
        await producer.start()
        results = [await producer.send("Console", f"c{i}".encode()) for i in range(5)]
        await consumer.start()
        await asyncio.wait_for(got.wait(), 30)
        await producer.shutdown()

        server = ConsoleServer(ClusterLink(ns), port=0)
        await server.start()
        try:
            page = await asyncio.to_thread(fetch, server.url + "groups/console-group")
            token = re.search(r'name="token" value="([^"]+)"', page[1])
            assert token is not None
            form = {"token": token.group(1), "topic": "Console", "to": "earliest"}
            url = server.url + "groups/console-group/reset"
            # while the consumer is online: refused, with the reason on the page
            status, refused, _ = await asyncio.to_thread(
                fetch, url, data=urllib.parse.urlencode(form).encode()
            )
            assert status == 200
            assert "client(s) online" in refused
            await consumer.shutdown()
            status, done, _ = await asyncio.to_thread(
                fetch, url, data=urllib.parse.urlencode(form).encode()
            )
            assert "offsets of console-group in Console reset" in done
            assert "-&gt; 0" in done or "-> 0" in done
            async with Admin(ns) as admin:
                for _ in range(100):  # the trace records are sent in the background
                    events = await admin.message_trace(results[0].msg_id)
                    if len(events) >= 3:
                        break
                    await asyncio.sleep(0.1)
            status, message, _ = await asyncio.to_thread(
                fetch, server.url + "messages/" + results[0].offset_msg_id
            )
            assert status == 200
            assert "sent to" in message
            assert "consumed" in message
            assert "console-group" in message

            # a dead letter of the group: the page offers to give it back, and does
            maker = Producer("dlq-maker", ns)
            await maker.start()
            dead = await maker.send("%DLQ%console-group", b"dead",
                                    properties={"RETRY_TOPIC": "Console"})  # fmt: skip
            await maker.shutdown()
            _, dead_page, _ = await asyncio.to_thread(
                fetch, server.url + "messages/" + dead.offset_msg_id
            )
            assert "Resend to console-group" in dead_page
            form = {"token": token.group(1), "group": "console-group"}
            status, after, _ = await asyncio.to_thread(
                fetch,
                server.url + f"messages/{dead.offset_msg_id}/resend",
                data=urllib.parse.urlencode(form).encode(),
            )
            assert status == 200
            assert "resent to %RETRY%console-group" in after
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 100))
