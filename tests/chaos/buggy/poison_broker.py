"""``python -m tests.chaos.buggy.poison_broker broker ...``: a broker whose writer commits a
*poison entry* on demand, to show that a committed entry no replica can apply never takes the
group down (issue 25 item 1).

A message sent to ``TRIGGER_TOPIC`` (an ordinary, valid topic: the doors let it through) is
stored by the master's message writer under ``POISON_TOPIC`` instead, ``%DLQ%orders.v1``: a
topic name no ConsumeQueue can have, which a group named ``orders.v1`` once got committed. That
is what the doors now refuse, so the record is written here straight through the commit log,
past their validation. Every replica's dispatcher must quarantine it (README "Operations") and
go on; the group keeps serving and every replica restarts. The patch lives only in this module,
which the chaos harness runs instead of ``python -m ledgermq`` (``--faults poison``) and so do
the real-process tests; the broker's own code has no switch for it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

from ledgermq.testing.chaos.nemesis import POISON_TOPIC, TRIGGER_TOPIC

__all__ = ["POISON_TOPIC", "TRIGGER_TOPIC", "install"]

_PATCHED: Final = "encode_records"
"""The name the message writer encodes its records with (imported into its module)."""


def install() -> None:
    """Make ``message_writer.encode_records`` store ``TRIGGER_TOPIC``'s messages under
    ``POISON_TOPIC``."""
    from ledgermq.broker.service import message_writer

    correct: Callable[..., tuple[bytes, list[int]]] = getattr(message_writer, _PATCHED)

    def poisoned(*, topic: str, **fields: Any) -> tuple[bytes, list[int]]:
        if topic == TRIGGER_TOPIC:
            topic = POISON_TOPIC  # THE POISON: a name no replica can index
        return correct(topic=topic, **fields)

    setattr(message_writer, _PATCHED, poisoned)


if __name__ == "__main__":
    from ledgermq.cli.main import main

    install()
    sys.exit(main())
