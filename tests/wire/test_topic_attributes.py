"""RocketMQ's topic attribute changes (``+key=value`` / ``-key``), parsed and applied."""

from __future__ import annotations

import re

import pytest

from ledgermq.wire.topic_attributes import apply_changes, format_changes, parse_changes


def test_parse_apply_and_format() -> None:
    changes = parse_changes("+message.type=FIFO")
    assert changes == {"message.type": "FIFO"}
    assert format_changes(changes) == "+message.type=FIFO"
    assert parse_changes("") == {}
    assert apply_changes({}, changes, creating=True) == {"message.type": "FIFO"}
    kept = {"message.type": "FIFO"}
    assert apply_changes(kept, {}, creating=False) == kept
    assert apply_changes(kept, parse_changes("-message.type"), creating=False) == {}
    assert format_changes(parse_changes(" -message.type ")) == "-message.type"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("message.type=FIFO", "'+key=value' or '-key'"),
        ("+message.type=fifo", "may be DELAY, FIFO, MIXED, NORMAL, TRANSACTION"),
        ("+queue.type=BatchCQ", "unsupported topic attribute 'queue.type'"),
        ("+message.type=FIFO,-message.type", "changed twice"),
        ("-message.type=FIFO", "'+key=value' or '-key'"),
    ],
)
def test_bad_changes_are_refused_with_the_reason(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_changes(text)


def test_removals_need_something_to_remove() -> None:
    with pytest.raises(ValueError, match="being created"):
        apply_changes({}, {"message.type": None}, creating=True)
    with pytest.raises(ValueError, match=r"no attribute message\.type"):
        apply_changes({}, {"message.type": None}, creating=False)
