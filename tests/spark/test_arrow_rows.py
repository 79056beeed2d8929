"""The read path's rows: the C column builder against the reference (``rows_of_messages`` of
``decode_records``), and the pulls kept ahead of a queue range (no Spark session needed)."""

from __future__ import annotations

import zlib
from concurrent.futures import Future
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed (pip install 'ledgermq[spark]')"
)

from ledgermq.client import MessageQueue, PullStatus, RecordsPullResult  # noqa: E402
from ledgermq.errors import MessageFormatError, NetworkError  # noqa: E402
from ledgermq.spark import _io, arrow_rows  # noqa: E402
from ledgermq.spark.arrow_rows import ARROW_SCHEMA, rows_of_messages, rows_of_records  # noqa: E402
from ledgermq.wire import decode_records  # noqa: E402
from ledgermq.wire.message import SysFlag, encode_record  # noqa: E402

if TYPE_CHECKING:
    from ledgermq.client import SyncPullConsumer

needs_c = pytest.mark.skipif(
    not arrow_rows.HAVE_RECORD_COLUMNS, reason="the C extension _record_columns is not built"
)

# Properties strings built from pieces that stress the parser: the names the columns take,
# repeated names, empty names and values, a missing final \x02, non-ASCII text.
pieces = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "XTAGS", "\x01", "\x02", "a", "k1 k2", " ", "é", "🙂"]
)
property_strings = st.lists(pieces, max_size=16).map("".join)
records = st.lists(
    st.builds(
        lambda topic, queue_id, queue_offset, body, props, born, store, port, phy, reconsume: (
            encode_record(
                topic=topic,
                queue_id=queue_id,
                body=body,
                properties=props,
                born_timestamp=born,
                born_host=("10.1.2.3", 4000),
                store_timestamp=store,
                store_host=("192.168.7.9", port),
                queue_offset=queue_offset,
                physical_offset=phy,
                reconsume_times=reconsume,
            )
        ),
        st.sampled_from(["T", "Topic_é", "%RETRY%g"]),
        st.integers(0, (1 << 31) - 1),
        st.integers(0, (1 << 62)),
        st.binary(max_size=64),
        property_strings,
        st.integers(-(10**12), 10**15),
        st.integers(0, 10**15),
        st.integers(0, 65535),
        st.integers(-(1 << 63), (1 << 63) - 1),
        st.integers(0, 16),
    ),
    max_size=8,
).map(b"".join)


def _record(props: str = "UNIQ_KEY\x01ID1\x02", body: bytes = b"hello", sys_flag: int = 0) -> bytes:
    return encode_record(
        topic="T",
        queue_id=1,
        body=body,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000,
        born_host=("127.0.0.1", 5000),
        store_timestamp=1_700_000_000_001,
        store_host=("127.0.0.1", 10911),
        queue_offset=7,
        physical_offset=4096,
    )


@given(records)
def test_c_rows_equal_the_reference(buf: bytes) -> None:
    fast = rows_of_records("broker-a", buf)
    reference = rows_of_messages("broker-a", decode_records(buf))
    fast.validate(full=True)
    assert fast.schema.equals(ARROW_SCHEMA)
    assert fast.equals(reference), (fast.to_pylist(), reference.to_pylist())


@needs_c
def test_the_usual_records_take_the_c_path() -> None:
    from ledgermq.wire._record_columns import record_columns

    buf = _record() + _record("KEYS\x01a b\x02TAGS\x01t\x02x\x01y\x02")
    columns = record_columns(buf)
    assert columns is not None
    assert columns[0] == 2
    rows = rows_of_records("broker-a", buf).to_pylist()
    assert [r["msgId"] for r in rows] == ["ID1", "7F00000100002A9F0000000000001000"]
    assert [(r["keys"], r["tags"], r["properties"]) for r in rows] == [
        (None, None, []),
        ("a b", "t", [("x", "y")]),
    ]
    assert rows[0]["queueOffset"] == 7
    assert rows[0]["body"] == b"hello"


@needs_c
@pytest.mark.parametrize(
    "buf",
    [
        _record(body=zlib.compress(b"squeezed" * 10), sys_flag=SysFlag.COMPRESSED),
        _record("".join(f"p{i}\x01v\x02" for i in range(300))),  # more than the C path takes
        _record() + _record(body=zlib.compress(b"z"), sys_flag=SysFlag.COMPRESSED),
    ],
    ids=["compressed", "many-properties", "mixed"],
)
def test_other_records_go_the_reference_way(buf: bytes) -> None:
    from ledgermq.wire._record_columns import record_columns

    assert record_columns(buf) is None
    rows = rows_of_records("broker-a", buf)
    assert rows.equals(rows_of_messages("broker-a", decode_records(buf)))


