"""``ledgermq produce`` and ``ledgermq consume``: lines in, messages out, from the shell.

``produce``:

- Bodies are the arguments or, without any, the lines of stdin (a line's ``\\n`` or ``\\r\\n``
  is not part of the body; an empty line cannot be a message and is counted as skipped).
- Messages go out in batches (SEND_BATCH_MESSAGE, one request and one queue per batch): each
  request takes the lines already read, up to ``--batch`` messages (256 by default; 1 sends
  one message per request) and never more body bytes than a message may have, so a pipe of
  many lines takes few requests while a line typed by hand still goes at once. Batches are
  sent one after another, in input order. ``--sharding-key`` sends one message per request,
  to the key's queue (``send_orderly``).
- One line per message on stdout (``--quiet``: none), then a summary on stderr: messages
  sent, seconds, messages per second.
- When no broker group holding the topic has a master (an election, a failover), the producer
  fails at once; ``produce`` retries the batch every half second for up to
  ``--wait-for-master`` seconds, then stops with one sentence and exit code 1.

``consume``:

- One writer: the listener runs on the event loop and writes whole lines, so concurrent
  consumption never interleaves two messages on a line (it did from worker threads).
- Only what was printed is acknowledged. The listener never yields while it prints, so each
  listener call prints its message or not at all; once ``--max`` messages are printed (or the
  command is stopping), later calls print nothing and never return while the consumer runs:
  their messages stay in flight, and the offset committed for a queue is that of its first
  message in flight (``ProcessQueue``), the one after the last message printed. The next
  ``consume`` of the group starts there: draining a topic with ``--max`` skips nothing.
  (Returning RECONSUME_LATER instead would send those messages to the retry topic, to come
  back reordered ten seconds later.)
- A closed stdout (``consume ... | head``) stops the command the same way: nothing unprinted is
  acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, BinaryIO, Final, TextIO

from ledgermq.cli.client_commands import _namesrv_arg as namesrv_arg
from ledgermq.cli.client_commands import _time_ms as time_ms
from ledgermq.cli.credentials_args import add_credential_args, credentials_from
from ledgermq.cli.tls_args import add_tls_args, tls_from
from ledgermq.client import ConsumeStatus, Message, MessageSelector, Producer, PushConsumer
from ledgermq.errors import ConfigError, InvalidMessageError, LedgerMQError, TopicNotFoundError
from ledgermq.net import run
from ledgermq.wire import MessageProperty

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ledgermq.client import SendResult
    from ledgermq.wire.message import MessageExt

DEFAULT_BATCH: Final = 256
"""Most messages per request when ``--batch`` is not given."""
DEFAULT_WAIT_FOR_MASTER_S: Final = 30.0
"""How long ``produce`` waits for a master by default: a DLedger election takes seconds."""
_RETRY_PAUSE_S: Final = 0.5
_READ_CHUNK_BYTES: Final = 1 << 16
_BATCH_OVERHEAD_BYTES: Final = 256
"""Room left per message for its properties when a batch is sized to maxMessageSize."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _arg_error(f"{text!r} is not an integer") from None
    if value < 1:
        raise _arg_error(f"{value} is not a positive integer")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _arg_error(f"{text!r} is not a number") from None
    if not value >= 0:  # also refuses nan
        raise _arg_error(f"{text} is negative")
    return value


def _arg_error(message: str) -> Exception:
    return argparse.ArgumentTypeError(message)


