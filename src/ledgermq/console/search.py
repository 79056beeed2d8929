"""The Messages page's searches, paged: ``&max=`` messages a page (up to ``PAGE_MAX``), a next
page while more match, up to ``SEARCH_MAX`` matches in all.

A broker answers a key lookup (QUERY_MESSAGE) with at most 64 messages, the newest of the time
range asked, so a search that asks once stops silently at 64. ``by_key`` asks again with the
range ending where a full answer ended, for each broker whose answer was full, until it has
enough or nothing new comes; a millisecond that holds more than a full answer (a producer's
batch is stored in one) is read whole by time, and the search goes on below it. A time search
asks ``Admin.messages_between`` for as many as the page needs. Pages are counted from the first
match each time (no state between requests: a page's link works in any browser and after a
restart), which is why the total is bounded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

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
KEY_BATCH: Final = 64
"""Most messages a broker returns for one key lookup (it clamps ``maxNum`` to 64)."""


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
    first, gathered past the 64 a broker returns at once."""
    found: dict[str, MessageExt] = {}
    end_ms = 1 << 62
    while len(found) < limit:
        batch = await admin.query_message(topic, key, max_num=KEY_BATCH, end_ms=end_ms)
        new = [m for m in batch if m.offset_msg_id not in found]
        found.update((m.offset_msg_id, m) for m in new)
        per_broker = Counter(m.store_host for m in batch)
        full = [host for host, count in per_broker.items() if count >= KEY_BATCH]
        if not full:
            break  # every broker gave all it had
        if not new:
            # More than a full answer was stored in millisecond ``end_ms`` (one batch of a
            # producer is): asking up to it brings the same ones back. Read that millisecond
            # whole, then go on below it.
            found.update(
                (m.offset_msg_id, m)
                for m in await admin.messages_between(
                    topic, end_ms, end_ms, max_messages=SEARCH_MAX + 1
                )
                if key in m.keys or m.properties.get("UNIQ_KEY") == key
            )
            end_ms -= 1
            continue
        # ask again up to where the latest-ending full answer stopped (inclusive: messages
        # of that millisecond not yet seen come back; the seen ones are dropped above)
        end_ms = max(min(m.store_timestamp for m in batch if m.store_host == h) for h in full)
    ordered = sorted(
        found.values(), key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True
    )
    return ordered[:limit]
