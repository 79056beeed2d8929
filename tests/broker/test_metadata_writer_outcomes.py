"""What a metadata change the ledger did not acknowledge is answered with (offset commits, POP
acks, timer and transaction ops): a refusal stored nothing; an unknown outcome may still have
been stored and must not be called "not stored" (found by the chaos suite's POP work)."""

from __future__ import annotations

from ledgermq.broker.errors import MaybeStoredError, NotStoredError, UnavailableError
from ledgermq.broker.state.metadata_writer import _not_stored
from ledgermq.errors import LedgerDiskFullError, LedgerRequestError, OutcomeUnknownError


def test_unknown_outcomes_are_maybe_stored_refusals_are_not_stored() -> None:
    unknown = _not_stored(OutcomeUnknownError("term changed before the quorum", 1))
    assert isinstance(unknown, MaybeStoredError)
    assert "may or may not" in str(unknown)
    full = _not_stored(LedgerDiskFullError("the disk of replica n0 is full", 415))
    assert isinstance(full, UnavailableError)  # nothing stored, retry elsewhere
    refused = _not_stored(LedgerRequestError("entry too large", 420))
    assert isinstance(refused, NotStoredError)
