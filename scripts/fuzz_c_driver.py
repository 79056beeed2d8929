"""The fuzz driver of ``scripts/fuzz-c``: random and mutated input to the C entry points that
take bytes, each result checked against its Python reference.

Run by ``scripts/fuzz-c`` under AddressSanitizer and UBSan (a sanitizer report aborts the
process); on its own it only checks equivalence. A seeded ``random`` loop, so a failure replays
with the same ``--seed``. Inputs start from valid records and entries made by the Python
encoders, then get bytes flipped, overwritten, inserted, deleted or cut; a share is plain noise.

The structured entry points (``plan_leader_append``, ``plan_replicated_append``,
``scan_entries``) are driven by their hypothesis equivalence tests, which ``scripts/fuzz-c``
runs under the same sanitizers after this driver.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import zlib
from collections import Counter
from typing import TYPE_CHECKING

from crc32c import crc32c as crc32c_reference

from ledgermq.broker.storage import _key_index
from ledgermq.broker.storage.key_index import _key_hash_py
from ledgermq.errors import MessageFormatError, ProtocolError
from ledgermq.ledger import codec
from ledgermq.spark import arrow_rows
from ledgermq.store import _speedups
from ledgermq.store.entry_format import HEADER_SIZE, Entry, EntryType
from ledgermq.wire import _dispatch_scan, _record_columns, _record_decode, frame
from ledgermq.wire.frame import FrameDecoder, RemotingCommand, SerializeType, encode_frame
from ledgermq.wire.message import (
    MESSAGE_MAGIC_V2,
    MessageExt,
    RecordIndexInfo,
    SysFlag,
    _decode_records_py,
    _scan_dispatch_records_py,
    _slow_record,
    decode_records,
    encode_record,
)

if TYPE_CHECKING:
    from collections.abc import Callable

TOPICS = ["T", "TopicTest", "%RETRY%group", "主题", "tópico-ü", "😀" * 3, "x" * 127]
PIECES = [
    "TAGS\x01", "KEYS\x01", "UNIQ_KEY\x01", "WAIT\x01true", "\x01", "\x02", "a", "k1 k2", " ",
    "\t", "\x1c", "\x85", "\u3000", "é", "标签", "😀", "p", "v",
]  # fmt: skip
RAW = [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80", b"\xff", b"\x80", b"\x02"]
SHARED = {
    "born_timestamp": 1_700_000_000_000,
    "born_host": ("10.1.2.3", 4000),
    "store_timestamp": 1_700_000_000_001,
    "store_host": ("10.9.8.7", 10911),
}


def properties(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 16)))


def widen(record: bytes, rng: random.Random) -> bytes:
    """``record`` (V1, IPv4) with the V2 magic and/or 16-byte hosts, sometimes."""
    v2, born6, store6 = (rng.random() < 0.15 for _ in range(3))
    if not (v2 or born6 or store6):
        return record
    body_length = int.from_bytes(record[84:88], "big")
    out = bytearray(record[:48])
    out += bytes(12) + record[48:52] if born6 else record[48:52]
    out += record[52:64]
    out += bytes(12) + record[64:68] if store6 else record[64:68]
    out += record[68 : 88 + body_length]
    out += record[88 + body_length].to_bytes(2 if v2 else 1, "big") + record[89 + body_length :]
    out[0:4] = len(out).to_bytes(4, "big")
    if v2:
        out[4:8] = (MESSAGE_MAGIC_V2 & 0xFFFFFFFF).to_bytes(4, "big")
    flags = int.from_bytes(out[36:40], "big")
    flags |= (SysFlag.BORNHOST_V6 if born6 else 0) | (SysFlag.STOREHOST_V6 if store6 else 0)
    out[36:40] = flags.to_bytes(4, "big")
    return bytes(out)


def record(rng: random.Random) -> bytes:
    body = rng.randbytes(rng.choice((0, 1, 10, 100, 1000)))
    sys_flag = 0
    if rng.random() < 0.1:
        body, sys_flag = zlib.compress(body), SysFlag.COMPRESSED
    made = encode_record(
        topic=rng.choice(TOPICS), queue_id=rng.randrange(-(1 << 31), 1 << 31), body=body,
        flag=rng.randrange(1 << 31), properties=properties(rng), sys_flag=sys_flag,
        queue_offset=rng.randrange(1 << 62), physical_offset=rng.randrange(1 << 40),
        reconsume_times=rng.randrange(20), **SHARED,  # type: ignore[arg-type]
    )  # fmt: skip
    if rng.random() < 0.1:  # non-UTF-8 bytes inside the properties
        raw = bytearray(made)
        at = rng.randrange(len(raw) - 1, len(raw) + 1) if len(raw) > 91 else len(raw)
        raw[at - 1 : at] = rng.choice(RAW)[:1]
        made = bytes(raw)
    return widen(made, rng)


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((0, 1, 1, 2, 3, 8))):
        where = rng.randrange(len(out) + 1)
        op = rng.randrange(6)
        if op == 0 and out:
            out[where % len(out)] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[where : where + 4] = rng.choice(
                (b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
                 rng.randbytes(4), (rng.randrange(200)).to_bytes(4, "big"))
            )  # fmt: skip
        elif op == 2:
            del out[where:]
        elif op == 3:
            out[where:where] = rng.randbytes(rng.randrange(1, 9))
        elif op == 4:
            del out[where : where + rng.randrange(1, 9)]
        else:
            out[where : where + 1] = rng.choice(RAW)
    return bytes(out)


def records_input(rng: random.Random) -> bytes:
    if rng.random() < 0.05:
        return rng.randbytes(rng.randrange(300))
    return mutate(b"".join(record(rng) for _ in range(rng.randrange(1, 5))), rng)


def outcome(call: Callable[[], object]) -> object:
    try:
        return call()
    except (MessageFormatError, ProtocolError) as exc:
        return type(exc), str(exc)


# ---------------------------------------------------------------- targets


def fuzz_dispatch_scan(rng: random.Random) -> None:
    data = records_input(rng)
    expected = outcome(lambda: [tuple(r) for r in _scan_dispatch_records_py(data)])

    def c_scan(buf: bytes | bytearray | memoryview) -> list[tuple[object, ...]]:
        records = _dispatch_scan.scan_dispatch_records(buf, RecordIndexInfo, _slow_record)
        assert records is not None
        return [tuple(r) for r in records]

    for buf in (data, bytearray(data), memoryview(data)):
        got = outcome(lambda buf=buf: c_scan(buf))  # type: ignore[misc]
        if got != expected:
            fail("scan_dispatch_records", data, got, expected)


def fuzz_record_columns(rng: random.Random) -> None:
    data = records_input(rng)
    columns = _record_columns.record_columns(data)
    try:
        messages = decode_records(data)
    except MessageFormatError:
        if columns is not None:
            fail("record_columns", data, "columns", "None (the reference refuses the buffer)")
        return
    if columns is None:
        return  # left to the reference: allowed
    fast = arrow_rows._from_buffers("b", columns)
    fast.validate(full=True)
    reference = arrow_rows.rows_of_messages("b", messages)
    if not fast.equals(reference):
        fail("record_columns", data, fast.to_pylist(), reference.to_pylist())


def fuzz_record_decode(rng: random.Random) -> None:
    data = records_input(rng)
    expected = outcome(lambda: [tuple(m) for m in _decode_records_py(data, False, 1 << 20)])
    for buf in (data, bytearray(data), memoryview(data)):
        got = outcome(
            lambda buf=buf: [tuple(m) for m in decode_records(buf, max_inflated_bytes=1 << 20)]  # type: ignore[misc]
        )
        if got != expected:
            fail("decode_records (_record_decode.decode_plain)", data, got, expected)
    start = rng.randrange(len(data) + 1)
    decoded, stop = _record_decode.decode_plain(data, start, MessageExt)
    if not start <= stop <= len(data) or (stop == start and decoded):
        fail("decode_plain bounds", data, (len(decoded), stop), f"a stop in {start}..{len(data)}")


def fuzz_crc32c(rng: random.Random) -> None:
    data = mutate(rng.randbytes(rng.choice((0, 1, 7, 8, 9, 63, 64, 1000, 5000))), rng)
    value = rng.randrange(1 << 32)
    offset = rng.randrange(8) if data else 0
    view = memoryview(data)[offset:]
    expected = crc32c_reference(bytes(view), value)
    for portable in (False, True):
        got = _speedups.crc32c(view, value, portable)
        if got != expected:
            fail(f"crc32c(portable={portable})", data, got, expected)


def entries(rng: random.Random) -> list[Entry]:
    made = []
    for _ in range(rng.randrange(0, 6)):
        body = rng.randbytes(rng.choice((0, 1, 50, 300)))
        good = rng.random() < 0.8
        big = (1 << 63) - 1
        made.append(
            Entry(
                index=rng.randrange(1 << 40) if good else rng.randrange(-big - 1, big),
                term=rng.randrange(100) if good else rng.randrange(-big - 1, big),
                pos=rng.randrange(1 << 40) if good else rng.randrange(-big - 1, big),
                size=HEADER_SIZE + len(body) if good else rng.randrange(-(1 << 31), 1 << 31),
                channel=rng.choice((0, 1, rng.randrange(-(1 << 31), 1 << 31))),
                body=body,
                entry_type=rng.choice(list(EntryType)),
                body_crc=crc32c_reference(body) if good else rng.randrange(1 << 32),
                chain_crc=rng.randrange(1 << 32),
            )
        )
    return made


def fuzz_entry_codec(rng: random.Random) -> None:
    batch = entries(rng)
    encoded = _speedups.encode_entries(batch)
    reference = outcome(lambda: codec._encode_entries_py(batch))
    if encoded is not None and encoded != reference:
        fail("encode_entries", repr(batch).encode(), encoded, reference)
    if not isinstance(reference, bytes):
        return
    prefix = rng.randbytes(rng.choice((0, 0, 3)))
    data = prefix + reference if rng.random() < 0.5 else mutate(prefix + reference, rng)
    # the wire field is unsigned (">I" in _PUSH_REQUEST): a count is never negative
    count = len(batch) if rng.random() < 0.9 else rng.randrange(1 << 20)
    pos = len(prefix)
    want = outcome(lambda: codec._decode_entries_py(data, pos, count))
    got = _speedups.decode_entries(data, pos, count, Entry, codec._ENTRY_TYPE_BY_MAGIC)
    if isinstance(got, str):
        if not (isinstance(want, tuple) and want[0] is ProtocolError):
            fail("decode_entries", data, got, want)
    elif got != want or any(type(g) is not Entry for g in got):
        fail("decode_entries", data, got, want)


def fuzz_key_hash(rng: random.Random) -> None:
    topic = rng.randbytes(rng.randrange(40)).decode("utf-8", "replace")
    key = rng.randbytes(rng.choice((0, 1, 125, 126, 127, 128, 300))).decode("utf-8", "replace")
    expected = _key_hash_py(topic, key)
    got = _key_index.key_hash(topic, key)
    if got != expected:
        fail("key_hash", f"{topic}#{key}".encode(), got, expected)


def _hostile_message(rng: random.Random) -> object:
    """A (topic, keys, offset, timestamp) tuple, or something shaped almost like one."""
    keys: object = [rng.choice(("", "a", "\ud800", "k" * 200)) for _ in range(rng.randrange(4))]
    offset: object = rng.choice((0, 5, -1, 2**63, 2**70, 1.5, rng.randrange(1 << 40)))
    message: list[object] = ["T", keys, offset, rng.choice((0, -(2**63), 2**64, 7))]
    if rng.random() < 0.2:
        message[rng.randrange(4)] = rng.choice((None, b"x", ("a",), "keys", 3))
    if rng.random() < 0.1:
        return tuple(message[: rng.randrange(4)])
    return tuple(message)


def fuzz_index_run(rng: random.Random) -> None:
    """Hostile input to index_run: it must refuse or stop (SLOW), never read or write outside
    the slot table, whatever the messages and the numbers it is given (the sanitizers judge)."""
    nslots = rng.choice((1, 2, 1000, 5000))
    table = bytearray(nslots * 4 + rng.choice((0, 0, 4, -4)))
    pages = bytearray(rng.choice((b"\x01", b"\x00")) * ((nslots + 15) // 1024 + rng.choice((1, 0))))
    messages = [_hostile_message(rng) for _ in range(rng.randrange(8))]
    data = bytearray(rng.randbytes(rng.randrange(3)))
    args = (
        messages, rng.randrange(-1, 10), rng.randrange(-1, 4), rng.random() < 0.5,
        memoryview(table), pages, nslots, rng.randrange(-1, 50), rng.randrange(0, 60),
        rng.randrange(-2, 100), 0, 0, data,
    )  # fmt: skip
    try:
        status, pos, *_ = _key_index.index_run(*args)
    except (ValueError, TypeError, OverflowError):
        return
    if not 0 <= status <= 4 or not 0 <= pos <= len(messages):
        fail(
            "index_run", bytes(table), (status, pos), f"a status in 0..4, pos in 0..{len(messages)}"
        )


def frame_command(rng: random.Random) -> RemotingCommand:
    def text() -> str:
        return "".join(rng.choice(PIECES) for _ in range(rng.randrange(4)))

    return RemotingCommand(
        code=rng.randrange(-(1 << 15), 1 << 15),
        opaque=rng.randrange(-(1 << 31), 1 << 31),
        flag=rng.randrange(4),
        remark=rng.choice([None, text()]),
        ext_fields={text(): text() for _ in range(rng.randrange(5))},
        body=rng.randbytes(rng.randrange(40)),
        language=rng.choice(["JAVA", "PYTHON", "GO", "OTHER", "NODE_JS"]),
        version=rng.randrange(-(1 << 15), 1 << 15),
        serialize_type=rng.choice([SerializeType.ROCKETMQ] * 3 + [SerializeType.JSON]),
    )


def decoded_frames(data: bytes, chunk: int) -> object:
    decoder = FrameDecoder(1 << 16)
    out: list[RemotingCommand] = []
    try:
        for i in range(0, len(data), chunk):
            out += decoder.feed(data[i : i + chunk])
    except ProtocolError as exc:
        return out, str(exc)
    return out, decoder.buffered


def fuzz_frame_codec(rng: random.Random) -> None:
    commands = [frame_command(rng) for _ in range(rng.randrange(1, 4))]
    encoded = []
    for command in commands:
        try:
            in_c = encode_frame(command)
        except UnicodeEncodeError:
            continue
        frame._use_c_frames = False
        try:
            reference = encode_frame(command)
        finally:
            frame._use_c_frames = True
        if in_c != reference:
            fail("encode_head", repr(command).encode(), in_c, reference)
        encoded.append(in_c)
    data = b"".join(encoded)
    if rng.random() < 0.05:
        data = rng.randbytes(rng.randrange(200))
    elif rng.random() < 0.8:
        data = mutate(data, rng)
    chunk = rng.choice([1, 7, 64, max(1, len(data))])
    got = decoded_frames(data, chunk)
    frame._use_c_frames = False
    try:
        expected = decoded_frames(data, chunk)
    finally:
        frame._use_c_frames = True
    if got != expected:
        fail("decode_frames", data, got, expected)


TARGETS: dict[str, Callable[[random.Random], None]] = {
    "frames (decode_frames/encode_head)": fuzz_frame_codec,
    "key_hash": fuzz_key_hash,
    "index_run": fuzz_index_run,
    "scan_dispatch_records": fuzz_dispatch_scan,
    "record_columns": fuzz_record_columns,
    "decode_records": fuzz_record_decode,
    "crc32c": fuzz_crc32c,
    "encode_entries/decode_entries": fuzz_entry_codec,
}


def fail(what: str, data: bytes, got: object, expected: object) -> None:
    print(f"MISMATCH in {what} on {data.hex()}\n  C:         {got!r}\n  reference: {expected!r}")
    sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--iterations", type=int, default=0, help="stop after this many (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    start = time.monotonic()
    names = list(TARGETS)
    total = 0
    while time.monotonic() - start < args.seconds and not (
        args.iterations and total >= args.iterations
    ):
        name = names[total % len(names)]
        TARGETS[name](rng)
        counts[name] += 1
        total += 1
    elapsed = time.monotonic() - start
    print(f"seed {args.seed}: {total} inputs in {elapsed:.0f} s, no mismatch")
    for name in names:
        print(f"  {name}: {counts[name]}")


if __name__ == "__main__":
    main()