def _property(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (argparse type): a user property."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise _arg_error(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = commands.add_parser("produce", help="send messages (arguments, or stdin lines)")
    namesrv_arg(produce)
    add_credential_args(produce)
    add_tls_args(produce)
    produce.add_argument("-t", "--topic", required=True)
    produce.add_argument("--tags", help="tag of every message")
    produce.add_argument("--keys", help="keys of every message, space-separated")
    produce.add_argument("-g", "--group", default="ledgermq-cli-producer", help="producer group")
    produce.add_argument(
        "--sharding-key", help="send orderly: same key, same queue, in order (one per request)"
    )
    produce.add_argument(
        "--batch",
        type=positive_int,
        default=DEFAULT_BATCH,
        metavar="N",
        help="most messages per request; each takes the lines already read "
        f"(default: {DEFAULT_BATCH}; 1: one message per request)",
    )
    produce.add_argument(
        "-q", "--quiet", action="store_true", help="no line per message, only the summary"
    )
    produce.add_argument(
        "--wait-for-master",
        type=non_negative_float,
        default=DEFAULT_WAIT_FOR_MASTER_S,
        metavar="SECONDS",
        help="while the topic has no master (a failover), retry this long "
        f"(default: {DEFAULT_WAIT_FOR_MASTER_S:.0f})",
    )
    produce.add_argument(
        "--property",
        action="append",
        type=_property,
        default=[],
        metavar="KEY=VALUE",
        help="a user property of every message (repeatable)",
    )
    when = produce.add_mutually_exclusive_group()
    when.add_argument(
        "--delay-level",
        type=positive_int,
        metavar="N",
        help="deliver after delay level N (1s 5s 10s 30s 1m ... of messageDelayLevel; sends "
        "one message per request)",
    )
    when.add_argument(
        "--deliver-at",
        type=time_ms,
        metavar="TIME",
        help="a timer message delivered at TIME: epoch ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS "
        "(sends one message per request)",
    )
    produce.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per message (msgId, offsetMsgId, queue, offset)",
    )
    produce.add_argument("bodies", nargs="*", help="message bodies (default: read lines of stdin)")
    produce.set_defaults(handler=cmd_produce)

    consume = commands.add_parser("consume", help="consume a topic as a member of a group")
    namesrv_arg(consume)
    add_credential_args(consume)
    add_tls_args(consume)
    consume.add_argument("-t", "--topic", required=True)
    consume.add_argument("-g", "--group", required=True, help="consumer group")
    selector = consume.add_mutually_exclusive_group()
    selector.add_argument("-s", "--subscription", default="*", help="tags, e.g. 'a || b'")
    selector.add_argument(
        "--sql",
        metavar="EXPRESSION",
        help="a SQL92 filter on message properties, e.g. \"region = 'eu' AND amount > 100\" "
        "(the broker filters; needs enablePropertyFilter=true, the default)",
    )
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="a new group starts at the first message (default: the last, like RocketMQ)",
    )
    consume.add_argument("--broadcast", action="store_true", help="every member gets every message")
    consume.add_argument("--orderly", action="store_true", help="one message at a time per queue")
    consume.add_argument(
        "--max",
        type=positive_int,
        metavar="N",
        help="stop after printing N messages; only printed messages are acknowledged",
    )
    consume.add_argument(
        "--timeout", type=non_negative_float, help="stop after this many idle seconds"
    )
    consume.add_argument("--json", action="store_true", help="one JSON object per message")
    consume.set_defaults(handler=cmd_consume)


# ====================================================================== produce
def cmd_produce(args: argparse.Namespace) -> int:
    if args.sharding_key and args.batch not in (1, DEFAULT_BATCH):
        raise ConfigError("--sharding-key sends one message per request; leave --batch out")
    return run(_produce(args))


