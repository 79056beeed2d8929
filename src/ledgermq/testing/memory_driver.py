"""Applying a ``Ready``'s log changes to a ``MemoryLedgerStore``, exactly as the server does.

The simulator, the golden interaction tests and the core benchmark persist through the ledger
server's own writer, so there is one implementation of "a Ready reaches the log".
"""

from __future__ import annotations

from ledgermq.ledger.log_writer import apply_log_changes

__all__ = ["apply_log_changes"]
