"""Child process: the official RocketMQ 5 Python client's SimpleConsumer (5.1.2) in a FIFO
consumer group of our gRPC door. Runs in the client's own venv, with its own ``HOME``.

``python rmq5_fifo_consumer_driver.py '{"endpoints": "h:p;h:p", "topic": "T", "group": "G",
"invisible_s": I, "hold": true, "count": N, "stop_file": "/path", "duration_s": D}'``:
receives (up to 16 at a time, invisible ``invisible_s``) and processes what it gets in the
order received, acknowledging each, as a FIFO consumer does: once a message of a group is
not done (held, or its ack failed), the rest of that group in the batch is skipped, to come
back after it. With ``hold``, the first message it gets is left unacknowledged once ("held"):
it must come back (delivery attempt 2) before any later message of its group.

It stops once ``count`` distinct messages are acknowledged (when given), or once ``stop_file``
exists (the test writes it when the producer is done: a JSON list of the [group, seq] pairs
sent) and each of those was acknowledged (or its ack failed: its outcome is unknown, and if it
did not take, the message comes back and is received again), or after ``duration_s``. No
"idle for a while" rule could tell that the topic is drained: a group whose messages are out
gets nothing until they come back, and after a failover the client waits for its next route
refresh. The leftover count at the end is what four more receives got.

One JSON line per event: ``received`` (message_id, group, seq, attempt, batch: the receive's
number), then its outcome: ``held``, ``skipped``, ``acked`` or ``ack_failed`` (error; the
outcome of such an ack is unknown), each with message_id, group, seq; ``receive_failed``
(error); then ``{"event": "done", "leftover": n}``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

_START = time.monotonic()


def emit(**event: object) -> None:
    print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


def main() -> int:
    args = json.loads(sys.argv[1])
    config = ClientConfiguration(args["endpoints"], Credentials(), request_timeout=5)
    consumer = SimpleConsumer(
        config, args["group"], {args["topic"]: FilterExpression()}, await_duration=2
    )
    consumer.startup()
    emit(event="started")
    invisible_s = args["invisible_s"]
    held = not args.get("hold")
    acked: set[str] = set()
    count = args.get("count")
    deadline = time.monotonic() + args["duration_s"]
    settled: set[tuple[str, int]] = set()
    expected: set[tuple[str, int]] | None = None
    batch = 0
    try:
        while time.monotonic() < deadline and (count is None or len(acked) < count):
            if expected is None and os.path.exists(args["stop_file"]):
                with open(args["stop_file"]) as stop:
                    expected = {(group, seq) for group, seq in json.load(stop)}
            if expected is not None and expected <= settled:
                break
            try:
                messages = consumer.receive(16, invisible_s)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                emit(event="receive_failed", error=f"{type(exc).__name__}: {exc}"[:300])
                time.sleep(0.5)
                continue
            batch += 1
            stopped: set[str] = set()  # groups of this batch not to go on with
            for m in messages:
                about = {
                    "message_id": m.message_id,
                    "group": m.message_group,
                    "seq": int(m.properties["seq"]),
                }
                emit(event="received", attempt=m.delivery_attempt, batch=batch, **about)
                if m.message_group in stopped:
                    emit(event="skipped", **about)
                    continue
                if not held:
                    held = True
                    stopped.add(m.message_group)
                    emit(event="held", **about)
                    continue
                try:
                    consumer.ack(m)
                except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                    stopped.add(m.message_group)
                    settled.add((m.message_group, about["seq"]))
                    emit(event="ack_failed", error=f"{type(exc).__name__}: {exc}"[:300], **about)
                else:
                    acked.add(m.message_id)
                    settled.add((m.message_group, about["seq"]))
                    emit(event="acked", **about)
        leftover = 0
        for _ in range(args.get("queues", 4)):
            try:
                leftover += len(consumer.receive(16, invisible_s))
            except Exception:  # noqa: BLE001 - the count is for the report only
                leftover = -1
                break
        emit(event="done", leftover=leftover)
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
