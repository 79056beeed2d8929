"""A hostile frame against a real broker group (issue 25 item 6).

An anonymous client sent one remoting frame whose JSON header held 700,000 extFields (16 MiB).
The broker parsed it on the event loop, the loop that also runs the replica's Raft: other
clients stalled 1.6-4.4 s and the master changed twice. Now the header's size is bounded
before the frame is buffered (``wire.frame.MAX_HEADER_BYTES``), so the frame is refused with
an answer as soon as its first eight bytes arrive. This test sends that frame three times to
the master while another client sends sequentially, and asserts that the other client's longest
wait stays short and that the group keeps its master and its term.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
import time
from typing import TYPE_CHECKING

import pytest

from ledgermq.broker.remoting.bounds import MAX_REQUEST_BODY_BYTES
from ledgermq.client import Admin, Producer
from ledgermq.wire import FrameDecoder, MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.frame import encode_frame
from ledgermq.wire.json_fields import MAX_JSON_VALUES

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

_log = logging.getLogger(__name__)

GROUP = "broker-a"
TOPIC = "HostileFrame"
FIELDS = 700_000
STALL_BOUND_S = 0.5
"""Generous for a loaded 2-core machine: a sequential send takes about a millisecond, and the
stall before the fix was 1.6-4.4 s."""


def _hostile_frame() -> bytes:
    """A SEND_MESSAGE request whose JSON header holds ``FIELDS`` extFields: just under 16 MiB,
    so that the frame-length limit alone does not refuse it."""
    fields = {f"f{i:06d}": "x" * 10 for i in range(FIELDS)}
    header = json.dumps(
        {"code": 10, "language": "JAVA", "version": 0, "opaque": 7, "flag": 0,
         "extFields": fields},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    assert len(header) + 4 < 16 * 1024 * 1024
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def _attack(address: str, frame: bytes) -> tuple[int | None, str | None]:
    """Send ``frame`` on a fresh connection; the code and remark of the answer, if any came.

    Blocking, for a thread of its own: the bystander's event loop must not pay for writing
    16 MiB, or its stalls would be the attacker's."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        with contextlib.suppress(OSError):  # refused early: the rest went unread
            sock.sendall(frame)
        decoder = FrameDecoder()
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return None, None
            if not data:
                return None, None
            answers = decoder.feed(data)
            if answers:
                return answers[0].code, answers[0].remark


async def _send_sequentially(
    namesrv: str, stop: asyncio.Event, gaps: list[float], started: asyncio.Event
) -> None:
    """Send one message after the other; the time each took goes to ``gaps``."""
    producer = Producer("hostile-frame-bystander", namesrv, send_timeout_s=10.0, retry_times=0)
    await producer.start()
    loop = asyncio.get_running_loop()
    try:
        while not stop.is_set():
            begin = loop.time()
            await producer.send(TOPIC, b"bystander")
            gaps.append(loop.time() - begin)
            started.set()
    finally:
        await producer.shutdown()


def _attacks_beside_a_bystander(
    cluster: BrokerCluster, master: str, frames: list[bytes]
) -> tuple[list[float], list[tuple[int | None, str | None]]]:
    """Send ``frames`` to the master one after the other, each on a fresh connection, while a
    bystander sends sequentially; the bystander's waits and each frame's answer."""

    async def scenario() -> tuple[list[float], list[tuple[int | None, str | None]]]:
        admin = Admin(cluster.namesrv_addr)
        await admin.start()
        try:
            await admin.create_topic(TOPIC, 4)
            await admin.wait_for_route(TOPIC)
        finally:
            await admin.close()
        stop, started = asyncio.Event(), asyncio.Event()
        gaps: list[float] = []
        bystander = asyncio.ensure_future(
            _send_sequentially(cluster.namesrv_addr, stop, gaps, started)
        )
        answers = []
        try:
            await asyncio.wait_for(started.wait(), 20)
            await asyncio.sleep(0.5)
            gaps.clear()
            address = cluster.address(GROUP, master)
            answers = [await asyncio.to_thread(_attack, address, frame) for frame in frames]
            await asyncio.sleep(2.0)
        finally:
            stop.set()
            await bystander
        return gaps, answers

    return asyncio.run(scenario())


