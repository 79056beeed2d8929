"""The send service speaks the messaging contract (issue 26 item 1): both doors hand it
``messaging.SendRequest``. The remoting door's request carries the properties as the text it
received (never decoded on the way); a v5 ``Sending`` is taken as it is (``SendRequest.of``:
its messages, never encoded as RocketMQ's batch only for the service to decode it again), and
checked as that encoding would be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.errors import IllegalMessageError
from ledgermq.broker.remoting.send import parse_send_request
from ledgermq.messaging import Outgoing, Sending, SendRequest
from ledgermq.messaging.consuming import PullOutcome, PullQuery, QueueRef
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.message import decode_records, encode_properties
from ledgermq.wire.route import TopicConfig

from .harness import Cluster, run_with_cluster

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(90)

CLIENT = "10.0.9.9:4321"


def test_a_remoting_send_is_read_into_the_contracts_request_with_its_text_as_received() -> None:
    text = encode_properties({"TAGS": "a", "UNIQ_KEY": "U1"})
    fields = {"a": "P", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "7"}
    fields |= {"h": "0", "i": text, "j": "0", "k": "false", "m": "false"}
    for code in (MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE):
        request = parse_send_request(RemotingCommand(code, 1, ext_fields=fields))
        assert type(request) is SendRequest
        assert request.encoded is text  # the very string received: not decoded, not rebuilt
        assert request.property_text() is text
        assert request.property_map() == {"TAGS": "a", "UNIQ_KEY": "U1"}
        assert request.batch is (code == MQRequestCode.SEND_BATCH_MESSAGE)


def _sending(*messages: tuple[bytes, dict[str, str]]) -> Sending:
    return Sending(
        "Orders",
        [Outgoing(body, props, False, 0, 0, 1) for body, props in messages],
        CLIENT,
        None,
    )


def test_a_v5_sending_is_stored_as_it_is_and_checked_as_its_batch(tmp_path: Path) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        services = master.services
        assert services is not None
        await services.admin.create_topic(TopicConfig("Orders", 2, 2))
        one = SendRequest.of(_sending((b"solo", {"TAGS": "s", "UNIQ_KEY": "U0"})), "P", 4)
        assert (one.encoded, one.batch) == (None, False)
        single = await services.send.send(one, b"", CLIENT)
        assert (single.queue_id, single.queue_offset, single.unique_key) == (1, 0, "U0")

        # a message that came with RocketMQ's text (``Outgoing.encoded``) is stored with it
        text = encode_properties({"TAGS": "t", "UNIQ_KEY": "U9"})
        typed = Sending("Orders", [Outgoing(b"text", {}, False, 0, 0, 0, text)], CLIENT, None)
        as_text = await services.send.send(SendRequest.of(typed, "P", 4), b"", CLIENT)
        assert (as_text.queue_id, as_text.unique_key) == (0, "U9")
        (record,) = decode_records(
            (await services.pull.pull(PullQuery("G", QueueRef("Orders", "", 0), 0))).stored
        )
        assert (record.body, record.properties["TAGS"]) == (b"text", "t")

        two = SendRequest.of(
            _sending((b"a", {"TAGS": "x", "KEYS": "k1"}), (b"bb", {"TAGS": "y"})), "P", 4
        )
        assert two.batch
        stored = await services.send.send(two, b"", CLIENT)
        assert (stored.queue_offset, len(stored.msg_ids)) == (1, 2)
        found = await services.pull.pull(PullQuery("G", QueueRef("Orders", "", 1), 0))
        assert found.outcome is PullOutcome.FOUND
        records = decode_records(found.stored)
        assert [r.body for r in records] == [b"solo", b"a", b"bb"]
        tags = [r.properties.get("TAGS") for r in records]
        assert tags == ["s", "x", "y"]
        assert records[1].properties["KEYS"] == "k1"

        # the size rule of a batch is its RocketMQ encoding's, though none is made
        limit = master.config.max_message_size
        big = (b"x" * (limit // 2), {"TAGS": "big"})
        with pytest.raises(IllegalMessageError, match="exceeds maxMessageSize"):
            await services.send.send(SendRequest.of(_sending(big, big), "P", 4), b"", CLIENT)

    run_with_cluster(tmp_path, test)
