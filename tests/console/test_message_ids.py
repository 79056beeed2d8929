"""Issue 28 item 1 in the console: the id box takes the msgId a producer printed (its UNIQ_KEY)
as well as the offsetMsgId; an id nobody stored is "not found", not "cannot be reached"."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("uvicorn", reason="the console extra is not installed")

from ledgermq.cli.main import main
from ledgermq.console.link import ClusterLink
from ledgermq.console.server import ConsoleServer
from tests.cli.conftest import TcpFakeCluster
from tests.console.test_server import fetch

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def cluster() -> Iterator[TcpFakeCluster]:
    made = TcpFakeCluster()
    try:
        yield made
    finally:
        made.close()


@pytest.mark.timeout(60)
def test_the_id_box_finds_a_message_by_either_id(
    cluster: TcpFakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.add_broker({"Orders": 2})
    assert main(["produce", "-n", cluster.addr, "-t", "Orders", "console ids"]) == 0
    out, _ = capsys.readouterr()
    match = re.search(r"msgId=(\w+) offsetMsgId=(\w+)", out)
    assert match is not None, out
    msg_id, offset_msg_id = match.groups()
    unknown = "C0000202" + "1D81" + "ABCD" + "0000000000000010"

    async def check() -> None:
        server = ConsoleServer(ClusterLink(cluster.addr, request_timeout_s=2.0), port=0)
        await server.start()
        try:
            for given in (msg_id, offset_msg_id):
                status, page, _ = await asyncio.to_thread(
                    fetch, server.url + f"messages?by=id&id={given}"
                )
                assert status == 200, page
                assert "console ids" in page
                assert msg_id in page
                assert offset_msg_id in page
            status, page, _ = await asyncio.to_thread(fetch, server.url + f"messages/{unknown}")
            assert status == 404
            assert f"no message of any topic has the id {unknown}" in page
            assert "cannot be reached" not in page
        finally:
            await server.close()

    asyncio.run(check())
