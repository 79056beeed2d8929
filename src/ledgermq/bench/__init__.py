"""Benchmarks of the replicated log against other systems (``ledgermq ledger bench``).

``stats`` holds the accounting both sides share; ``pysyncobj_log`` runs PySyncObj (optional extra
``bench``) as a 3-node replicated log with the same workloads.
"""
