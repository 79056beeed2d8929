"""``ledgermq bench peers``: LedgerMQ side by side with other Raft-replicated systems.

Starts each system as a 3-node cluster on free loopback ports under a temporary directory
(LedgerMQ, NATS JetStream, RabbitMQ quorum queues, etcd), runs the same workloads against each,
interleaved in rounds, and prints one table with msgs/s, latency, server CPU per message, the
ratio LedgerMQ / peer and the durability each acknowledgement gives. A peer that is not installed
is skipped with one line that says how to install it.

``servers`` starts and kills server processes, ``workloads`` holds the workload shapes and the
Python load driver, one module per system, ``report`` the table / JSON / chart and ``run`` the
command line.
"""
