"""Reserved names refused on every form that creates one, and the reset form offering the
group's subscriptions (issue 28 item 6), in-process against the stand-in cluster."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx2", reason="Starlette's TestClient needs httpx")
pytest.importorskip("starlette", reason="the console extra is not installed")

from ledgermq.client import ConsumerConnection, ConsumerProgress
from ledgermq.console.names import (
    group_of_side_topic,
    reserved_group_problem,
    reserved_topic_problem,
)
from tests.console.stand_in import StandInAdmin, client, token


def test_reserved_names_each_with_its_sentence() -> None:
    assert reserved_topic_problem("Orders") is None
    assert reserved_group_problem("order-consumers") is None
    retry = reserved_group_problem("%RETRY%x")
    assert retry is not None
    assert "it is the retry topic of consumer group x" in retry
    dlq = reserved_topic_problem("%DLQ%g")
    assert dlq is not None
    assert "dead-letter topic of consumer group g" in dlq
    assert "system topic" in (reserved_topic_problem("RMQ_SYS_TRACE_TOPIC") or "")
    assert "system topic" in (reserved_topic_problem("TBW102") or "")
    assert "system topic" in (reserved_topic_problem("SCHEDULE_TOPIC_XXXX_V2") or "")
    assert "system topic" in (reserved_topic_problem("broker-a", frozenset({"broker-a"})) or "")
    assert "built-in group" in (reserved_group_problem("TOOLS_CONSUMER") or "")
    assert "built-in group" in (reserved_group_problem("CID_RMQ_SYS_TRANS") or "")
    assert "may contain only" in (reserved_topic_problem("a b") or "")
    assert (group_of_side_topic("%RETRY%g"), group_of_side_topic("Orders")) == ("g", None)


def test_the_page_of_a_retry_topic_name_offers_no_group_to_create() -> None:
    admin = StandInAdmin()
    console = client(admin)
    page = console.get("/groups/%25RETRY%25x")
    assert page.status_code == 200
    assert "it is the retry topic of consumer group x" in page.text
    assert "%RETRY%%RETRY%x" not in page.text
    assert 'action="/groups/update"' not in page.text
    assert "save the form to create it" not in page.text
    # and a forged post is refused too, with the sentence, and nothing is created
    refused = console.post(
        "/groups/update", data={"token": token(console.get("/groups").text), "group": "%RETRY%x"}
    )
    assert refused.status_code == 303
    banner = console.get(refused.headers["location"]).text
    assert "not saved" in banner
    assert "it is the retry topic of consumer group x" in banner
    assert not any(c.startswith("update_group") for c in admin.calls)


def test_every_form_that_creates_a_name_refuses_the_reserved_ones() -> None:
    admin = StandInAdmin(topics={"%RETRY%g": []}, groups={"TOOLS_CONSUMER": {}})
    console = client(admin)
    form_token = token(console.get("/topics").text)
    for name, sentence in (
        ("%DLQ%g", "dead-letter topic of consumer group g"),
        ("RMQ_SYS_X", "system topic"),
        ("DefaultCluster", "system topic"),
        ("broker-a", "system topic"),
    ):
        answer = console.post(
            "/topics/create", data={"token": form_token, "topic": name, "queues": "4"}
        )
        assert answer.status_code == 303, name
        page = console.get(answer.headers["location"]).text
        assert "was not created" in page, name
        assert sentence in page, name
    # an update of what exists is not a creation: a retry topic's queues may change
    updated = console.post(
        "/topics/create",
        data={"token": form_token, "topic": "%RETRY%g", "queues": "2", "update": "1"},
    )
    assert "updated to 2 queues" in console.get(updated.headers["location"]).text
    # "update" on a reserved name that does not exist yet is still a creation
    forged = console.post(
        "/topics/create",
        data={"token": form_token, "topic": "%RETRY%h", "queues": "2", "update": "1"},
    )
    assert "was not created" in console.get(forged.headers["location"]).text
    for name in ("%DLQ%x", "CID_RMQ_SYS_X", "SELF_TEST_C_GROUP"):
        answer = console.post("/groups/update", data={"token": form_token, "group": name})
        assert "not saved" in console.get(answer.headers["location"]).text, name
    # a built-in group that exists keeps its settings form
    saved = console.post(
        "/groups/update",
        data={"token": form_token, "group": "TOOLS_CONSUMER", "retryMaxTimes": "3"},
    )
    assert "saved on broker-a" in console.get(saved.headers["location"]).text
    assert admin.calls == ["create_topic %RETRY%g", "update_group TOOLS_CONSUMER"]


def test_the_reset_form_offers_the_groups_subscriptions() -> None:
    admin = StandInAdmin(
        topics={"Orders": [], "Audit": []},
        groups={"g": {"consumeEnable": True}},
        progress={"g": [ConsumerProgress("Audit", "broker-a", 0, 5, 5)]},
        connections={
            "g": [
                ConsumerConnection(
                    "broker-a",
                    "c1",
                    "127.0.0.1:5",
                    "PYTHON",
                    1,
                    "CLUSTERING",
                    "PUSH",
                    ("Orders", "%RETRY%g"),
                )
            ]
        },
    )
    page = client(admin).get("/groups/g").text
    select = page[page.index('<select name="topic"') : page.index("</select>")]
    options = [part.split('"')[1] for part in select.split("<option value=")[1:]]
    assert options == ["Audit", "Orders", "%RETRY%g"]
    # a group with neither clients nor offsets: the topic is typed
    admin.groups["h"] = {}
    bare = client(admin).get("/groups/h").text
    assert '<select name="topic"' not in bare
    assert '<input name="topic" required>' in bare
