"""The last hour of put/get per second (issue 28 item 6): the bounded ring of rates, the SVG
strip's geometry, the sampler over the stand-in cluster, and the strips on the pages (inline
SVG: no script, nothing fetched from elsewhere, the same security headers)."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("httpx2", reason="Starlette's TestClient needs httpx")
pytest.importorskip("starlette", reason="the console extra is not installed")

from ledgermq.cli.main import build_parser
from ledgermq.client import ConsumerProgress
from ledgermq.console import history
from ledgermq.console.access import AclMode
from ledgermq.console.headers import SECURITY_HEADER_FIELDS
from ledgermq.console.history import History, Sampler, strip
from ledgermq.errors import LedgerMQError
from tests.console.stand_in import BROKER, StandInAdmin, StandInLink, client, message
from tests.console.test_login import FakeAdmin
from tests.console.test_login import _client as login_client
from tests.console.test_login import _sign_in as sign_in
from tests.console.test_rates import FakeClock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ledgermq.console.link import ClusterLink


def _link(link: ClusterLink | None) -> Callable[[], Awaitable[ClusterLink | None]]:
    async def given() -> ClusterLink | None:
        return link

    return given


def test_rates_per_interval_and_a_counter_that_went_down() -> None:
    clock = FakeClock()
    h = History(clock, interval_s=10)
    h.record("a put", 100)
    assert h.series("a put") == []  # one reading is no rate yet
    clock.ms = 10_000
    h.record("a put", 300)
    assert h.series("a put") == [(10_000, 20.0)]
    clock.ms = 20_000
    h.record("a put", 5)  # the broker restarted: no point, and it starts afresh
    clock.ms = 30_000
    h.record("a put", 25)
    assert h.series("a put") == [(10_000, 20.0), (30_000, 2.0)]
    clock.ms = 40_000
    h.record("a put", None)  # not readable now: a gap, then afresh
    clock.ms = 50_000
    h.record("a put", 1000)
    assert len(h.series("a put")) == 2


def test_one_hour_of_points_and_a_bounded_number_of_series() -> None:
    clock = FakeClock()
    h = History(clock, interval_s=10)
    assert h.points_per_series == 361
    for n in range(1000):
        clock.ms = n * 10_000
        h.record("busy put", n * 5)
    points = h.series("busy put")
    assert len(points) == 361  # the ring keeps one hour
    assert points[0][0] == clock.ms - 3600_000
    assert all(rate == 0.5 for _, rate in points)
    assert h.max_series * h.points_per_series <= history.MAX_POINTS
    for n in range(h.max_series + 10):
        h.record(f"topic t{n} put", 0)
        clock.ms += 1000
        h.record(f"topic t{n} put", 1)
    assert len(h) == h.max_series  # the least recently updated were dropped
    for n in range(3 * h.max_series):  # read once each (topics made and deleted): no series
        h.record(f"topic once{n} put", 1)
    assert len(h._last) <= 2 * h.max_series  # and no reading kept for ever either
    assert h.series("busy put") == []
    assert h.series(f"topic t{h.max_series + 9} put") != []
    assert History(clock, interval_s=0.01).interval_s == history.MIN_INTERVAL_S


def test_a_strip_is_time_across_and_rate_up() -> None:
    now = 3600_000 * 5
    drawn = strip([(now - 3600_000, 0.0), (now, 10.0)], [(now - 1800_000, 5.0)], now)
    assert drawn.peak == 10.0
    assert drawn.put == "0.0,47.0 360.0,1.0"
    assert drawn.get == "180.0,24.0"
    assert (drawn.last_put, drawn.last_get) == (10.0, 5.0)
    idle = strip([(now, 0.0)], [], now)
    assert idle.peak == 1.0  # an idle hour is a flat line at the bottom
    assert idle.get == ""
    assert strip([], [], now).empty


def test_the_sampler_reads_brokers_and_topics() -> None:
    clock = FakeClock()
    admin = StandInAdmin(
        topics={"Orders": [message("Orders", n) for n in range(10)], "%RETRY%g": []},
        progress={"g": [ConsumerProgress("Orders", "broker-a", 0, 10, 4)]},
        runtime={"brokerRole": "SYNC_MASTER", "putMessages": "100", "getMessages": "40"},
    )
    h = History(clock, interval_s=10)
    sampler = Sampler(_link(StandInLink(admin)), h)
    asyncio.run(sampler.sample())
    clock.ms = 10_000
    admin.topics["Orders"] += [message("Orders", n) for n in range(10, 60)]
    admin.progress["g"] = [ConsumerProgress("Orders", "broker-a", 0, 60, 24)]
    admin.runtime |= {"putMessages": "600", "getMessages": "240"}
    asyncio.run(sampler.sample())
    assert h.series(f"broker {BROKER} put") == [(10_000, 50.0)]
    assert h.series(f"broker {BROKER} get") == [(10_000, 20.0)]
    assert h.series("topic Orders put") == [(10_000, 5.0)]
    assert h.series("topic Orders get") == [(10_000, 2.0)]
    assert h.series("topic %RETRY%g put") == []  # system topics are not sampled


def test_the_sampler_keeps_going_and_says_why_it_has_no_history() -> None:
    class Down(StandInAdmin):
        async def topic_list(self) -> list[str]:
            raise OSError("connection refused")

    sampler = Sampler(_link(StandInLink(Down())), History(FakeClock(), interval_s=1))

    async def run() -> None:
        sampler.start()
        for _ in range(100):
            if sampler.error is not None:
                break
            await asyncio.sleep(0.01)
        await sampler.stop()

    asyncio.run(run())
    assert sampler.error == "connection refused"


def test_the_pages_draw_the_strips_inline() -> None:
    clock = FakeClock()
    admin = StandInAdmin(
        topics={"Orders": [message("Orders", 0)]},
        runtime={"brokerRole": "SYNC_MASTER", "putMessages": "0", "getMessages": "0"},
    )
    console = client(admin, clock)
    sampler: Sampler = console.app.state.sampler  # type: ignore[attr-defined]
    before = console.get("/").text
    assert "the first points come after two samples" in before
    for n in range(1, 4):
        asyncio.run(sampler.sample())
        clock.ms = n * 10_000
        admin.topics["Orders"].append(message("Orders", n))
        admin.runtime["putMessages"] = str(n * 100)
    cluster = console.get("/")
    strip_svg = re.search(r'<svg class="strip"[^>]*>.*?</svg>', cluster.text, re.DOTALL)
    assert strip_svg is not None
    assert '<polyline class="put" points="' in strip_svg.group(0)
    assert "put 10.0/s" in cluster.text
    topic = console.get("/topics/Orders").text
    assert '<figure class="strip" data-strip="Orders">' in topic
    assert "put 0.1/s" in topic
    live = console.get("/live/topics/Orders").text
    assert '<polyline class="put"' in live
    for page in (cluster, console.get("/topics/Orders")):
        for name, value in SECURITY_HEADER_FIELDS.items():
            assert page.headers[name] == value
        assert "<script>" not in page.text  # the one script is /static/console.js
        assert not re.search(r'(src|href)="(https?:)?//', page.text)  # nothing from elsewhere


def test_with_acl_on_the_charts_are_sampled_as_the_signed_in_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No account of its own and ACL on: nothing is sampled (the pages say why) until an
    operator signs in, then the samples are signed with their account."""
    signed_as: list[str] = []

    async def runtime(self: FakeAdmin, address: str) -> dict[str, str]:
        signed_as.append(self.credentials.access_key if self.credentials else "nobody")
        return {"brokerRole": "SYNC_MASTER", "putMessages": "5", "getMessages": "0"}

    async def nothing(self: FakeAdmin, *args: object) -> dict[str, object]:
        return {}

    monkeypatch.setattr(FakeAdmin, "broker_runtime_info", runtime)
    monkeypatch.setattr(FakeAdmin, "topic_list", nothing, raising=False)
    monkeypatch.setattr(FakeAdmin, "consumer_lags", nothing, raising=False)
    console, _ = login_client(AclMode.ON)
    sampler: Sampler = console.app.state.sampler  # type: ignore[attr-defined]
    with pytest.raises(LedgerMQError, match="nobody is signed in now"):
        asyncio.run(sampler.sample())
    assert signed_as == []
    sign_in(console, "ops-admin", "ops-admin-secret")
    asyncio.run(sampler.sample())
    assert signed_as[-1] == "ops-admin"


def test_the_sampling_interval_option_names_its_range(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["console", "--history-interval", "2.5"]).history_interval == 2.5
    assert parser.parse_args(["console"]).history_interval == history.DEFAULT_INTERVAL_S
    for bad in ("0.5", "nan", "soon", "7200"):
        with pytest.raises(SystemExit):
            parser.parse_args(["console", "--history-interval", bad])
        assert "give the seconds between samples, 1 to 3600" in capsys.readouterr().err
