"""Child process: the official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) as a
transactional Producer with a ``TransactionChecker``, against our gRPC door. Runs in the
client's own venv and ``HOME`` (see ``rmq5_producer_driver``).

``python rmq5_transaction_driver.py '{"endpoints": "h:p;h:p", "topic": "T", "count": N,
"wait_s": S}'``: for each i < ``count`` it sends three half messages in three transactions,
``commit-i`` (then ``transaction.commit()``), ``rollback-i`` (then ``rollback()``) and
``orphan-i`` (ended by neither: the broker checks it back), and prints ``{"event": "sent",
"body", "message_id", "transaction_id", "ended"}`` for each (``"failed"`` with ``"error"`` when a
send or an end raises). The checker answers COMMIT for an even ``orphan-i`` and ROLLBACK for an
odd one, printing ``{"event": "checked", "body", "message_id", "resolution"}``. It then keeps the
producer (and its Telemetry stream) up for ``wait_s`` seconds so the check-backs can arrive, and
prints ``{"event": "done"}``. With ``"kinds": ["orphan"]`` only orphans are sent (the failover
test); ``{"event": "all_sent"}`` comes before the wait.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)

_START = time.monotonic()


def emit(**event: object) -> None:
    print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


class Checker(TransactionChecker):  # type: ignore[misc] # untyped client
    def check(self, message: Message) -> TransactionResolution:
        body = message.body.decode()
        index = int(body.rsplit("-", 1)[1])
        resolution = (
            TransactionResolution.COMMIT if index % 2 == 0 else TransactionResolution.ROLLBACK
        )
        emit(
            event="checked",
            body=body,
            message_id=message.message_id,
            resolution="COMMIT" if resolution == TransactionResolution.COMMIT else "ROLLBACK",
        )
        return resolution


def main() -> int:
    args = json.loads(sys.argv[1])
    topic = args["topic"]
    config = ClientConfiguration(args["endpoints"], Credentials(), request_timeout=3)
    producer = Producer(config, (topic,), checker=Checker())
    try:
        producer.startup()
    except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
        emit(event="startup_failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    emit(event="started")
    try:
        for i in range(args["count"]):
            for kind in args.get("kinds", ("commit", "rollback", "orphan")):
                body = f"{kind}-{i}"
                message = Message()
                message.topic = topic
                message.body = body.encode()
                message.tag = kind
                try:
                    transaction = producer.begin_transaction()
                    receipt = producer.send(message, transaction)
                    if kind == "commit":
                        transaction.commit()
                    elif kind == "rollback":
                        transaction.rollback()
                except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                    emit(event="failed", body=body, error=f"{type(exc).__name__}: {exc}")
                else:
                    emit(
                        event="sent",
                        body=body,
                        message_id=receipt.message_id,
                        transaction_id=receipt.transaction_id,
                        ended=kind != "orphan",
                    )
        emit(event="all_sent")
        time.sleep(args["wait_s"])
    finally:
        producer.shutdown()
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
