"""Client request bodies: APPEND framing round-trips; garbage gives only ProtocolError."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.errors import ProtocolError
from ledgermq.ledger.requests import Metadata, decode_bodies, encode_bodies


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=40))
def test_append_bodies_round_trip(bodies: list[bytes]) -> None:
    assert decode_bodies(encode_bodies(bodies)) == bodies


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.binary(max_size=50), min_size=1, max_size=8), st.data())
def test_damaged_append_bodies_raise_only_protocol_errors(
    bodies: list[bytes], data: st.DataObject
) -> None:
    raw = bytearray(encode_bodies(bodies))
    cut = data.draw(st.integers(0, len(raw)))
    del raw[len(raw) - cut :]
    if raw:
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_bodies(bytes(raw))


def test_metadata_round_trips_and_garbage_is_a_protocol_error() -> None:
    meta = Metadata("g", "n0", "n1", 3, "FOLLOWER", {"n0": "h:1", "n1": "h:2"}, 0, 9, 8)
    assert Metadata.from_json(meta.to_json()) == meta
    for bad in (b"", b"[]", b'{"group": 1}', b"{"):
        with contextlib.suppress(ProtocolError):
            Metadata.from_json(bad)
