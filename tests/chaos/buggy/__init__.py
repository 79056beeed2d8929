"""Brokers with a bug put in on purpose, to prove the chaos checker finds it, and the
poison-entry broker; the chaos harness runs them with ``python -m tests.chaos.buggy.<module>``
from a clone (never installed)."""
