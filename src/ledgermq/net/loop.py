"""Running the event loop: uvloop when it is installed (the ``fast`` extra), asyncio otherwise.

uvloop roughly halves the per-frame cost of the transport; it is optional so that LedgerMQ
still installs where it does not build (Windows, exotic platforms).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine

__all__ = ["run", "uvloop_available"]

T = TypeVar("T")


def uvloop_available() -> bool:
    """True if ``run`` will use uvloop."""
    return importlib.util.find_spec("uvloop") is not None


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new event loop, as ``asyncio.run`` does."""
    try:
        import uvloop  # noqa: PLC0415 - optional, imported only when a loop is started
    except ImportError:
        return asyncio.run(main)
    result: T = uvloop.run(main)
    return result
