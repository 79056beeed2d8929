"""LedgerMQ side by side with NATS JetStream (and more peers): ``python -m benchmarks.peers``.

The same code as ``ledgermq bench peers`` (``benchmarks.peers.run``): 3-node clusters on
free loopback ports under a temporary directory, the workloads of ``benchmarks/broker.py``
interleaved in rounds, one table with msgs/s, p50 / p99, server CPU per message, the ratio
LedgerMQ / peer and what each acknowledgement means; JSON and a PNG chart in
``benchmarks/results/``. Peers that are not installed are skipped with one line
(``apt-get install nats-server rabbitmq-server etcd-server``).
"""

from __future__ import annotations

import sys

from benchmarks.peers.run import main

if __name__ == "__main__":
    sys.exit(main())
