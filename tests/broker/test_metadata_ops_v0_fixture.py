"""Today's logs still replay: metadata ops as release 0.1.0 wrote them (format version 0, no
``"v"``) decode to the typed ops and apply to the state that release reached (issue 26 item 6).

``tests/fixtures/metadata_ops_v0.json`` holds the exact bytes of every op kind and every record
kind inside one, made with the code before typed ops existed (``make_metadata_ops_v0.py``, which
says how), and that code's metadata snapshot after applying them. Regenerating it to make a
test pass defeats it (docs/operations/upgrades.md). The logs of a real group are read by
tests/broker/test_store_v1_fixture.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from ledgermq.broker.pop import (
    Acked,
    DeadLettered,
    DeadLetterReason,
    Delivered,
    InvisibilityChanged,
    PopSettings,
)
from ledgermq.broker.state.group_config import SubscriptionGroupConfig
from ledgermq.broker.state.metadata import BrokerMetadata
from ledgermq.broker.state.ops import (
    CommitOffsetsOp,
    DelayOffsetsOp,
    DeleteGroupOp,
    DeleteTopicOp,
    MetadataOp,
    PopOp,
    PutGroupOp,
    PutTopicOp,
    TimerOp,
    TxnOp,
    decode_op,
)
from ledgermq.broker.timers import Fired, Firing, Recalled
from ledgermq.wire.route import TopicConfig

FIXTURE = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "metadata_ops_v0.json").read_text("utf-8")
)
T = FIXTURE["nowMs"]
_SETTINGS = PopSettings(fifo=False, max_attempts=2)
_POP = ("plain-consumers", "Orders", 1)
_FIFO = ("fifo-consumers", "Orders", 0)

EXPECTED: list[MetadataOp | None] = [  # None: a timer message record, not an op
    PutTopicOp(
        TopicConfig(
            "Orders", 4, 4, 6, "SINGLE_TAG", 0, order=True, attributes={"+message.type": "FIFO"}
        )
    ),
    PutTopicOp(TopicConfig("Doomed", 2, 2)),
    PutTopicOp(TopicConfig("Orders", 8, 8, 6, order=True)),
    PutGroupOp(
        SubscriptionGroupConfig(
            "fifo-consumers", consume_message_orderly=True, retry_max_times=3, retry_queue_nums=2
        )
    ),
    PutGroupOp(SubscriptionGroupConfig("plain-consumers")),
    PutGroupOp(SubscriptionGroupConfig("doomed-consumers", consume_enable=False)),
    CommitOffsetsOp(
        (
            ("plain-consumers", "Orders", 0, 17),
            ("plain-consumers", "Orders", 1, 4),
            ("doomed-consumers", "Orders", 2, 9),
            ("plain-consumers", "Doomed", 0, 3),
        )
    ),
    CommitOffsetsOp((("plain-consumers", "Orders", 0, 21),)),
    DelayOffsetsOp({1: 5, 3: 12, 18: 2}),
    DelayOffsetsOp({3: 13}),
    PopOp(_POP, _SETTINGS, tuple(Delivered(i, i, 1, T, T + 30_000, None) for i in range(4))),
    PopOp(_POP, _SETTINGS, (Acked(0, 0),)),
    PopOp(_POP, _SETTINGS, (InvisibilityChanged(1, 1, 4, T + 1_000, T + 90_000),)),
    PopOp(
        _POP,
        _SETTINGS,
        (
            Delivered(2, 5, 2, T + 31_000, T + 61_000, None),
            DeadLettered(3, 3, T + 31_000, DeadLetterReason.FORWARDED),
        ),
    ),
    PopOp(_POP, _SETTINGS, (DeadLettered(2, 5, T + 62_000, DeadLetterReason.MAX_ATTEMPTS),)),
    PopOp(
        _FIFO,
        PopSettings(fifo=True, max_attempts=3),
        (
            Delivered(0, 0, 1, T, T + 10_000, "order-7"),
            Delivered(1, 1, 1, T, T + 10_000, "order-8"),
        ),
    ),
    PopOp(_FIFO, PopSettings(fifo=True, max_attempts=5), ()),
    PopOp(("doomed-consumers", "Doomed", 0), PopSettings(), (Delivered(0, 0, 1, T, T, None),)),
    None,
    None,
    None,
    TimerOp((Firing(100, T + 5_000),)),
    TimerOp((Recalled(200, T + 5_500),)),
    TimerOp((Fired(100),)),
    TimerOp((Firing(300, T + 9_000_000), Fired(999))),
    TxnOp(((0, "check"), (1, "check"), (1, "check"), (3, "check"))),
    TxnOp(((1, "rollback"), (0, "commit"))),
    TxnOp(((2, "discard"), (1, "commit"))),
    TxnOp(((4, "commit"),)),
    DeleteGroupOp("doomed-consumers"),
    DeleteTopicOp("Doomed"),
]


def _ops() -> list[tuple[int, bytes]]:
    return [(e["index"], e["op"].encode("ascii")) for e in FIXTURE["entries"] if "op" in e]


def test_every_v0_op_decodes_to_its_typed_op() -> None:
    decoded = [
        decode_op(entry["op"].encode("ascii")) if "op" in entry else None
        for entry in FIXTURE["entries"]
    ]
    assert decoded == EXPECTED
    kinds = {type(op) for op in decoded if op is not None}
    assert kinds == {
        PutTopicOp,
        DeleteTopicOp,
        PutGroupOp,
        DeleteGroupOp,
        CommitOffsetsOp,
        DelayOffsetsOp,
        PopOp,
        TimerOp,
        TxnOp,
    }


def _replay(ops: dict[int, bytes]) -> dict[str, Any]:
    """The fixture's entries applied as the dispatcher does, with ``ops`` for the op bodies."""
    metadata = BrokerMetadata()
    for entry in FIXTURE["entries"]:
        index = entry["index"]
        if "op" in entry:
            metadata.apply(index, decode_op(ops[index]), T + index)
        else:
            record = base64.b64decode(entry["timerRecord"])
            metadata.timers.on_timer_record(index, entry["timerOffset"], record)
    snapshot: dict[str, Any] = json.loads(metadata.snapshot())
    return snapshot


def test_the_v0_log_applies_to_the_state_release_0_1_0_reached() -> None:
    assert _replay(dict(_ops())) == FIXTURE["snapshot"]


def test_a_v1_op_is_the_v0_object_plus_v_so_release_0_1_0_applies_it_too() -> None:
    """Release 0.1.0 reads the keys it knows and ignores others: a v1 op reads the same to it
    (docs/operations/upgrades.md). The bytes are v0's with ``"v":1`` last (keys are sorted),
    and a log of v1 ops applies to the same state."""
    reencoded = {}
    for index, body in _ops():
        v1 = decode_op(body).encode()
        assert v1 == body[:-1] + b',"v":1}'
        assert decode_op(v1) == decode_op(body)
        reencoded[index] = v1
    assert _replay(reencoded) == FIXTURE["snapshot"]
