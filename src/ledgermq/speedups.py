"""Whether the optional fast paths may run: the one environment read the pure layers need.

``LEDGERMQ_PURE_PYTHON=1`` at import time makes every module with a C (or orjson) fast path run
its pure-Python reference instead, to compare or to rule the fast path out. The pure layers
(``wire``, ``raft``) do no I/O and so do not read the environment themselves (tests/
test_architecture.py); like ``ledgermq.clock`` for time, this module reads it for them.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ["PURE_PYTHON"]

PURE_PYTHON: Final = os.environ.get("LEDGERMQ_PURE_PYTHON") == "1"
"""True: use the pure-Python references only."""
