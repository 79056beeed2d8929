"""``python -m ledgermq``: the same as the ``ledgermq`` command."""

import sys

from ledgermq.cli.main import main

sys.exit(main())
