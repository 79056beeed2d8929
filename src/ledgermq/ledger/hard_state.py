"""The ``currterm`` file: the term and vote that must survive a restart (spec-election 1.5).

DLedger writes ``currTerm`` and ``voteLeader`` as Java properties; so do we, durably (the
store's ``replace_file_durably``, as for its checkpoint). A vote is granted only
after this returns, so a replica that crashes cannot vote twice in one term.
"""

from __future__ import annotations

import os
from typing import Final

from ledgermq.errors import CorruptLogError
from ledgermq.raft import HardState
from ledgermq.store.segment import replace_file_durably

__all__ = ["HARD_STATE_NAME", "read_hard_state", "write_hard_state"]

HARD_STATE_NAME: Final = "currterm"


def read_hard_state(directory: str) -> HardState:
    """The saved state, or term 0 with no vote when the file does not exist yet."""
    path = os.path.join(directory, HARD_STATE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return HardState()
    values = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#"
    )
    try:
        term = int(values.get("currTerm", "0"))
    except ValueError:
        reason = f"currTerm is not a number: {values['currTerm']!r:.30}"
        raise CorruptLogError(path, 0, reason) from None
    if term < 0:
        raise CorruptLogError(path, 0, f"negative currTerm {term}")
    vote = values.get("voteLeader") or None
    return HardState(term, vote, values.get("rebuilding") == "true")


def write_hard_state(directory: str, state: HardState) -> None:
    """Durably replace the saved state."""
    text = f"currTerm={state.term}\nvoteLeader={state.voted_for or ''}\n"
    if state.rebuilding:  # a key of ours; DLedger's reader ignores keys it does not know
        text += "rebuilding=true\n"
    data = text.encode()
    replace_file_durably(directory, HARD_STATE_NAME, data)
