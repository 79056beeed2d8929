"""Child process: the official RocketMQ 5 Python client's SimpleConsumer (``rocketmq-python-client``
5.1.2) against our gRPC door's POP. Runs in the client's own venv, with its own ``HOME``.

``python rmq5_simple_consumer_driver.py '{"endpoints": "h:p;h:p", "topic": "T", "group": "G",
"count": N, "duration_s": S, "access_key": AK, "secret_key": SK}'`` (the keys optional: signs
each call with them): receives (invisible 3 s) until ``count`` distinct messages are
acknowledged. The first message it gets is not acknowledged at first ("held": it must come back
with delivery attempt 2, and is acknowledged then); the second gets its invisible duration
changed to 60 s ("renewed": it must not come back) and is acknowledged with the new handle once
the held one is back. One JSON line per event: ``received`` (message_id, body, attempt),
``held``, ``renewed``, ``acked``, ``failed`` (error); then ``{"event": "done", "leftover": n}``
with what one more receive got.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

_START = time.monotonic()


def emit(**event: object) -> None:
    print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


def main() -> int:
    args = json.loads(sys.argv[1])
    credentials = Credentials(args.get("access_key", ""), args.get("secret_key", ""))
    config = ClientConfiguration(args["endpoints"], credentials, request_timeout=5)
    consumer = SimpleConsumer(
        config, args["group"], {args["topic"]: FilterExpression()}, await_duration=2
    )
    consumer.startup()
    emit(event="started")
    acked: set[str] = set()
    held = renewed = None
    held_back = False
    deadline = time.monotonic() + args["duration_s"]
    try:
        while len(acked) < args["count"] and time.monotonic() < deadline:
            try:
                messages = consumer.receive(16, 3)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                emit(event="failed", error=f"receive: {type(exc).__name__}: {exc}")
                time.sleep(0.5)
                continue
            for m in messages:
                emit(event="received", message_id=m.message_id, body=m.body.hex(),
                     attempt=m.delivery_attempt)  # fmt: skip
                if held is None:
                    held = m
                    emit(event="held", message_id=m.message_id)
                    continue
                if renewed is None:
                    renewed = m
                    consumer.change_invisible_duration(m, 60)
                    emit(event="renewed", message_id=m.message_id)
                    continue
                consumer.ack(m)
                acked.add(m.message_id)
                emit(event="acked", message_id=m.message_id)
                if m.message_id == held.message_id:
                    held_back = True
            if held_back and renewed is not None and renewed.message_id not in acked:
                consumer.ack(renewed)  # its receipt handle is the one the change answered
                acked.add(renewed.message_id)
                emit(event="acked", message_id=renewed.message_id)
        leftover = consumer.receive(16, 3)
        emit(event="done", leftover=len(leftover))
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