async def _produce(args: argparse.Namespace) -> int:
    producer = Producer(
        args.group, args.namesrv_addr, credentials=credentials_from(args), tls=tls_from(args)
    )
    one_each = args.sharding_key or args.delay_level is not None or args.deliver_at is not None
    limit = 1 if one_each else args.batch
    source = _Lines(args.bodies) if args.bodies else _StdinLines(sys.stdin.buffer)
    pending: collections.deque[bytes] = collections.deque()
    sent = skipped = 0
    started = time.perf_counter()
    finished = False
    await producer.start()
    try:
        while True:
            pending.extend(await source.more(wait=not pending))
            if not pending:
                break
            batch, empty = _take_batch(pending, limit, producer.max_message_size)
            skipped += empty
            if batch:
                results = await _send_waiting_for_master(producer, args, batch, sent)
                if not args.quiet:
                    _print_results(results, len(batch), as_json=args.json)
                sent += len(batch)
        finished = True
    finally:
        await producer.shutdown()
        # A refused send says so alone: no "sent 0 message(s)" line before the error.
        if sent or (finished and skipped):
            elapsed = time.perf_counter() - started
            print(_summary(sent, elapsed, skipped), file=sys.stderr, flush=True)
    if sent == 0 and skipped == 0:
        raise ConfigError("nothing to send: give bodies as arguments or lines on stdin")
    return 0


def _properties(args: argparse.Namespace) -> dict[str, str]:
    """``--property`` pairs, and the delay (a level, or a timer's delivery time)."""
    properties = dict(args.property)
    if args.delay_level is not None:
        properties[MessageProperty.DELAY] = str(args.delay_level)
    if args.deliver_at is not None:
        properties[MessageProperty.TIMER_DELIVER_MS] = str(args.deliver_at)
    return properties


def _summary(sent: int, elapsed_s: float, skipped: int) -> str:
    rate = sent / elapsed_s if elapsed_s > 0 else 0.0
    text = f"sent {sent} message(s) in {elapsed_s:.2f} s ({rate:,.0f} msgs/s)"
    if skipped:
        text += f"; skipped {skipped} empty line(s): a message body cannot be empty"
    return text


class _Lines:
    """The bodies given as arguments, as a line source."""

    def __init__(self, bodies: Sequence[str]) -> None:
        self._lines = [body.encode() for body in bodies]

    async def more(self, *, wait: bool) -> list[bytes]:
        lines, self._lines = self._lines, []
        return lines


class _StdinLines:
    """The lines of a binary stream, as they are read.

    A thread reads (stdin may be a file, a pipe or a terminal: only a thread reads all three
    without blocking the loop) and hands each chunk's complete lines to the loop.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._chunks: asyncio.Queue[list[bytes] | BaseException | None] = asyncio.Queue()
        self._ended = False
        self._error: BaseException | None = None
        threading.Thread(
            target=self._read, args=(stream,), name="produce-stdin", daemon=True
        ).start()

    def _put(self, item: list[bytes] | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            self._loop.call_soon_threadsafe(self._chunks.put_nowait, item)

    def _read(self, stream: BinaryIO) -> None:
        tail = b""
        try:
            while chunk := _read_some(stream):
                *complete, tail = (tail + chunk).split(b"\n")
                if complete:
                    self._put(complete)
            if tail:
                self._put([tail])
            self._put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the loop, raised there
            self._put(exc)

    async def more(self, *, wait: bool) -> list[bytes]:
        """Every line read and not taken yet; with ``wait``, at least one unless at the end
        of the stream ([] then). A read error is raised once the lines before it are taken."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._ended:
            return []
        items = [await self._chunks.get()] if wait else []
        while not self._chunks.empty():
            items.append(self._chunks.get_nowait())
        lines: list[bytes] = []
        for item in items:
            if item is None:
                self._ended = True
            elif isinstance(item, BaseException):
                self._ended, self._error = True, item
            else:
                lines.extend(line.removesuffix(b"\r") for line in item)
        if not lines and self._error is not None:
            return await self.more(wait=False)
        return lines


def _read_some(stream: BinaryIO) -> bytes:
    read1 = getattr(stream, "read1", None)
    data: bytes = read1(_READ_CHUNK_BYTES) if read1 is not None else stream.read(_READ_CHUNK_BYTES)
    return data