def test_a_16_mib_header_neither_stalls_others_nor_moves_the_master(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    cluster = broker_clusters(replicas=3)
    master = cluster.wait_master(GROUP, 30.0)
    cluster.wait_routable()
    term = cluster.runtime_info(GROUP)[master]["dLegerTerm"]
    frame = _hostile_frame()

    begin = time.monotonic()
    gaps, answers = _attacks_beside_a_bystander(cluster, master, [frame] * 3)
    longest_ms = max(gaps) * 1000
    _log.warning(
        "hostile frame: %d sequential sends in %.1f s, longest %.1f ms; answers %s",
        len(gaps), time.monotonic() - begin, longest_ms,
        [(code, (remark or "")[:80]) for code, remark in answers],
    )  # fmt: skip
    views = cluster.runtime_info(GROUP)
    assert cluster.master(GROUP) == master, views
    assert views[master]["dLegerTerm"] == term, views
    assert longest_ms < STALL_BOUND_S * 1000, f"a sequential send waited {longest_ms:.0f} ms"
    for code, remark in answers:
        assert code == MQResponseCode.MESSAGE_ILLEGAL, (code, remark)
        assert remark is not None
        assert "exceeds the limit of 65536 bytes" in remark, remark


def _heartbeat_frame(body: bytes) -> bytes:
    return encode_frame(
        RemotingCommand(code=MQRequestCode.HEART_BEAT, opaque=9, ext_fields={}, body=body)
    )


def test_large_json_bodies_neither_stall_others_nor_move_the_master(
    broker_clusters: Callable[..., BrokerCluster],
) -> None:
    """The same bystander, against heartbeats: one of 14 MiB of tiny JSON values (parsed on
    the loop before the fix: over a second each), and the worst a heartbeat may still be (just
    under 1 MiB and just under ``MAX_JSON_VALUES`` values, which is parsed)."""
    cluster = broker_clusters(replicas=3)
    master = cluster.wait_master(GROUP, 30.0)
    cluster.wait_routable()
    term = cluster.runtime_info(GROUP)[master]["dLegerTerm"]
    huge = _heartbeat_frame(
        b'{"clientID":"c","producerDataSet":[],"consumerDataSet":[],"pad":['
        + b"0," * (7 * 1024 * 1024)
        + b"0]}"
    )
    worst = _heartbeat_frame(
        b'{"clientID":"c","producerDataSet":[],"consumerDataSet":[],"pad":['
        + b"0," * (MAX_JSON_VALUES - 10)
        + b'0],"x":"'
        + b"y" * (MAX_REQUEST_BODY_BYTES - 2 * MAX_JSON_VALUES - 200)
        + b'"}'
    )

    gaps, answers = _attacks_beside_a_bystander(cluster, master, [huge, worst, huge, worst])
    longest_ms = max(gaps) * 1000
    _log.warning(
        "large JSON bodies: %d sequential sends, longest %.1f ms; answers %s",
        len(gaps), longest_ms, [(code, (remark or "")[:80]) for code, remark in answers],
    )  # fmt: skip
    views = cluster.runtime_info(GROUP)
    assert cluster.master(GROUP) == master, views
    assert views[master]["dLegerTerm"] == term, views
    assert longest_ms < STALL_BOUND_S * 1000, f"a sequential send waited {longest_ms:.0f} ms"
    assert [code for code, _ in answers[::2]] == [MQResponseCode.INVALID_PARAMETER] * 2, answers
    assert [code for code, _ in answers[1::2]] == [MQResponseCode.SUCCESS] * 2, answers
