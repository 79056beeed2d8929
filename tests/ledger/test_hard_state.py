"""The ``currterm`` file: what is written is read back; a missing file is term 0; damage is
refused rather than guessed at."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ledgermq.errors import CorruptLogError
from ledgermq.ledger.hard_state import HARD_STATE_NAME, read_hard_state, write_hard_state
from ledgermq.raft import HardState

if TYPE_CHECKING:
    from pathlib import Path


def test_written_state_is_read_back_and_replaced(tmp_path: Path) -> None:
    assert read_hard_state(str(tmp_path)) == HardState()
    write_hard_state(str(tmp_path), HardState(3, "n1"))
    assert read_hard_state(str(tmp_path)) == HardState(3, "n1")
    write_hard_state(str(tmp_path), HardState(4, None))
    assert read_hard_state(str(tmp_path)) == HardState(4, None)
    assert not (tmp_path / (HARD_STATE_NAME + ".tmp")).exists()


@pytest.mark.parametrize("text", ["currTerm=three\n", "currTerm=-1\n"])
def test_a_damaged_file_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / HARD_STATE_NAME).write_text(text)
    with pytest.raises(CorruptLogError):
        read_hard_state(str(tmp_path))


def test_the_rebuilding_mark_is_written_only_while_set(tmp_path: Path) -> None:
    """A node rebuilding after a lost disk keeps the mark across restarts (issue 13 item 1);
    DLedger's own file format is unchanged otherwise."""
    write_hard_state(str(tmp_path), HardState(5, "n2", rebuilding=True))
    assert "rebuilding=true" in (tmp_path / HARD_STATE_NAME).read_text()
    assert read_hard_state(str(tmp_path)) == HardState(5, "n2", rebuilding=True)
    write_hard_state(str(tmp_path), HardState(5, "n2"))
    assert (tmp_path / HARD_STATE_NAME).read_text() == "currTerm=5\nvoteLeader=n2\n"
    assert read_hard_state(str(tmp_path)) == HardState(5, "n2")
