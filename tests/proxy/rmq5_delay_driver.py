"""Child process: the official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2)
sending delay (timer) messages and receiving them with a SimpleConsumer, against our gRPC door.
Runs in the client's own venv, with its own ``HOME``.

``python rmq5_delay_driver.py '{"endpoints": "h:p;h:p", "topic": "T", "group": "G", "count": N,
"duration_s": S, "delay_s": D, "pause_s": P, "millis": M}'``: sends ``count`` messages due D
(default 2), D + 1 or D + 2 s later (``delivery_timestamp``, which this client puts into the
protobuf Timestamp's ``seconds`` as it is: whole epoch seconds, or with M true epoch
milliseconds, as its docstring and its own tests give it), recalls every fifth with the
recall handle its send receipt carries, then receives (and acknowledges) until every other one
came. One JSON line per event:
``sent`` (i, message_id, due_ms, recall_handle), ``recalled`` (message_id), ``received``
(message_id, body, wall_ms: the receive's wall clock, delivery_ms: the message's
delivery_timestamp), ``recall_after_delivery`` (error: recalling a delivered one must fail),
``failed`` (error); ``sent_all`` once the sends and recalls are done, after which it waits P s
(default 0: a test kills the master meanwhile) before it receives; then ``{"event": "done",
"leftover": n}`` with what a last receive got.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

_START = time.monotonic()


def emit(**event: object) -> None:
    print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


def main() -> int:
    args = json.loads(sys.argv[1])
    topic = args["topic"]
    config = ClientConfiguration(args["endpoints"], Credentials(), request_timeout=5)
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, args["group"], {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    emit(event="started")
    expected: set[str] = set()
    delivered_handle = None
    try:
        for i in range(args["count"]):
            message = Message()
            message.topic = topic
            message.body = f"delay-{i}".encode()
            message.tag = "delay"
            message.keys = f"key-{i}"
            due_s = int(time.time()) + args.get("delay_s", 2) + i % 3
            # "millis": milliseconds, as the client's docstring and its own tests give them
            message.delivery_timestamp = due_s * 1000 if args.get("millis") else due_s
            try:
                receipt = producer.send(message)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                emit(event="failed", error=f"send {i}: {type(exc).__name__}: {exc}")
                continue
            emit(event="sent", i=i, message_id=receipt.message_id, due_ms=due_s * 1000,
                 recall_handle=receipt.recall_handle)  # fmt: skip
            if i % 5 == 4:
                try:
                    recalled = producer.recall_message(topic, receipt.recall_handle)
                except Exception as exc:  # noqa: BLE001 - reported to the test
                    emit(event="failed", error=f"recall {i}: {type(exc).__name__}: {exc}")
                    expected.add(receipt.message_id)
                else:
                    emit(event="recalled", message_id=str(recalled))
            else:
                expected.add(receipt.message_id)
                delivered_handle = receipt.recall_handle
        emit(event="sent_all")
        time.sleep(args.get("pause_s", 0))
        received: set[str] = set()
        deadline = time.monotonic() + args["duration_s"]
        while not expected <= received and time.monotonic() < deadline:
            try:
                messages = consumer.receive(16, 30)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                emit(event="failed", error=f"receive: {type(exc).__name__}: {exc}")
                time.sleep(0.5)
                continue
            wall_ms = int(time.time() * 1000)
            for m in messages:
                emit(event="received", message_id=m.message_id, body=m.body.decode(),
                     wall_ms=wall_ms, delivery_ms=m.delivery_timestamp)  # fmt: skip
                consumer.ack(m)
                received.add(m.message_id)
        if delivered_handle is not None:
            try:
                producer.recall_message(topic, delivered_handle)
            except Exception as exc:  # noqa: BLE001 - the expected outcome
                emit(event="recall_after_delivery", error=f"{type(exc).__name__}: {exc}")
            else:
                emit(event="recall_after_delivery", error=None)
        time.sleep(2.0)  # past every due time: a recalled one would be there now
        leftover = consumer.receive(16, 30)
        emit(event="done", leftover=len(leftover))
    finally:
        consumer.shutdown()
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
