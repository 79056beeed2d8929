"""The Messages page's searches are paged (issue 28 item 6): a next page past 64, ``&max=``
honoured up to its cap, and a key search that gathers past the 64 a broker answers at once."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, cast

import pytest

pytest.importorskip("httpx2", reason="Starlette's TestClient needs httpx")
pytest.importorskip("starlette", reason="the console extra is not installed")

from ledgermq.console import search
from ledgermq.errors import ConfigError
from tests.console.stand_in import StandInAdmin, client, message

if TYPE_CHECKING:
    from ledgermq.client import Admin


def test_page_parameters_and_their_refusals() -> None:
    assert search.page_size(None) == search.PAGE_DEFAULT == 64
    assert search.page_size("200") == 200
    assert search.page_size(str(search.PAGE_MAX)) == search.PAGE_MAX
    for bad in ("0", "-3", "lots", str(search.PAGE_MAX + 1)):
        with pytest.raises(ConfigError, match=f"a page shows 1 to {search.PAGE_MAX} messages"):
            search.page_size(bad)
    assert search.page_number(None) == 1
    assert search.page_number("3") == 3
    with pytest.raises(ConfigError, match="pages are numbered from 1"):
        search.page_number("0")


def test_a_cut_says_whether_more_follow_and_where_the_search_stops() -> None:
    found = [message("T", n) for n in range(130)]
    first = search.cut(found[: search.wanted(1, 64)], 1, 64)
    assert (first.first, first.last, first.more) == (1, 64, True)
    third = search.cut(found[: search.wanted(3, 64)], 3, 64)
    assert (third.first, third.last, third.more) == (129, 130, False)
    assert [m.queue_offset for m in third.rows] == [128, 129]
    assert search.wanted(10_000, 500) == search.SEARCH_MAX + 1
    capped = search.cut([message("T", n) for n in range(search.SEARCH_MAX + 1)], 10, 500)
    assert capped.capped
    assert not capped.more
    assert capped.last == search.SEARCH_MAX


def test_a_key_search_gathers_past_one_brokers_answer_of_64() -> None:
    admin = StandInAdmin(topics={"T": [message("T", n, keys="k") for n in range(150)]})
    found = asyncio.run(search.by_key(cast("Admin", admin), "T", "k", 141))
    assert len(found) == 141
    assert [m.queue_offset for m in found[:2]] == [149, 148]  # newest first
    assert len({m.offset_msg_id for m in found}) == 141
    assert len(admin.calls) == 3  # 64, then 63 new (one repeated at the edge), then the rest
    everything = asyncio.run(search.by_key(cast("Admin", admin), "T", "k", 1000))
    assert len(everything) == 150


def test_a_key_search_gathers_more_than_64_stored_in_one_millisecond() -> None:
    """One batch (``seq 1 100 | ledgermq produce --keys k1``) is stored in one millisecond:
    asking again up to that millisecond brought the same 64 back, and the search stopped at
    64 of 100 with no next page. That millisecond is read whole instead, then the search goes
    on below it."""
    at = 1_764_000_000_500  # message n is stored n ms after store_ms: every one of these at ``at``
    one_ms = [message("T", n, keys="k1 other", store_ms=at - n) for n in range(100)]
    older = [message("T", 100 + n, keys="k1", store_ms=at - 500 - 100) for n in range(10)]
    noise = [message("T", 200 + n, keys="k2", store_ms=at - 200 - n) for n in range(5)]
    admin = StandInAdmin(topics={"T": one_ms + noise + older})
    found = asyncio.run(search.by_key(cast("Admin", admin), "T", "k1", 1000))
    assert len(found) == 110
    assert {m.queue_offset for m in found} == set(range(110))
    assert [m.queue_offset for m in found[-3:]] == [102, 101, 100]  # newest first
    page = asyncio.run(search.by_key(cast("Admin", admin), "T", "k1", 65))
    assert len(page) == 65


def test_the_messages_page_pages_by_key_and_by_time() -> None:
    admin = StandInAdmin(topics={"T": [message("T", n, keys="k") for n in range(130)]})
    console = client(admin)
    first = console.get("/messages?by=key&topic=T&key=k")
    assert first.status_code == 200
    assert "Messages 1 to 64 (more follow)" in first.text
    assert first.text.count('<tr><td class="stored">') == 64
    next_link = re.search(r'<a rel="next" href="([^"]+)"', first.text)
    assert next_link is not None
    second = console.get(next_link.group(1).replace("&amp;", "&"))
    assert "Messages 65 to 128 (more follow)" in second.text
    assert 'rel="prev"' in second.text
    last = console.get("/messages?by=key&topic=T&key=k&page=3")
    assert "Messages 129 to 130 of 130" in last.text
    assert 'rel="next"' not in last.text
    wide = console.get("/messages?by=time&topic=T&from=0&to=1900000000000&max=200")
    assert "Messages 1 to 130 of 130" in wide.text
    assert wide.text.count('<tr><td class="stored">') == 130
    refused = console.get(f"/messages?by=time&topic=T&from=0&max={search.PAGE_MAX + 1}")
    assert refused.status_code == 400
    assert f"a page shows 1 to {search.PAGE_MAX} messages" in refused.text
