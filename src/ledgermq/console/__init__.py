"""``ledgermq console``: a web console for a LedgerMQ cluster, like RocketMQ Dashboard.

It sits beside ``ledgermq.cli`` (DESIGN.md, "two front doors, one house"): everything it shows
or does goes through the ``client`` package (``Admin``, ``Producer``), never broker internals,
so it works against any cluster it can reach, ours or RocketMQ's. Pages are rendered on the
server (Starlette + Jinja2, served by uvicorn in the caller's event loop); one small script
refreshes the live parts by polling. Every asset is served by the package: nothing is loaded
from the internet.

The web stack is the ``console`` extra (``pip install 'ledgermq[console]'``); importing this
package without it raises ``ImportError`` naming the extra.
"""

from __future__ import annotations

__all__ = ["MISSING_EXTRA", "console_available"]

MISSING_EXTRA = "the console needs the `console` extra: pip install 'ledgermq[console]'"


def console_available() -> bool:
    """Whether the web stack is installed (the quickstart starts the console only then)."""
    from importlib.util import find_spec  # noqa: PLC0415 - only asked by the quickstart

    return all(find_spec(name) is not None for name in ("starlette", "jinja2", "uvicorn"))
