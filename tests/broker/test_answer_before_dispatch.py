"""A committed send is answered before the dispatch pass its commit scheduled runs.

The commit that completes a group of sends queues their answers and schedules the dispatcher's
pass in the same loop pass; the answers' sockets used to be written only after that pass (on a
2-vCPU VM, 20-30 µs added to every answer). The remoting door writes them first
(``broker.remoting.answers.AnswerWriter``, told of the commit before the dispatcher is); a
message is still dispatched before anything that follows its answer can be served, so what a
client reads after an acknowledgement does not change.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.net import Connection
from ledgermq.wire import MQResponseCode

from .test_pop_remoting import _run

if TYPE_CHECKING:
    from pathlib import Path

    from .harness import Cluster

pytestmark = pytest.mark.timeout(60)


def test_the_answer_is_written_before_the_dispatch_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        first = await cluster.send(master.address, "T", b"makes the topic")
        assert first.code == MQResponseCode.SUCCESS, first.remark
        assert master.state is not None
        dispatcher = master.state.dispatcher
        events: list[str] = []
        real_flush = Connection.flush
        real_dispatch = dispatcher._dispatch

        def flush(conn: Connection) -> None:
            if conn._out:
                events.append("answer written")
            real_flush(conn)

        def dispatch(limit: int) -> int:
            done = real_dispatch(limit)
            if done:
                events.append("dispatched")
            return done

        monkeypatch.setattr(Connection, "flush", flush)
        monkeypatch.setattr(dispatcher, "_dispatch", dispatch)
        for n in range(3):
            sent = await cluster.send(master.address, "T", b"m%d" % n)
            assert sent.code == MQResponseCode.SUCCESS, sent.remark
            await asyncio.sleep(0.05)  # the followers' commit passes; the next send is alone
        assert events == ["answer written", "dispatched"] * 3
        pulled = await cluster.pull(master.address, "T", 0, 0)
        assert pulled.code == MQResponseCode.SUCCESS, pulled.remark

    _run(tmp_path, test)
