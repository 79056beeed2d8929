"""Request bodies are bounded before the broker parses them (issue 25 item 6).

The loop that parses a request also runs the replica's Raft. Before the fix a heartbeat's body
was handed to ``json.loads`` whatever its size (a 14 MiB body of tiny values held the loop for
over a second) and a send's body was signed by the ACL whatever its size. Now a body over its
code's bound (``broker.remoting.bounds``) is answered from its length alone, and a JSON body
within it is refused before parsing when it holds too many values
(``wire.json_fields.check_json_budget``). Each test here was answered differently before: the
oversized heartbeat and the value-heavy lock body were parsed, the 5 MiB send was answered by
the send path after its body had been read by the ACL and the message writer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import IllegalMessageError, OverLimitError
from ledgermq.broker.remoting.bounds import MAX_REQUEST_BODY_BYTES, body_refusal
from ledgermq.errors import BadRequestError
from ledgermq.wire import MQRequestCode, MQResponseCode
from ledgermq.wire.json_fields import MAX_JSON_VALUES, check_json_budget

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)


_run = run_with_cluster


def _heartbeat_with(values: int) -> bytes:
    """A well-formed ``HeartbeatData`` that also carries ``values`` tiny JSON values."""
    return json.dumps(
        {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [], "pad": [0] * values},
        separators=(",", ":"),
    ).encode()


def test_a_message_code_is_bounded_by_max_message_size_and_others_by_a_mebibyte() -> None:
    four_mib = 4 * 1024 * 1024
    assert body_refusal(MQRequestCode.SEND_MESSAGE_V2, four_mib, four_mib) is None
    refused = body_refusal(MQRequestCode.SEND_BATCH_MESSAGE, four_mib + 1, four_mib)
    assert isinstance(refused, IllegalMessageError)
    assert "exceeds maxMessageSize (4194304)" in str(refused)
    assert body_refusal(MQRequestCode.HEART_BEAT, MAX_REQUEST_BODY_BYTES, four_mib) is None
    refused = body_refusal(MQRequestCode.HEART_BEAT, MAX_REQUEST_BODY_BYTES + 1, four_mib)
    assert isinstance(refused, OverLimitError)
    assert f"limit of {MAX_REQUEST_BODY_BYTES} bytes for request code 34" in str(refused)


def test_a_json_body_with_too_many_values_is_refused_before_it_is_parsed() -> None:
    check_json_budget(_heartbeat_with(MAX_JSON_VALUES - 10), "the heartbeat body")
    with pytest.raises(BadRequestError, match="JSON values; the limit is 50000"):
        check_json_budget(_heartbeat_with(MAX_JSON_VALUES), "the heartbeat body")
    # a heartbeat of 1,000 subscriptions (heartbeatMaxSubscriptions) is far inside the budget
    subscriptions = [
        {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
         "subVersion": 1700000000000, "tagsSet": [], "topic": "T" * 100}
        for _ in range(1000)
    ]  # fmt: skip
    beat = json.dumps(
        {"clientID": "c", "producerDataSet": [], "consumerDataSet": [
            {"groupName": "g", "subscriptionDataSet": subscriptions}]}
    ).encode()  # fmt: skip
    assert len(beat) < MAX_REQUEST_BODY_BYTES
    check_json_budget(beat, "the heartbeat body")


def test_the_door_answers_oversized_and_value_heavy_bodies_without_parsing_them(
    tmp_path: Path,
) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        big = json.dumps({"clientID": "c1", "pad": "x" * MAX_REQUEST_BODY_BYTES}).encode()
        beat = await cluster.request(master.address, MQRequestCode.HEART_BEAT, body=big)
        assert beat.code == MQResponseCode.INVALID_PARAMETER, beat.remark
        assert "exceeds the limit of 1048576 bytes for request code 34" in (beat.remark or "")

        heavy = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=_heartbeat_with(MAX_JSON_VALUES + 1)
        )
        assert heavy.code != MQResponseCode.SUCCESS
        assert "JSON values; the limit is 50000" in (heavy.remark or ""), heavy.remark
        lock = await cluster.request(
            master.address,
            MQRequestCode.LOCK_BATCH_MQ,
            body=json.dumps(
                {"clientId": "c1", "consumerGroup": "g", "mqSet": [{}] * 60_000}
            ).encode(),
        )
        assert lock.code != MQResponseCode.SUCCESS
        assert "the lock request body holds" in (lock.remark or ""), lock.remark

        sent = await cluster.send(master.address, "Bodies", b"x" * (5 * 1024 * 1024))
        assert sent.code == MQResponseCode.MESSAGE_ILLEGAL, sent.remark
        assert "exceeds maxMessageSize (4194304)" in (sent.remark or "")
        # the connection is still in step: a normal request on it is served
        ok = await cluster.request(
            master.address, MQRequestCode.HEART_BEAT, body=_heartbeat_with(10)
        )
        assert ok.code == MQResponseCode.SUCCESS, ok.remark

    _run(tmp_path, test)
