"""Child process: the official RocketMQ 5 Python client's PushConsumer (``rocketmq-python-client``
5.1.2) against our gRPC door's POP. Runs in the client's own venv, with its own ``HOME``.

``python rmq5_push_consumer_driver.py '{"endpoints": "h:p", "topic": "T", "group": "G",
"count": N, "duration_s": S}'``: the listener answers FAILURE the first time it sees the first
message ("failed_once": it must be delivered again, attempt 2) and SUCCESS otherwise; the run
ends when ``count`` distinct messages were consumed successfully or the time is up. One JSON
line per event: ``consumed`` (message_id, body, attempt, result), then
``{"event": "done", "distinct": n}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)

_START = time.monotonic()
_LOCK = threading.Lock()


def emit(**event: object) -> None:
    with _LOCK:
        print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


class Listener(MessageListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.succeeded: set[str] = set()
        self.failed_once: str | None = None

    def consume(self, message: object) -> object:
        message_id = str(message.message_id)  # type: ignore[attr-defined]
        attempt = int(message.delivery_attempt)  # type: ignore[attr-defined]
        with _LOCK:
            fail = self.failed_once is None
            if fail:
                self.failed_once = message_id
        result = "FAILURE" if fail else "SUCCESS"
        emit(event="consumed", message_id=message_id, attempt=attempt, result=result,
             body=bytes(message.body).hex())  # type: ignore[attr-defined]  # fmt: skip
        if fail:
            return ConsumeResult.FAILURE
        with _LOCK:
            self.succeeded.add(message_id)
        return ConsumeResult.SUCCESS


def main() -> int:
    args = json.loads(sys.argv[1])
    config = ClientConfiguration(args["endpoints"], Credentials(), request_timeout=5)
    listener = Listener()
    consumer = PushConsumer(config, args["group"], listener, {args["topic"]: FilterExpression()})
    consumer.startup()
    emit(event="started")
    deadline = time.monotonic() + args["duration_s"]
    while time.monotonic() < deadline:
        with _LOCK:
            if len(listener.succeeded) >= args["count"]:
                break
        time.sleep(0.1)
    consumer.shutdown()
    emit(event="done", distinct=len(listener.succeeded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
