"""The messaging contract's values (``ledgermq.messaging``), without any door: a message's
properties as a mapping or as the text a door already holds (never decoded and re-encoded when
stored as received), a ``Sending`` as one append, a v5 session in a heartbeat's terms, and the
refusal hierarchy the doors map."""

from __future__ import annotations

import pytest

from ledgermq.broker import errors as broker_errors
from ledgermq.messaging import (
    ClientKind,
    ClientSession,
    ConsumerData,
    Heartbeat,
    MessagingError,
    Outgoing,
    Refused,
    Sending,
    ServiceError,
)
from ledgermq.messaging import errors as messaging_errors
from ledgermq.wire.message import decode_batch, encode_properties

PROPS = {"TAGS": "a", "KEYS": "k1", "UNIQ_KEY": "U1"}


def _outgoing(body: bytes, **fields: object) -> Outgoing:
    values: dict[str, object] = {
        "body": body, "properties": PROPS, "compressed": False, "born_ms": 0,
        "reconsume_times": 0, "queue_id": -1,
    }  # fmt: skip
    values.update(fields)
    return Outgoing(**values)  # type: ignore[arg-type]


def test_properties_given_as_text_are_kept_as_text_and_decoded_on_demand() -> None:
    text = encode_properties(PROPS) + "EXTRA\x01x\x02"  # kept byte for byte, even unusual
    held = _outgoing(b"b", properties={}, encoded=text)
    assert held.property_text() is text
    assert held.property_map() == {**PROPS, "EXTRA": "x"}
    assert held != _outgoing(b"b", properties={}, encoded=encode_properties(PROPS))
    mapped = _outgoing(b"b")
    assert mapped.property_map() is PROPS
    assert mapped.property_text() == encode_properties(PROPS)


def test_a_sending_is_one_append_a_batch_for_several_messages() -> None:
    one = Sending("T", [_outgoing(b"only")], "10.0.0.1:1", None)
    assert (one.body(), one.properties_text()) == (b"only", encode_properties(PROPS))
    text = encode_properties({"TAGS": "b"})
    several = Sending(
        "T", [_outgoing(b"m0"), _outgoing(b"m1", properties={}, encoded=text)], "h:1", None
    )
    assert several.properties_text() == ""
    items = decode_batch(several.body())
    assert [(i.body, i.properties) for i in items] == [
        (b"m0", encode_properties(PROPS)),
        (b"m1", text),
    ]


def _consumer(consume_type: str) -> Heartbeat:
    data = ConsumerData(
        "G", consume_type, "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", {"T": "a || b"}, {"T": "TAG"}
    )
    return Heartbeat("c1", (), (data,))


@pytest.mark.parametrize(
    ("kind", "group", "expected"),
    [
        (ClientKind.PRODUCER, "", Heartbeat("c1", ("P",), ())),
        (ClientKind.CONSUMER, "G", _consumer("CONSUME_POP")),
        (ClientKind.PULL_CONSUMER, "G", _consumer("CONSUME_ACTIVELY")),
        (ClientKind.OTHER, "G", Heartbeat("c1", (), ())),
        (ClientKind.CONSUMER, "", Heartbeat("c1", (), ())),
    ],
)
def test_a_session_in_a_heartbeats_terms(kind: ClientKind, group: str, expected: Heartbeat) -> None:
    session = ClientSession(
        client_id="c1", address="10.0.0.9:7000", kind=kind, group=group,
        subscriptions={"T": ("a || b", "TAG")}, publishes=("T",), language="JAVA",
        version="5.0.7",
    )  # fmt: skip
    assert session.heartbeat("P") == expected


def test_the_broker_refuses_in_the_contracts_classes() -> None:
    """``broker.errors`` is the contract's hierarchy, not a copy: a door's table of classes
    maps what any room raises."""
    assert MessagingError is ServiceError
    for name in broker_errors.__all__:
        assert getattr(broker_errors, name) is getattr(messaging_errors, name)
        assert issubclass(getattr(messaging_errors, name), ServiceError)
    assert not issubclass(Refused, ServiceError)
