"""The console's inspection pages in-process against the stand-in cluster (issue 28 item 6):
a topic's consumer groups, the producer page, the trace search, the broker config view."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx2", reason="Starlette's TestClient needs httpx")
pytest.importorskip("starlette", reason="the console extra is not installed")

from ledgermq.client import ConsumerConnection, ConsumerProgress
from ledgermq.client.admin import ProducerConnection
from ledgermq.console.config_view import MASK, config_rows, is_secret_key
from ledgermq.wire.trace import TraceEvent
from tests.console.stand_in import BROKER, StandInAdmin, client, message


def _connection(group_topics: tuple[str, ...]) -> ConsumerConnection:
    return ConsumerConnection(
        "broker-a", "c1", "127.0.0.1:5", "PYTHON", 1, "CLUSTERING", "PUSH", group_topics
    )


def test_a_topic_page_lists_the_groups_consuming_it() -> None:
    admin = StandInAdmin(
        topics={"Orders": [message("Orders", 0)], "Audit": [], "Lonely": []},
        groups={"billing": {}, "audit": {}, "idle": {}},
        progress={
            "billing": [ConsumerProgress("Orders", "broker-a", 0, 10, 7)],
            "audit": [ConsumerProgress("Audit", "broker-a", 0, 3, 3)],
            "offsets-only": [ConsumerProgress("Orders", "broker-a", 1, 4, 4)],
        },
        connections={"idle": [_connection(("Orders",))]},
    )
    page = client(admin).get("/topics/Orders").text
    table = page[page.index('<table class="consumers">') :]
    assert '<tr data-group="billing">' in table
    assert '<tr data-group="offsets-only">' in table  # no subscription group, offsets
    assert '<tr data-group="idle">' in table  # no offsets yet, a client subscribes
    assert 'data-group="audit"' not in table
    billing = table[table.index('<tr data-group="billing">') :]
    assert '<td class="num lag">3</td>' in billing[: billing.index("</tr>")]
    # the live part does not ask every group again
    live = client(admin).get("/live/topics/Orders").text
    assert "consumers" not in live
    audit = client(admin).get("/topics/Audit").text
    assert 'id="no-consumers"' not in audit
    assert 'data-group="audit"' in audit
    assert 'id="no-consumers"' in client(admin).get("/topics/Lonely").text


def test_the_producer_page_shows_a_groups_connections() -> None:
    admin = StandInAdmin(
        producers={"orders-p": [ProducerConnection("broker-a", "p1@host", "10.0.0.5:4242")]}
    )
    console = client(admin)
    form = console.get("/producers")
    assert form.status_code == 200
    assert 'name="group"' in form.text
    assert admin.calls == []  # nothing asked before a group is given
    page = console.get("/producers?group=orders-p").text
    assert "1 connection of orders-p" in page
    assert "p1@host" in page
    assert "10.0.0.5:4242" in page
    none = console.get("/producers?group=%3Cb%3Enobody").text
    assert "No client of producer group &lt;b&gt;nobody is connected now" in none


def test_traces_by_id_by_key_and_of_an_expired_message() -> None:
    sent = message("Orders", 1, keys="order-42")
    events = [
        TraceEvent("Pub", sent.msg_id, timestamp_ms=sent.store_timestamp, group="p",
                   store_host=BROKER, cost_ms=2, success=True),
        TraceEvent("SubAfter", sent.msg_id, timestamp_ms=sent.store_timestamp + 5, group="billing",
                   cost_ms=1, success=True),
    ]  # fmt: skip
    gone = "0A0000050000000000000000DEADBEEF"
    admin = StandInAdmin(
        topics={"Orders": [message("Orders", 0), sent]},
        traces={
            sent.msg_id: events,
            gone: [TraceEvent("Pub", gone, timestamp_ms=1, group="p", success=True)],
        },
    )
    console = client(admin)
    assert console.get("/traces").status_code == 200
    by_id = console.get(f"/traces?by=id&id={sent.offset_msg_id}").text
    assert f'data-msg-id="{sent.msg_id}"' in by_id
    assert "sent to 127.0.0.1:10911" in by_id
    assert "consumed" in by_id
    assert "billing" in by_id
    by_key = console.get("/traces?by=key&topic=Orders&key=order-42").text
    assert by_key.count('<section class="traced"') == 1
    assert "keys order-42" in by_key
    expired = console.get(f"/traces?by=id&id={gone}").text
    assert "the message itself is no longer stored" in expired
    nothing = console.get("/traces?by=id&id=0A000005000000000000000000000001").text
    assert 'id="no-trace"' in nothing
    refused = console.get("/traces?by=id&id=not-an-id")
    assert refused.status_code == 400
    assert "is not a message id" in refused.text


def test_the_broker_config_view_masks_secrets_and_serves_only_the_clusters_replicas() -> None:
    assert is_secret_key("aclSecretKey")
    assert is_secret_key("tlsServerKeyPassword")
    assert is_secret_key("dLegerPeerSecret")
    assert not is_secret_key("flushDiskType")
    rows = config_rows({"flushDiskType": "ASYNC_FLUSH", "aclSecretKey": "s3cr3t", "x": "1"}, "F")
    assert [(r.key, r.value) for r in rows] == [("flushDiskType", "ASYNC_FLUSH")]
    admin = StandInAdmin(
        config={"brokerName": "broker-a", "aclSecretKey": "s3cr3t", "someToken": "t0k3n"}
    )
    console = client(admin)
    page = console.get(f"/brokers/{BROKER}/config")
    assert page.status_code == 200
    assert "s3cr3t" not in page.text
    assert "t0k3n" not in page.text
    assert page.text.count(MASK) >= 2
    assert '<tr data-key="brokerName"><td><code>brokerName</code></td><td class="">broker-a' in (
        page.text
    )
    assert "<form" in page.text
    assert 'method="post"' not in page.text.split("<main>")[1]  # read-only
    filtered = console.get(f"/brokers/{BROKER}/config?q=name").text
    assert "1 setting</h2>" in filtered
    other = console.get("/brokers/10.9.9.9:10911/config")
    assert other.status_code == 404
    assert admin.calls == [f"broker_config {BROKER}", f"broker_config {BROKER}"]
    cluster = console.get("/").text
    assert f'href="/brokers/{BROKER.replace(":", "%3A")}/config"' in cluster
