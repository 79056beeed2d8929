"""LedgerMQ: a Raft-replicated message broker after RocketMQ's DLedger mode.

Importing the package is cheap: it pulls in no server, no event loop and no PySpark. Import the
part you need (`ledgermq.store`, later `ledgermq.client`) directly.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
