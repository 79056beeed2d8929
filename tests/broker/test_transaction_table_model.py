"""Model-based test of ``broker.state.transactions.TransactionTable``: hypothesis applies random
batches of ``txn`` ops (settlements, check-backs, repeats, conflicting second settlements,
offsets below ``progress``) to the table and to a brute-force reference (a dict of every
offset's first settlement and check count, no window); after every op both agree on every
offset's outcome and count, ``progress`` is the first offset not settled, it never moves back,
and the table survives a snapshot through JSON. Replicas apply the same ops in the same order,
so this is what makes them agree.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.broker.state.ops import TxnOp
from ledgermq.broker.state.transactions import (
    CHECK,
    COMMIT,
    DISCARD,
    ROLLBACK,
    TransactionTable,
)

ACTIONS = st.sampled_from([COMMIT, ROLLBACK, DISCARD, CHECK, CHECK])
ITEMS = st.lists(st.tuples(st.integers(0, 24), ACTIONS), max_size=6)


class Reference:
    """Every offset's first settlement and its check count before it; nothing forgotten."""

    def __init__(self) -> None:
        self.outcome: dict[int, str] = {}
        self.checks: dict[int, int] = {}

    def apply(self, items: list[tuple[int, str]]) -> None:
        for offset, action in items:
            if offset in self.outcome:
                continue
            if action == CHECK:
                self.checks[offset] = self.checks.get(offset, 0) + 1
            else:
                self.outcome[offset] = action
                self.checks.pop(offset, None)

    def progress(self) -> int:
        offset = 0
        while offset in self.outcome:
            offset += 1
        return offset


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEMS, max_size=30))
def test_table_agrees_with_the_reference(batches: list[list[tuple[int, str]]]) -> None:
    table, reference = TransactionTable(), Reference()
    last_progress = 0
    for items in batches:
        table.apply(TxnOp(tuple(items)))
        reference.apply(items)
        assert table.progress == reference.progress()
        assert table.progress >= last_progress
        last_progress = table.progress
        for offset in range(26):
            expected = reference.outcome.get(offset)
            if offset < table.progress:
                assert table.outcome(offset) == "settled"
                assert expected is not None
            else:
                assert table.outcome(offset) == expected
                assert table.check_times(offset) == reference.checks.get(offset, 0)
        assert all(k >= table.progress for k in table.settled)
        assert all(k >= table.progress and k not in table.settled for k in table.checks)
        again = TransactionTable.restore(json.loads(json.dumps(table.snapshot())))
        assert (again.progress, again.settled, again.checks) == (
            table.progress, table.settled, table.checks,
        )  # fmt: skip
