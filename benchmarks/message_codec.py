"""The message codec (``ledgermq.wire.message``) on 1 KiB messages, per message.

Run ``python benchmarks/message_codec.py`` (``--quick`` for a smoke test). It prints a table and
writes JSON to ``benchmarks/results/message_codec.json``.

What is measured, for messages with 1 KiB (1024-byte) bodies and the properties a producer sends
(``UNIQ_KEY``, ``KEYS``, ``TAGS``, ``WAIT``):

- ``encode_record``: one CommitLog record, as the broker builds it on every produce (body CRC
  included);
- ``decode_records``: a pull body of 32 records (the consumer's default pull batch) into
  ``MessageExt``; ``decode_crc`` the same with ``check_crc=True``;
- ``dispatch``: ``read_dispatch_info`` of one record, as the ConsumeQueue dispatcher reads it;
- ``encode_batch`` / ``decode_batch``: a batch send body of 32 messages.

Each workload runs ``--repeats`` rounds; a round's time is the best of 5 timeit runs, and the
table reports the median over rounds, in microseconds per message and messages per second.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import statistics
import timeit
from pathlib import Path
from typing import TYPE_CHECKING

from ledgermq.wire import (
    decode_batch,
    decode_records,
    encode_batch,
    encode_properties,
    encode_record,
    read_dispatch_info,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

BODY_BYTES = 1024
BATCH = 32


def workloads() -> dict[str, tuple[int, Callable[[], object]]]:
    """name -> (messages per call, call)."""
    body = bytes(i % 251 for i in range(BODY_BYTES))
    properties = encode_properties(
        {
            "UNIQ_KEY": "0A0000051234DEADBEEF000005DC0000",
            "KEYS": "order-42 customer-7",
            "TAGS": "TagA",
            "WAIT": "true",
        }
    )

    def one() -> bytes:
        return encode_record(
            topic="TopicTest",
            queue_id=3,
            body=body,
            properties=properties,
            born_timestamp=1_700_000_000_000,
            born_host=("10.0.0.5", 54321),
            store_timestamp=1_700_000_000_005,
            store_host=("10.0.0.1", 10911),
            queue_offset=42,
            physical_offset=4096,
        )

    pull_body = one() * BATCH
    batch = [(body, 0, properties)] * BATCH
    batch_body = encode_batch(batch)
    assert len(decode_records(pull_body, check_crc=True)) == BATCH
    assert len(decode_batch(batch_body)) == BATCH
    return {
        "encode_record": (1, one),
        "decode_records": (BATCH, lambda: decode_records(pull_body)),
        "decode_crc": (BATCH, lambda: decode_records(pull_body, check_crc=True)),
        "dispatch": (1, lambda: read_dispatch_info(pull_body, 0)),
        "encode_batch": (BATCH, lambda: encode_batch(batch)),
        "decode_batch": (BATCH, lambda: decode_batch(batch_body)),
    }


def time_once(work: Callable[[], object], messages: int, number: int) -> float:
    """Microseconds per message, best of 5 runs of ``number`` calls."""
    best = min(timeit.repeat(work, number=number, repeat=5))
    return best / number / messages * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--json", default=str(Path(__file__).parent / "results" / "message_codec.json")
    )
    args = parser.parse_args(argv)
    work = workloads()
    results: dict[str, list[float]] = {name: [] for name in work}
    gc.collect()
    for _ in range(1 if args.quick else args.repeats):
        for name, (messages, fn) in work.items():
            number = max(1, (200 if args.quick else 20_000) // messages)
            results[name].append(time_once(fn, messages, number))
    print(f"\nmessage codec, {BODY_BYTES}-byte bodies, per message")
    print(f"{'':>15}  {'us':>7}  {'msgs/s':>9}")
    summary = {}
    for name, times in results.items():
        us = statistics.median(times)
        summary[name] = {"us_per_message": us, "messages_per_second": 1e6 / us}
        print(f"{name:>15}  {us:>7.3f}  {1e6 / us:>9,.0f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "date": datetime.date.today().isoformat(),
                "machine": {"python": platform.python_version()},
                "body_bytes": BODY_BYTES,
                "batch": BATCH,
                "per_message": summary,
                "rounds_us": results,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