def _patched(record: bytes, old: bytes, new: bytes) -> bytes:
    at = record.rindex(old)
    return record[:at] + new + record[at + len(old) :]


@pytest.mark.parametrize(
    "buf",
    [
        _record()[:-3],  # truncated
        _record() + b"\x00" * 10,  # stray bytes
        _patched(_record("a\x01Z\x02"), b"Z", b"\xff"),  # invalid UTF-8 in a property
        _patched(_record("WAIT\x01Z\x02"), b"Z", b"\xed\xa0\x80"),  # a surrogate, in WAIT
        _patched(_record(), b"\x00\x00\x00\x05hello", b"\x00\x00\x7f\xffhello"),  # body length
    ],
    ids=["truncated", "stray-bytes", "bad-utf8", "surrogate", "bad-body-length"],
)
def test_malformed_records_raise_the_reference_error(buf: bytes) -> None:
    with pytest.raises(MessageFormatError):
        decode_records(buf)
    with pytest.raises(MessageFormatError):
        rows_of_records("broker-a", buf)


def test_tags_filter_by_the_tag_string() -> None:
    buf = _record("TAGS\x01a\x02") + _record("TAGS\x01b\x02") + _record()
    assert rows_of_records("g", buf, frozenset({"b"})).column("tags").to_pylist() == ["b"]
    assert rows_of_records("g", b"").num_rows == 0


# ------------------------------------------------------------------ pulls kept ahead


class _FakeConsumer:
    """Serves a queue of ``size`` messages, ``per_pull`` at most per pull; notes every pull.

    A pull is answered when it is submitted (the future is done at once), so the order of the
    pulls asked is that of the submissions."""

    def __init__(self, size: int, per_pull: int, fail_at: int | None = None) -> None:
        self.size = size
        self.per_pull = per_pull
        self.fail_at = fail_at
        self.asked: list[int] = []

    def submit_pull_records(
        self, mq: MessageQueue, offset: int, max_nums: int, sub: str
    ) -> Future[RecordsPullResult]:
        future: Future[RecordsPullResult] = Future()
        self.asked.append(offset)
        if offset == self.fail_at:
            self.fail_at = None
            future.set_exception(NetworkError("connection reset"))
            return future
        count = min(max_nums, self.per_pull, self.size - offset)
        body = b"".join(_record() for _ in range(count))
        future.set_result(RecordsPullResult(PullStatus.FOUND, offset + count, 0, self.size, body))
        return future


def _read_offsets(consumer: _FakeConsumer, end: int, batch: int) -> list[int]:
    pulls = _io._Pulls(consumer, MessageQueue("T", "g", 0), end, batch, "*")  # type: ignore[arg-type]
    offset, seen = 0, []
    try:
        while offset < end:
            try:
                result = pulls.pull(offset)
            except NetworkError:
                continue
            seen.append(offset)
            offset = result.next_begin_offset
    finally:
        pulls.close()
    return seen


def test_pulls_ahead_follow_the_step_and_stop_at_the_end() -> None:
    consumer = _FakeConsumer(size=100, per_pull=10)
    assert _read_offsets(consumer, end=100, batch=32) == list(range(0, 100, 10))
    # The first pull asks for 32 and gets 10: from then on the pulls ahead step by 10, so
    # every offset is asked once and nothing past the end.
    assert sorted(consumer.asked) == list(range(0, 100, 10))


def test_a_failed_pull_ahead_is_retried_by_the_reader() -> None:
    consumer = _FakeConsumer(size=60, per_pull=10, fail_at=20)
    assert _read_offsets(consumer, end=60, batch=10) == list(range(0, 60, 10))
    assert consumer.asked.count(20) == 2


def test_one_consumer_per_namesrv_and_group(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, str]] = []

    class Consumer:
        def __init__(self, group: str, namesrv: str, **_: object) -> None:
            made.append((namesrv, group))

        def start(self) -> None: ...

        def close(self) -> None: ...

    monkeypatch.setattr(_io, "SyncPullConsumer", Consumer)
    monkeypatch.setattr(_io, "_consumers", {})
    first: SyncPullConsumer = _io.shared_consumer("ns:1", "g")
    assert _io.shared_consumer("ns:1", "g") is first
    _io.shared_consumer("ns:1", "h")
    assert made == [("ns:1", "g"), ("ns:1", "h")]