def _take_batch(
    pending: collections.deque[bytes], limit: int, max_bytes: int
) -> tuple[list[bytes], int]:
    """The next request's bodies from ``pending`` (at most ``limit``, their sizes plus room for
    properties within ``max_bytes``), and how many empty lines were dropped before them.

    A body too large on its own is a batch of one, so the producer's own error names it.
    """
    batch: list[bytes] = []
    size = skipped = 0
    while pending and len(batch) < limit:
        line = pending[0]
        if not line:
            pending.popleft()
            skipped += 1
            continue
        cost = len(line) + _BATCH_OVERHEAD_BYTES
        if batch and size + cost > max_bytes:
            break
        batch.append(pending.popleft())
        size += cost
    return batch, skipped


async def _send_waiting_for_master(
    producer: Producer, args: argparse.Namespace, bodies: list[bytes], sent_before: int
) -> list[SendResult]:
    """Send ``bodies`` (one request), retrying while the cluster cannot take them yet."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.wait_for_master
    told = False
    while True:
        try:
            return await _send(producer, args, bodies)
        except (InvalidMessageError, TopicNotFoundError):
            raise
        except LedgerMQError as exc:
            if not exc.retriable:
                raise
            if loop.time() + _RETRY_PAUSE_S > deadline:
                raise LedgerMQError(
                    f"topic {args.topic} could not take messages for "
                    f"{args.wait_for_master:g} s ({_reason(exc)}); {sent_before} message(s) "
                    f"were sent before; --wait-for-master SECONDS waits longer"
                ) from None
            if not told:
                told = True
                print(
                    f"ledgermq: {_reason(exc)}; retrying for up to "
                    f"{args.wait_for_master:g} s (--wait-for-master)",
                    file=sys.stderr,
                    flush=True,
                )
            await asyncio.sleep(_RETRY_PAUSE_S)


def _reason(exc: LedgerMQError) -> str:
    """The first line of ``exc``, without the producer's notes."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text.rstrip(".")


async def _send(
    producer: Producer, args: argparse.Namespace, bodies: list[bytes]
) -> list[SendResult]:
    properties = _properties(args)
    if args.sharding_key:
        (body,) = bodies
        return [
            await producer.send_orderly(
                args.topic,
                body,
                args.sharding_key,
                tags=args.tags,
                keys=args.keys,
                properties=properties,
            )
        ]
    if len(bodies) == 1:
        return [
            await producer.send(
                args.topic, bodies[0], tags=args.tags, keys=args.keys, properties=properties
            )
        ]
    messages = [
        Message(body, tags=args.tags, keys=args.keys, properties=properties) for body in bodies
    ]
    return [await producer.send_batch(args.topic, messages)]


def _print_results(results: list[SendResult], count: int, *, as_json: bool = False) -> None:
    """One line per message with both of its ids: ``msgId`` (the producer's UNIQ_KEY, what
    consumers see) and ``offsetMsgId`` (where it is stored); ``admin message --id`` takes
    either."""
    out = sys.stdout
    for result in results:
        mq = result.message_queue
        ids = result.msg_id.split(",") if count > 1 else [result.msg_id]
        stored = result.offset_msg_id.split(",") if count > 1 else [result.offset_msg_id]
        stored += [""] * (len(ids) - len(stored))
        for i, (msg_id, offset_msg_id) in enumerate(zip(ids, stored, strict=False)):
            offset = result.queue_offset + i if result.queue_offset >= 0 else -1
            if as_json:
                line = json.dumps(
                    {
                        "status": result.status.name,
                        "msgId": msg_id,
                        "offsetMsgId": offset_msg_id,
                        "topic": mq.topic,
                        "brokerName": mq.broker_name,
                        "queueId": mq.queue_id,
                        "queueOffset": offset,
                    }
                )
            else:
                line = (
                    f"{result.status.name} msgId={msg_id} offsetMsgId={offset_msg_id} "
                    f"{mq.broker_name}:{mq.queue_id}@{offset}"
                )
            out.write(line + "\n")
    out.flush()


