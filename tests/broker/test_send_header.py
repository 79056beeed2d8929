"""``parse_send_request``: the one-step reader of SEND_MESSAGE_V2 headers must read exactly what
the general reader (the same header under SEND_MESSAGE's long names) reads, and leave every
header it does not take to it, so that errors stay the general reader's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledgermq.broker.remoting.send import parse_send_request
from ledgermq.errors import BadRequestError
from ledgermq.wire import MQRequestCode, RemotingCommand
from ledgermq.wire.ext_fields import SEND_V2_FIELD_NAMES, expand_send_v2_fields
from ledgermq.wire.headers import SendMessageRequestHeaderV2

numbers = st.one_of(
    st.integers(-(1 << 64), 1 << 64).map(str),
    st.sampled_from(["", " 7 ", "1_000", "x", "-0", "+3", "9" * 25]),
)
texts = st.sampled_from(["", "g", "TopicTest", "%RETRY%g", "\x01UNIQ_KEY\x02a\x02"])
booleans = st.sampled_from(["true", "false", "", "1", "0", "TRUE", " true", "yes"])
value_of = {"a": texts, "b": texts, "c": texts, "i": texts, "m": booleans, "n": texts}
headers = st.fixed_dictionaries(
    {},
    optional={key: value_of.get(key, numbers) for key in SEND_V2_FIELD_NAMES},
)


def _outcome(command: RemotingCommand) -> object:
    try:
        return parse_send_request(command)
    except Exception as exc:  # noqa: BLE001 - the outcome compared is the error itself
        return (type(exc), str(exc))


@given(headers, st.sampled_from([MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE]))
def test_a_v2_header_reads_as_its_long_named_twin(fields: dict[str, str], code: int) -> None:
    v2 = RemotingCommand(code, 1, ext_fields=fields)
    if "b" not in fields:  # a V2 header names its topic in b, or is refused
        assert _outcome(v2) == (BadRequestError, MISSING_B)
        return
    long_named = expand_send_v2_fields(fields)
    if code == MQRequestCode.SEND_BATCH_MESSAGE:
        long_named["batch"] = "true"
    twin = RemotingCommand(MQRequestCode.SEND_MESSAGE, 1, ext_fields=long_named)
    assert _outcome(v2) == _outcome(twin)


MISSING_B = "the SEND_MESSAGE_V2 header lacks the field 'b' (the topic)"


@given(
    headers,
    st.sampled_from([MQRequestCode.SEND_MESSAGE_V2, MQRequestCode.SEND_BATCH_MESSAGE]),
    st.sets(st.sampled_from(sorted(SEND_V2_FIELD_NAMES.values())), min_size=1),
)
def test_a_v2_header_with_v1_names_is_refused(
    fields: dict[str, str], code: int, v1_names: set[str]
) -> None:
    """Issue 25 item 2: the ACL checked PUB on ``b`` and the handler stored into ``topic``
    (which overrode ``b``, or stood in for a missing one). A V2 header carrying any SEND_MESSAGE
    name is refused whole, naming the field, whatever else it holds."""
    mixed = {**fields, **dict.fromkeys(v1_names, "TopicB")}
    outcome = _outcome(RemotingCommand(code, 1, ext_fields={**mixed, "AccessKey": "k"}))
    assert isinstance(outcome, tuple), outcome
    assert outcome[0] is BadRequestError
    assert "may not also carry" in outcome[1]
    assert all(repr(name) in outcome[1] for name in v1_names)


def test_the_usual_v2_header_is_read() -> None:
    fields = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "17",
              "h": "0", "i": "p", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    request = parse_send_request(
        RemotingCommand(MQRequestCode.SEND_MESSAGE_V2, 1, ext_fields=fields)
    )
    assert (request.topic, request.queue_id, request.born_timestamp, request.batch) == (
        "T", 3, 17, False,
    )  # fmt: skip
    assert request.max_reconsume_times is None


@given(
    st.integers(-1, 1 << 30),
    st.integers(0, 255),
    st.integers(0, 1 << 45),
    st.sampled_from(["", "\x01UNIQ_KEY\x02a\x02"]),
    st.one_of(st.none(), st.integers(0, 16)),
    st.booleans(),
    st.sampled_from([None, "TBW102"]),
)
def test_the_typed_v2_header_is_read_by_the_broker_as_it_was_built(
    queue_id: int,
    sys_flag: int,
    born: int,
    properties: str,
    max_reconsume: int | None,
    batch: bool,
    default_topic: str | None,
) -> None:
    """``wire.headers.SendMessageRequestHeaderV2`` (what the stand-alone proxy and a
    follower's gRPC door forward a v5 send with) writes the fields the broker's reader reads
    back to the same request."""
    header = SendMessageRequestHeaderV2(
        producer_group="__grpc_producer", topic="TopicTest", queue_id=queue_id,
        default_topic=default_topic, sys_flag=sys_flag, born_timestamp=born,
        properties=properties, max_reconsume_times=max_reconsume, batch=batch,
        broker_name="broker-a",
    )  # fmt: skip
    fields = header.to_ext_fields()
    assert SendMessageRequestHeaderV2.from_ext_fields(fields) == header
    code = MQRequestCode.SEND_BATCH_MESSAGE if batch else MQRequestCode.SEND_MESSAGE_V2
    request = parse_send_request(RemotingCommand(code, 1, ext_fields=fields))
    assert (request.producer_group, request.topic, request.queue_id, request.default_topic) == (
        "__grpc_producer", "TopicTest", queue_id, default_topic,
    )  # fmt: skip
    assert (request.sys_flag, request.born_timestamp, request.encoded) == (
        sys_flag, born, properties,
    )  # fmt: skip
    assert (request.max_reconsume_times, request.batch) == (max_reconsume, batch)
