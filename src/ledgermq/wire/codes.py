"""Request codes carried in the remoting header's ``code`` (anchors-dledger.md section 1.3).

Response codes travel in the same field of responses; DLedger's are ``raft.ResponseCode`` (the
wire layer does not interpret them). RocketMQ's broker and NameServer codes join in the broker step.
"""

from __future__ import annotations

import enum

__all__ = ["LedgerRequestCode"]


class LedgerRequestCode(enum.IntEnum):
    """``DLedgerRequestCode``: what a request to a ledger replica asks for."""

    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005