# ====================================================================== consume
class _LineWriter:
    """Whole lines to one stream, from one thread (the event loop's): never two on a line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed = False

    def write_line(self, line: str) -> bool:
        """Write ``line`` and a newline, and flush; False when the reader has gone away."""
        if self.closed:
            return False
        try:
            self._stream.write(line + "\n")
            self._stream.flush()
        except BrokenPipeError:
            self.closed = True
            # Python flushes stdout again at exit; point it at /dev/null so that does not fail.
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self._stream.fileno())
                os.close(devnull)
            return False
        return True


def cmd_consume(args: argparse.Namespace) -> int:
    return run(_consume(args))


async def _consume(args: argparse.Namespace) -> int:
    consumer = PushConsumer(
        args.group,
        args.namesrv_addr,
        message_model="BROADCASTING" if args.broadcast else "CLUSTERING",
        consume_from_where=(
            "CONSUME_FROM_FIRST_OFFSET" if args.from_beginning else "CONSUME_FROM_LAST_OFFSET"
        ),
        orderly=args.orderly,
        credentials=credentials_from(args),
        tls=tls_from(args),
    )
    consumer.subscribe(
        args.topic, MessageSelector.by_sql(args.sql) if args.sql else args.subscription
    )
    writer = _LineWriter(sys.stdout)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()  # stop: --max reached, idle timeout, a signal, stdout closed
    held = asyncio.Event()  # never set: where unprinted messages wait, unacknowledged
    printed = 0
    last = loop.time()

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        # No await before the messages are printed: a call prints all of its batch or none.
        nonlocal printed, last
        if done.is_set() or (args.max is not None and printed + len(messages) > args.max):
            done.set()
            await held.wait()  # cancelled when the command ends; never acknowledged
            return ConsumeStatus.RECONSUME_LATER
        for message in messages:
            if not writer.write_line(_format_message(message, as_json=args.json)):
                done.set()
                await held.wait()
                return ConsumeStatus.RECONSUME_LATER
        printed += len(messages)
        last = loop.time()
        if args.max is not None and printed >= args.max:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer.register_listener(listener)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await consumer.start()
    if sys.stderr.isatty():  # a person watching: say how this ends (a script knows)
        print(_stop_hint(args), file=sys.stderr, flush=True)
    try:
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.5)
            if args.timeout is not None and loop.time() - last > args.timeout:
                done.set()
    finally:
        done.set()
        # Every listener call still running waits on ``held`` and prints nothing more, so the
        # queues need not wait for them: their messages stay in flight, uncommitted.
        consumer.drop_wait_s = 0.0
        await consumer.shutdown()
    print(f"consumed {printed} message(s)", file=sys.stderr)
    return 0


def _stop_hint(args: argparse.Namespace) -> str:
    """What ``consume`` says on a terminal when it starts: it runs until stopped."""
    ends = []
    if args.max is not None:
        ends.append(f"after {args.max} message(s)")
    if args.timeout is not None:
        ends.append(f"after {args.timeout:g} idle second(s)")
    also = f" (or by itself {' or '.join(ends)})" if ends else ""
    return (
        f"consuming {args.topic} as group {args.group}; press Ctrl-C to stop{also}; "
        "only printed messages are acknowledged"
    )


def _format_message(m: MessageExt, *, as_json: bool) -> str:
    body = m.body.decode("utf-8", "backslashreplace")
    if not as_json:
        return f"{m.topic}:{m.queue_id}@{m.queue_offset} {m.msg_id} {body}"
    return json.dumps(
        {
            "topic": m.topic,
            "queueId": m.queue_id,
            "queueOffset": m.queue_offset,
            "msgId": m.msg_id,
            "tags": m.tags,
            "keys": m.keys,
            "body": body,
            "bornTimestamp": m.born_timestamp,
            "storeTimestamp": m.store_timestamp,
            "reconsumeTimes": m.reconsume_times,
        }
    )
