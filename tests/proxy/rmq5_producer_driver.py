"""Child process: the official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2) as a
Producer against our gRPC door. Runs in the client's own venv (never the test venv: its
top-level package ``rocketmq`` is the same as the C++ client's), with its own ``HOME`` (it logs
to ``$HOME/logs/rocketmq_python/``).

``python rmq5_producer_driver.py '{"endpoints": "h:p;h:p", "topic": "T", "count": N,
"duration_s": S, "pause_s": P, "tls": false}'``: starts a Producer, sends ``count`` messages (or
for ``duration_s`` seconds, when given) with a tag, two keys and a user property each, and
prints one JSON line per outcome: ``{"event": "sent", "i", "message_id", "offset", "body", "tag",
"keys", "properties", "began", "acked"}`` (the wall-clock seconds the send began and was
acknowledged) for an acknowledged send, ``{"event": "failed", "i", "error"}`` for one
that raised; then ``{"event": "done"}``. A start-up that raises is ``{"event":
"startup_failed", "error"}`` (exit status 1).

``"tls": true`` is the client's ``tls_enable``: its channels are grpcio secure channels with
``grpc.ssl_channel_credentials()`` and no arguments, so the server is checked against grpcio's
default roots; the client has no option for a CA of one's own nor for a client certificate,
and the way to make it trust one is grpcio's ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` variable.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer

_START = time.monotonic()


def emit(**event: object) -> None:
    print(json.dumps({**event, "t": round(time.monotonic() - _START, 3)}), flush=True)


def main() -> int:
    args = json.loads(sys.argv[1])
    topic = args["topic"]
    config = ClientConfiguration(args["endpoints"], Credentials(), request_timeout=3)
    producer = Producer(config, (topic,), tls_enable=bool(args.get("tls")))
    try:
        producer.startup()
    except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
        emit(event="startup_failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    emit(event="started")
    deadline = time.monotonic() + args["duration_s"] if args.get("duration_s") else None
    i = 0
    try:
        while (deadline is None and i < args["count"]) or (
            deadline is not None and time.monotonic() < deadline
        ):
            body = f"grpc-{i}-\u00e9".encode() + bytes([0, 255])
            message = Message()
            message.topic = topic
            message.body = body
            message.tag = f"tag{i % 3}"
            message.keys = f"key-{i}"
            message.keys = "shared"  # the setter adds to the set
            message.add_property("index", str(i))
            began = time.time()
            try:
                receipt = producer.send(message)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
                emit(event="failed", i=i, error=f"{type(exc).__name__}: {exc}")
            else:
                emit(
                    event="sent", i=i, message_id=receipt.message_id, offset=receipt.offset,
                    body=body.hex(), tag=message.tag, keys=sorted(message.keys),
                    properties={"index": str(i)}, began=began, acked=time.time(),
                )  # fmt: skip
            i += 1
            if args.get("pause_s"):
                time.sleep(args["pause_s"])
    finally:
        producer.shutdown()
    emit(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
