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
from ledgermq.net.memory import MemoryTransport
from ledgermq.wire import MQResponseCode

from .harness import run_with_cluster

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

    run_with_cluster(tmp_path, test, in_virtual_time=True)


def test_the_answers_of_a_burst_of_sends_go_out_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The door writes the answers of one commit once per connection (``AnswerWriter``), not
    once per answer: 50 sends sent together on one connection are committed together and
    answered in one socket write, burst after burst."""

    async def test(cluster: Cluster) -> None:
        master = await cluster.master()
        first = await cluster.send(master.address, "T", b"makes the topic")
        assert first.code == MQResponseCode.SUCCESS, first.remark
        host, port = master.address.split(":")
        writes: list[int] = []
        real_write = MemoryTransport.write

        def write(transport: MemoryTransport, data: bytes | bytearray | memoryview) -> None:
            if transport.get_extra_info("sockname") == (host, int(port)):
                writes.append(len(data))
            real_write(transport, data)

        monkeypatch.setattr(MemoryTransport, "write", write)
        for burst in range(5):
            writes.clear()
            answers = await asyncio.gather(
                *(cluster.send(master.address, "T", b"b%d-%d" % (burst, n)) for n in range(50))
            )
            assert all(a.code == MQResponseCode.SUCCESS for a in answers)
            assert len(writes) == 1, writes

    run_with_cluster(tmp_path, test, in_virtual_time=True)
