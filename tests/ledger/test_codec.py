"""Raft messages survive the wire unchanged; nothing a peer sends escapes as anything but
ProtocolError.

Every test runs twice: with the C entry codec (when it is built) and on the Python references.
"""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.errors import ProtocolError
from ledgermq.ledger import codec
from ledgermq.ledger.codec import decode_message, encode_message
from ledgermq.raft import (
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    Membership,
    MembershipRecord,
    Message,
    PushEntryRequest,
    PushEntryResponse,
    PushKind,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from ledgermq.store import MemoryLedgerStore
from ledgermq.wire import FrameDecoder, LedgerRequestCode, RemotingCommand, encode_frame


@pytest.fixture(autouse=True, params=["c", "python"])
def entry_codec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which entry codec the test runs on (``codec._use_speedups``)."""
    if request.param == "c" and not codec.HAVE_SPEEDUPS:
        pytest.skip("the C extension ledgermq.store._speedups is not built")
    monkeypatch.setattr(codec, "_use_speedups", request.param == "c")
    return str(request.param)


ids = st.text(min_size=0, max_size=12)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
codes = st.sampled_from(list(ResponseCode))
kinds = st.sampled_from(list(PushKind))


def _stored_entries(count: int, body_bytes: int) -> list[object]:
    store = MemoryLedgerStore()
    return list(store.append_batch(3, [bytes([i % 256]) * body_bytes for i in range(count)]))


messages = st.one_of(
    st.builds(VoteRequest, ids, ids, ids, i64, i64, ids, i64, i64),
    st.builds(VoteResponse, ids, ids, ids, i64, i64, st.sampled_from(list(VoteResult)), codes),
    st.builds(HeartBeatRequest, ids, ids, ids, i64, i64, ids),
    st.builds(HeartBeatResponse, ids, ids, ids, i64, codes, i64),
    st.builds(
        PushEntryRequest,
        ids,
        ids,
        ids,
        i64,
        i64,
        ids,
        kinds,
        i64,
        i64,
        i64,
        st.builds(_stored_entries, st.integers(0, 5), st.integers(0, 300)),
    ),
    st.builds(PushEntryResponse, ids, ids, ids, i64, i64, codes, kinds, i64, i64, i64, i64, i64),
    st.builds(LeadershipTransferRequest, ids, ids, ids, i64, i64, ids, ids, i64),
    st.builds(LeadershipTransferResponse, ids, ids, ids, i64, i64, codes),
)


@settings(max_examples=400, deadline=None)
@given(messages)
def test_every_message_round_trips_through_a_frame(message: Message) -> None:
    command = encode_message(message)
    (received,) = FrameDecoder().feed(encode_frame(command))
    assert decode_message(received) == message


def test_requests_carry_dledger_codes_and_responses_the_result_code() -> None:
    vote = VoteRequest("g", "n0", "n1", 7, 3, "n0", 10, 2)
    command = encode_message(vote)
    assert command.code == LedgerRequestCode.VOTE
    body = json.loads(command.body)
    assert body["ledgerEndIndex"] == 10
    assert body["leaderId"] == "n0"
    response = encode_message(
        PushEntryResponse(
            "g", "n1", "n0", 7, 3, ResponseCode.INCONSISTENT_STATE, PushKind.COMPARE, 4
        )
    )
    assert response.code == ResponseCode.INCONSISTENT_STATE
    assert response.is_response
    assert response.ext_fields["requestCode"] == str(int(LedgerRequestCode.PUSH))


def test_a_restart_truncate_carries_the_leaders_membership() -> None:
    """A TRUNCATE that begins a follower's log at the leader's oldest entry carries the
    leader's committed membership (version 2 of the push body); other pushes stay version 1,
    which a replica of the version before membership changes reads (issue 27)."""
    membership = Membership(("n0", "n1", "n2")).with_learner("n3", "10.0.0.4:40911")
    record = MembershipRecord(41, membership, 3)
    first = tuple(MemoryLedgerStore().append_batch(3, [b"x" * 10]))
    push = PushEntryRequest(
        "g",
        "n0",
        "n3",
        1,
        3,
        "n0",
        PushKind.TRUNCATE,
        0,
        0,
        -1,
        first,
        record,
    )
    command = encode_message(push)
    assert command.body[0] == 2
    decoded = decode_message(command)
    assert isinstance(decoded, PushEntryRequest)
    assert decoded.membership == record
    assert list(decoded.entries) == list(first)
    plain = PushEntryRequest("g", "n0", "n3", 1, 3, "n0", PushKind.COMMIT, 0, 0)
    assert encode_message(plain).body[0] == 1


def test_push_entries_are_the_stored_bytes() -> None:
    entries = _stored_entries(3, 1024)
    push = PushEntryRequest("g", "n0", "n1", 1, 3, "n0", PushKind.APPEND, 0, -1, -1, entries)  # type: ignore[arg-type]
    body = encode_message(push).body
    assert len(body) < 3 * (48 + 1024) + 64  # binary, not JSON
    assert body.endswith(b"\x02" * 1024)


def _push_body(entry_count: int = 2) -> bytes:
    entries = _stored_entries(entry_count, 16)
    push = PushEntryRequest("g", "n0", "n1", 1, 3, "n0", PushKind.APPEND, 0, -1, -1, entries)  # type: ignore[arg-type]
    return encode_message(push).body


def test_a_damaged_entry_body_is_refused() -> None:
    body = bytearray(_push_body())
    body[-1] ^= 0xFF
    with pytest.raises(ProtocolError, match="CRC"):
        decode_message(RemotingCommand(LedgerRequestCode.PUSH, 1, body=bytes(body)))


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:-1], "entry header|past the end|bytes follow"),
        (lambda b: b + b"x", "after the last entry"),
        (lambda b: b[:10], "malformed body"),
        (lambda b: b"\x07" + b[1:], "version"),
        (lambda b: b[:1] + b"\x09" + b[2:], "push kind"),
    ],
)
def test_malformed_pushes_are_refused(mutate: object, reason: str) -> None:
    body = mutate(_push_body())  # type: ignore[operator]
    with pytest.raises(ProtocolError, match=reason):
        decode_message(RemotingCommand(LedgerRequestCode.PUSH, 1, body=body))


def test_an_absurd_entry_count_is_refused_before_any_work() -> None:
    body = bytearray(_push_body(0))
    struct.pack_into(">I", body, 42, 0xFFFFFFFF)
    with pytest.raises(ProtocolError, match="announced"):
        decode_message(RemotingCommand(LedgerRequestCode.PUSH, 1, body=bytes(body)))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"{",
        b'{"group":"g"}',
        b'{"group":"g","localId":"a","remoteId":"b","rid":1,"term":"3","leaderId":"a"}',
        b'{"group":"g","localId":"a","remoteId":"b","rid":true,"term":3,"leaderId":"a"}',
        b'{"group":"g","localId":"a","remoteId":"b","rid":1e400,"term":3,"leaderId":"a"}',
        b'{"group":"g","localId":"a","remoteId":"b","rid":99999999999999999999,"term":3,"leaderId":"a"}',
        b"[" * 100000,
    ],
)
def test_malformed_json_requests_are_refused(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_message(RemotingCommand(LedgerRequestCode.HEART_BEAT, 1, body=body))


def test_responses_need_to_say_what_they_answer() -> None:
    with pytest.raises(ProtocolError, match="requestCode"):
        decode_message(RemotingCommand(200, 1, flag=1, body=b"{}"))
    with pytest.raises(ProtocolError, match="not a replica-to-replica"):
        decode_message(RemotingCommand(LedgerRequestCode.APPEND, 1, body=b"{}"))


def test_unknown_vote_result_and_response_code_are_refused() -> None:
    good = encode_message(VoteResponse("g", "a", "b", 1, 1, VoteResult.ACCEPT))
    data = json.loads(good.body)
    for field, value in (("voteResult", "MAYBE"), ("code", 999), ("code", "200")):
        bad = RemotingCommand(
            good.code, 1, good.flag, ext_fields=good.ext_fields,
            body=json.dumps(data | {field: value}).encode(),
        )  # fmt: skip
        with pytest.raises(ProtocolError):
            decode_message(bad)


@settings(max_examples=1500, deadline=None)
@given(
    code=st.sampled_from([*LedgerRequestCode, 0, 200, -1]),
    flag=st.sampled_from([0, 1, 2, 3]),
    request_code=st.sampled_from(["51001", "51002", "51004", "51005", "x", "", "9" * 30]),
    body=st.one_of(st.binary(max_size=400), st.just(_push_body())),
    cut=st.integers(0, 400),
    flip=st.integers(0, 400),
)
def test_fuzz_only_protocol_errors_escape(
    code: int, flag: int, request_code: str, body: bytes, cut: int, flip: int
) -> None:
    mutated = bytearray(body[: len(body) - cut % (len(body) + 1)])
    if mutated:
        mutated[flip % len(mutated)] ^= 0x5A
    command = RemotingCommand(
        int(code), 1, flag, ext_fields={"requestCode": request_code}, body=bytes(mutated)
    )
    with contextlib.suppress(ProtocolError):
        decode_message(command)


@settings(max_examples=300, deadline=None)
@given(messages, st.data())
def test_fuzz_mutated_valid_messages(message: Message, data: st.DataObject) -> None:
    command = encode_message(message)
    body = bytearray(command.body)
    for _ in range(data.draw(st.integers(1, 4))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    mutated = RemotingCommand(
        command.code, 1, command.flag, ext_fields=command.ext_fields, body=bytes(body)
    )
    with contextlib.suppress(ProtocolError):
        decode_message(mutated)
