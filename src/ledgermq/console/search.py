"""The Messages page's searches, paged: ``&max=`` messages a page (up to ``PAGE_MAX``), a next
page while more match, up to ``SEARCH_MAX`` matches in all.

A broker answers a key lookup (QUERY_MESSAGE) with at most 64 messages, so a search that asks
once stops silently at 64: ``by_key`` gathers past them (``ledgermq.client.key_search``). A
time search asks ``Admin.messages_between`` for as many as the page needs. Pages are counted from
the first match each time (no state between requests: a page's link works in any browser and
after a restart), which is why the total is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.client.key_search import KEY_BATCH, newest_by_key
from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from ledgermq.client import Admin
    from ledgermq.wire import MessageExt

__all__ = [
    "KEY_BATCH",
    "PAGE_DEFAULT",
    "PAGE_MAX",
    "SEARCH_MAX",
    "Page",
    "by_key",
    "cut",
    "page_number",
    "page_size",
]

PAGE_DEFAULT: Final = 64
"""Messages a page shows when the address has no ``max``."""
PAGE_MAX: Final = 500
"""Most messages one page shows (``&max=`` above it is refused with this number)."""
SEARCH_MAX: Final = 5000
"""Most matches a search pages through; past them the page says to narrow the search."""


def page_size(text: str | None) -> int:
    """The ``max`` parameter: ``PAGE_DEFAULT`` when absent.

    Raises:
        ConfigError: not a whole number from 1 to ``PAGE_MAX``.
    """
    if text is None or not text.strip():
        return PAGE_DEFAULT
    try:
        size = int(text)
    except ValueError:
        size = 0
    if not 1 <= size <= PAGE_MAX:
        raise ConfigError(f"max={text!r}: a page shows 1 to {PAGE_MAX} messages")
    return size


def page_number(text: str | None) -> int:
    """The ``page`` parameter, counted from 1 (1 when absent).

    Raises:
        ConfigError: not a whole number of at least 1.
    """
    if text is None or not text.strip():
        return 1
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"page={text!r}: pages are numbered from 1")
    return number


@dataclass(frozen=True)
class Page:
    """One page of a search's matches."""

    rows: list[MessageExt]
    number: int
    size: int
    more: bool
    """More matches follow this page."""
    capped: bool
    """The search stopped at ``SEARCH_MAX`` matches: there may be more than it can page."""

    @property
    def first(self) -> int:
        """The 1-based position of the page's first row among all matches."""
        return (self.number - 1) * self.size + 1

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1


def wanted(number: int, size: int) -> int:
    """How many matches to gather for page ``number``: its rows and one more (to know if a
    next page exists), never past ``SEARCH_MAX`` (and one to know it was reached)."""
    return min(number * size + 1, SEARCH_MAX + 1)


def cut(found: list[MessageExt], number: int, size: int) -> Page:
    """Page ``number`` of ``found`` (gathered with ``wanted``)."""
    capped = len(found) > SEARCH_MAX
    found = found[:SEARCH_MAX]
    start = (number - 1) * size
    rows = found[start : start + size]
    return Page(rows, number, size, more=len(found) > start + size, capped=capped)


async def by_key(admin: Admin, topic: str, key: str, limit: int) -> list[MessageExt]:
    """Up to ``limit`` messages of ``topic`` whose KEYS or UNIQ_KEY include ``key``, newest
    first, gathered past the 64 a broker returns at once (``newest_by_key``)."""
    return await newest_by_key(admin, topic, key, limit)
