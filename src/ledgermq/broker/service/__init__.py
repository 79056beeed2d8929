"""The broker's service room: protocol-neutral operations, one place each (DESIGN.md, "Growing
the broker: two front doors, one house").

Every front door (the remoting translators in ``broker.remoting``, the gRPC servicer of
``proxy.door`` over ``proxy.local_backend``) only translates: its wire fields in, a call here,
its wire fields out. What an operation means lives here once, over ``broker.state`` and
``broker.storage``, so the doors agree by construction and tests of semantics need no protocol.
Arguments and results are typed (dataclasses); refusals are ``broker.errors`` classes, which say
what the caller should do and name no protocol code (each door maps them:
``broker.remoting.errors``, ``proxy.status``).

Where each operation lives:

- ``send.SendService``: ``send`` / ``start`` (store a producer's messages; delay levels, retry
  and dead-letter routing, topic creation on first send). ``message_writer.MessageWriter`` is
  the one path by which messages enter the log (send, send-back, the delay scheduler).
- ``pull.PullService``: ``pull`` (read a queue from an offset, filtered, with long polling),
  ``read``, and the wake-ups the dispatcher drives (``on_arrival``, ``wake_all``).
- ``offsets.OffsetService``: consumer offsets (``commit``, ``consumer_offset``) and queue offsets
  (``queue_bounds``, ``earliest_store_time``, ``search_offset_by_timestamp``).
- ``retry.SendBackService``: ``send_back`` (a consumer's failed message to its retry or
  dead-letter topic); ``retry.DelayScheduler``: delayed messages to their topic when due.
- ``clients.ClientService``: ``client_alive`` / ``client_gone`` (a client's heartbeat or session,
  checked, into the registry; its group's subscription config and retry topic) and
  ``check_subscription`` (as a pull would check it).
- ``pop.PopService``: POP consumption (``receive``: messages made invisible for a time, each
  with a receipt handle; ``ack`` per message in any order; ``change_invisible``: re-arm, new
  handle; ``forward_to_dead_letters``), over the replicated POP queues of
  ``broker.state.pop_table``.
- ``transactions.TransactionService``: half messages (stored invisible by ``SendService``),
  ``end`` (commit once / roll back) and ``check_pass``, the master's check-back of half
  messages left open (``TransactionChecker`` runs it), over ``broker.state.transactions``.
- ``timers.TimerService``: timer messages (any delivery time: a send diverted to the timer
  topic, the master's driver that delivers it when due, ``recall``), over
  ``broker.state.timer_table``.
- ``admin.AdminService``: topics and subscription groups (create, update, delete, list), the
  offset table, topic and consume statistics, messages by offset or key, runtime information,
  leadership transfer.

The client registry (members of consumer groups, producer groups, queue locks) is the broker's,
in ``client_registry``: both doors feed it through ``clients.ClientService.client_alive`` (a
remoting HEART_BEAT, a v5 client's session), so every view sees every client.
"""
