"""The broker's storage room: what is derived from the committed log, and how it is read.

The commit log view over the ledger (``commitlog``), the group-commit append that feeds it
(``append_group``), the ConsumeQueues (``consume_queue``, ``consume_queue_store``), the key index
(``key_index``), the dispatcher that builds queues and index from committed entries
(``dispatcher``), its checkpoint (``dispatch_checkpoint``) and the subscription filters
(``filter``). Nothing here knows a protocol or a request; it never imports ``broker.service`` or
``broker.remoting`` (pyproject.toml's import-linter contracts check it).
"""
