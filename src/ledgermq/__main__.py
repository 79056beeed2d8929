"""``python -m ledgermq``: the same as the ``ledgermq`` command (cli/main.py)."""

from __future__ import annotations

import sys

from ledgermq.cli.main import main

sys.exit(main())
