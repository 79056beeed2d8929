"""The broker's state room: everything changed through the ledger's metadata channel.

Topics and subscription groups (``topics``, ``metadata``), consumer offsets and the other
metadata changes (``metadata``, ``metadata_writer``), the master's next queue offsets
(``queue_offsets``), the one object that holds the broker's parts (``broker_state``) and the
POP queues (``pop_table``: ``ledgermq.broker.pop`` models, one per group, topic and queue), the
transaction table (``transactions``: settled half messages and check counts), the timer
messages (``timer_table``: a ``ledgermq.broker.timers`` wheel fed by the log) (issue 16). Nothing
here knows a protocol; it never imports
``broker.service`` or ``broker.remoting`` (pyproject.toml's import-linter contracts).

The changes themselves are the typed, versioned ops of ``ops`` (the only reader and writer of
their on-disk format); ``group_config`` is a subscription group's record, used by both.
"""
