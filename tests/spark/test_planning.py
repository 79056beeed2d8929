"""Offset planning of the Spark connector (pure; no pyspark needed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import ConfigError
from ledgermq.spark.planning import (
    EARLIEST,
    LATEST,
    QueueRange,
    cap_offsets,
    flatten,
    nest,
    pack_ranges,
    parse_offset_spec,
    parse_sink_options,
    parse_source_options,
    plan_ranges,
    split_ranges,
)

keys = st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["broker-a", "broker-b"]),
                 st.integers(0, 7))  # fmt: skip


@given(st.dictionaries(keys, st.integers(0, 10_000), max_size=20))
def test_nest_and_flatten_round_trip_through_json(flat: dict[tuple[str, str, int], int]) -> None:
    assert flatten(json.loads(json.dumps(nest(flat)))) == flat


@given(
    st.dictionaries(keys, st.tuples(st.integers(0, 5_000), st.integers(0, 5_000)), max_size=16),
    st.integers(0, 64),
)
def test_split_ranges_cover_every_range_exactly(
    spans: dict[tuple[str, str, int], tuple[int, int]], min_partitions: int
) -> None:
    start = {k: min(a, b) for k, (a, b) in spans.items()}
    end = {k: max(a, b) for k, (a, b) in spans.items()}
    ranges = plan_ranges(start, end)
    parts = split_ranges(ranges, min_partitions)
    covered: dict[tuple[str, str, int], list[int]] = {}
    for p in parts:
        assert p.start < p.end
        covered.setdefault((p.topic, p.broker_name, p.queue_id), []).extend(range(p.start, p.end))
    for k, stop in end.items():
        expected = list(range(start[k], stop))
        assert sorted(covered.get(k, [])) == expected  # no gap, no overlap
    total = sum(r.size for r in ranges)
    if total >= min_partitions:
        assert len(parts) >= min(min_partitions, total) - len(ranges)


@given(st.lists(st.integers(1, 300), max_size=20), st.integers(1, 250))
def test_pack_ranges_keeps_every_range_once(sizes: list[int], per_partition: int) -> None:
    ranges = [QueueRange("T", "b", q, 10, 10 + n) for q, n in enumerate(sizes)]
    groups = pack_ranges(ranges, per_partition)
    assert sorted((r for g in groups for r in g), key=lambda r: r.queue_id) == ranges
    assert groups == pack_ranges(list(ranges), per_partition)  # a replayed batch: same split
    for i, group in enumerate(groups):
        rows = sum(r.size for r in group)
        if len(group) > 1:  # packed: only small ranges, in order, until the group is full
            assert all(r.size < per_partition for r in group)
            assert [r.queue_id for r in group] == sorted(r.queue_id for r in group)
            assert rows - group[-1].size < per_partition
        if i < len(groups) - 1 and len(group) > 1:
            assert rows >= per_partition  # only the last group may be short


def test_pack_ranges_examples() -> None:
    small = [QueueRange("T", "b", q, 0, 100) for q in range(8)]
    assert pack_ranges(small, 20_000) == [small]  # a small micro-batch: one task
    big = QueueRange("T", "b", 9, 0, 50_000)
    assert pack_ranges([small[0], big, small[1]], 150) == [[big], [small[0], small[1]]]


@given(
    st.dictionaries(keys, st.tuples(st.integers(0, 1_000), st.integers(0, 1_000)), max_size=16),
    st.integers(1, 500),
)
def test_cap_offsets_admits_at_most_the_limit_and_progresses(
    spans: dict[tuple[str, str, int], tuple[int, int]], limit: int
) -> None:
    start = {k: min(a, b) for k, (a, b) in spans.items()}
    latest = {k: max(a, b) for k, (a, b) in spans.items()}
    end = cap_offsets(start, latest, limit)
    admitted = sum(end[k] - start[k] for k in latest)
    backlog = sum(latest[k] - start[k] for k in latest)
    assert admitted == min(limit, backlog)
    assert all(start[k] <= end[k] <= latest[k] for k in latest)


def test_new_queue_is_read_from_zero() -> None:
    assert plan_ranges({}, {("T", "b", 0): 3}) == [QueueRange("T", "b", 0, 0, 3)]


def test_offset_specs() -> None:
    assert parse_offset_spec("EARLIEST", "x").kind == "earliest"
    assert parse_offset_spec("1700000000000", "x").timestamp_ms == 1_700_000_000_000
    assert parse_offset_spec("2023-11-14T22:13:20+00:00", "x").timestamp_ms == 1_700_000_000_000
    spec = parse_offset_spec('{"T": {"broker-a": {"0": 5, "1": -2, "2": -1}}}', "x")
    assert spec.offsets == {("T", "broker-a", 0): 5, ("T", "broker-a", 1): EARLIEST,
                            ("T", "broker-a", 2): LATEST}  # fmt: skip
    for bad in ("{", '{"T": 3}', '{"T": {"b": {"x": 1}}}', '{"T": {"b": {"0": -3}}}', "soon"):
        with pytest.raises(ConfigError):
            parse_offset_spec(bad, "startingOffsets")


def test_source_options() -> None:
    opts = parse_source_options(
        {"NAMESRVADDR": "h:1", "topic": "A, B", "maxoffsetspertrigger": "5"}
    )
    assert opts.topics == ("A", "B")
    assert opts.max_messages_per_trigger == 5
    assert opts.fail_on_data_loss
    pattern = parse_source_options({"namesrvaddr": "h:1", "topicpattern": "Or.*"})
    assert pattern.matches("Orders")
    assert not pattern.matches("%RETRY%Orders")
    with pytest.raises(ConfigError, match="namesrvAddr is required"):
        parse_source_options({"topic": "A"})
    with pytest.raises(ConfigError, match="minPartitions must be an integer"):
        parse_source_options({"namesrvaddr": "h:1", "topic": "A", "minpartitions": "x"})
    with pytest.raises(ConfigError, match="failOnDataLoss must be true or false"):
        parse_source_options({"namesrvaddr": "h:1", "topic": "A", "failondataloss": "maybe"})


def test_sink_options() -> None:
    opts = parse_sink_options({"namesrvaddr": "h:1", "checkpointLocation": "/tmp/x"})
    assert opts.topic is None
    assert opts.exactly_once
    with pytest.raises(ConfigError, match="unknown option 'topics'"):
        parse_sink_options({"namesrvaddr": "h:1", "topics": "A"})
