"""The producer's send header is built from the shared typed header (issue 26 item 2): what
``_SendRequest.ext_fields`` writes is ``SendMessageRequestHeaderV2`` as the broker reads it,
with the fields a producer always sends the same (the default topic, its queue count, no
reconsume, no unit mode)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledgermq.broker.remoting.send import parse_send_request
from ledgermq.client._routing import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, MessageQueue
from ledgermq.client.producer import _SendRequest
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.headers import SendMessageRequestHeaderV2

_INT32 = st.integers(0, (1 << 31) - 1)
_NAME = st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True)
_CODES = st.sampled_from([MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE])


@given(
    _NAME, _NAME, _CODES,
    _INT32, _INT32, st.text(max_size=20), _INT32, st.integers(0, 1 << 50), _NAME,
)  # fmt: skip
def test_the_producers_send_header_is_the_typed_header(
    group: str, topic: str, code: int, sys_flag: int, flag: int, properties: str,
    queue_id: int, born: int, broker: str,
) -> None:  # fmt: skip
    request = _SendRequest(group, topic, code, b"", sys_flag, flag, properties, "id", lambda: born)
    written = request.ext_fields(MessageQueue(topic, broker, queue_id))
    batch = code == MQRequestCode.SEND_BATCH_MESSAGE
    header = SendMessageRequestHeaderV2(
        group, topic, queue_id, DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, sys_flag, born, flag,
        properties, 0, False, None, batch, broker,
    )  # fmt: skip
    assert written == header.to_ext_fields_slowly()
    assert SendMessageRequestHeaderV2.from_ext_fields(written) == header
    read = parse_send_request(RemotingCommand(code, 1, ext_fields=written))
    assert (read.producer_group, read.topic, read.queue_id, read.batch) == (
        group, topic, queue_id, batch,
    )  # fmt: skip
