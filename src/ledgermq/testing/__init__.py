"""Shipped test harnesses: the seeded cluster simulator and its invariant checks.

Never imported by the production packages (the import-linter contract keeps it on top).
"""
