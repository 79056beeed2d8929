"""LedgerMQ's own benchmarks: ``ledgermq bench produce | consume`` (``broker``) against a running
cluster and ``ledgermq ledger bench`` (``ledger``), which starts its own replicas.

``stats`` holds the accounting every benchmark shares, ``cpu`` the server CPU per message,
``processes`` the child processes. The peers they are compared with (NATS, RabbitMQ, etcd,
PySyncObj) are the clone's ``benchmarks/peers``, not installed; ``checkout`` finds them.
"""
