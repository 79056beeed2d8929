"""The benchmarks of a clone (not installed): scripts, their results, and the peer systems
that ``ledgermq bench peers`` and ``ledgermq ledger bench`` compare against (``peers``)."""
