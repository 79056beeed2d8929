"""Drive the real RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4) from one JSON command.

Run as a script, always in a child process (``test_rocketmq_client.py`` does): the client is
native code that can take the interpreter down on a response it does not like, writes its logs
under ``$HOME/logs/rocketmq-cpp/`` and keeps threads that do not always stop. Only the
``rocketmq`` package's API is used, nothing of ours, so what happens is what any user of that
client would see.

    python rocketmq_driver.py '{"action": "produce", "namesrv": "127.0.0.1:9876", ...}'

Commands (JSON object on argv[1]):

``produce``: ``namesrv``, ``topic``, ``group``, ``count``, ``mode`` (``sync`` / ``oneway`` /
``async`` / ``orderly`` / ``batch``), optional ``prefix`` (bodies are ``<prefix>-<i>``), ``tags``,
``keys``, ``shards`` (orderly: the sharding key of message i is ``i % shards``), ``batch_size``,
``pad`` (bytes of ``x`` appended to each body: the client zlib-compresses bodies over 4 KiB),
``delay_level`` (RocketMQ's delay level of each message), ``credentials`` ([access key, secret
key]: the client signs every request, ``set_session_credentials``; also for ``consume``).
Prints one line per acknowledged message: ``{"event": "sent", "body", "msg_id", "offset",
"status", "shard"}`` (oneway: one per message handed to the client, with no id).

``consume``: ``namesrv``, ``topic``, ``group``, ``count``, ``mode`` (``push`` / ``push_orderly``
/ ``pull``), optional ``fail_once`` (bodies whose first delivery the listener rejects, so that
the client sends them back for a later retry). Prints one line per message received:
``{"event": "received", "topic", "queue_id", "queue_offset", "body", "msg_id",
"reconsume_times", "tags", "keys"}`` until ``count`` lines or ``timeout_s``.

Both end with ``{"event": "done", ...}`` and exit with ``os._exit`` (the wrapper's destructors
shut the client down a second time, which can hang or crash on the way out). Errors are printed
as ``{"event": "error", "error": ...}`` with exit code 1.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage

_print_lock = threading.Lock()
_SHUTDOWN_S = 5.0


def emit(event: str, **fields: Any) -> None:
    with _print_lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _message(command: dict[str, Any], body: str) -> Message:
    msg = Message(command["topic"])
    msg.set_body(body)
    if command.get("tags"):
        msg.set_tags(command["tags"])
    msg.set_keys(command.get("keys") or body[:64])
    if command.get("delay_level"):
        msg.set_delay_time_level(int(command["delay_level"]))
    return msg


def _shutdown(close: Any) -> None:
    """``close()`` in a thread, given ``_SHUTDOWN_S``: the C++ shutdown may wait on the broker."""
    thread = threading.Thread(target=close, daemon=True)
    thread.start()
    thread.join(_SHUTDOWN_S)


def _credentials(client: Any, command: dict[str, Any]) -> None:
    """``credentials``: [access key, secret key] for an ACL cluster (the client signs)."""
    if command.get("credentials"):
        access_key, secret_key = command["credentials"]
        client.set_session_credentials(access_key, secret_key, command.get("channel", "ALIYUN"))


def produce(command: dict[str, Any]) -> int:
    mode = command["mode"]
    count = int(command["count"])
    prefix = command.get("prefix", "m")
    shards = int(command.get("shards", 4))
    pad = "x" * int(command.get("pad", 0))
    bodies = [f"{prefix}-{i}{pad}" for i in range(count)]
    producer = Producer(command["group"], timeout=int(command.get("send_timeout_ms", 5000)))
    producer.set_namesrv_addr(command["namesrv"])
    _credentials(producer, command)
    producer.start()
    acked = 0
    try:
        if mode == "sync":
            for body in bodies:
                result = producer.send_sync(_message(command, body))
                emit("sent", body=body, msg_id=result.msg_id, offset=result.offset,
                     status=result.status.name)  # fmt: skip
                acked += 1
        elif mode == "oneway":
            for body in bodies:
                producer.send_oneway(_message(command, body))
                emit("sent", body=body, msg_id=None, offset=None, status="ONEWAY")
                acked += 1
        elif mode == "orderly":
            for i, body in enumerate(bodies):
                result = producer.send_orderly(_message(command, body), i % shards)
                emit("sent", body=body, msg_id=result.msg_id, offset=result.offset,
                     status=result.status.name, shard=i % shards)  # fmt: skip
                acked += 1
        elif mode == "batch":
            size = int(command.get("batch_size", 4))
            for start in range(0, count, size):
                chunk = bodies[start : start + size]
                result = producer.send_batch([_message(command, b) for b in chunk])
                for body in chunk:
                    emit("sent", body=body, msg_id=result.msg_id, offset=result.offset,
                         status=result.status.name, batch=start // size)  # fmt: skip
                acked += len(chunk)
        elif mode == "async":
            done = threading.Semaphore(0)
            messages = []  # the client holds pointers to them until the callback ran

            def sent(body: str) -> Any:
                def on_success(result: Any) -> None:
                    emit("sent", body=body, msg_id=result.msg_id, offset=result.offset,
                         status=result.status.name)  # fmt: skip
                    done.release()

                return on_success

            def failed(exc: Exception) -> None:
                emit("send_failed", error=str(exc))
                done.release()

            for body in bodies:
                msg = _message(command, body)
                messages.append(msg)
                producer.send_async(msg, sent(body), failed)
            deadline = time.monotonic() + float(command.get("timeout_s", 20))
            for _ in bodies:
                if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    break
                acked += 1
        else:
            raise ValueError(f"unknown produce mode {mode!r}")
    finally:
        _shutdown(producer.shutdown)
    emit("done", acked=acked)
    return 0


def _received(msg: RecvMessage) -> dict[str, Any]:
    return {
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "body": _text(msg.body),
        "msg_id": msg.id,
        "reconsume_times": msg.reconsume_times,
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
    }


def consume(command: dict[str, Any]) -> int:
    mode = command["mode"]
    count = int(command["count"])
    deadline = time.monotonic() + float(command.get("timeout_s", 20))
    fail_once = set(command.get("fail_once", ()))
    failed: set[str] = set()
    received = 0
    enough = threading.Event()
    lock = threading.Lock()

    def record(msg: RecvMessage) -> None:
        nonlocal received
        with lock:
            received += 1
            emit("received", **_received(msg))
            if received >= count:
                enough.set()

    if mode == "pull":
        consumer = PullConsumer(command["group"])
        consumer.set_namesrv_addr(command["namesrv"])
        _credentials(consumer, command)
        consumer.start()
        try:
            while not enough.is_set() and time.monotonic() < deadline:
                for msg in consumer.pull(command["topic"], command.get("expression", "*")):
                    record(msg)
                time.sleep(0.1)
        finally:
            _shutdown(consumer.shutdown)
    elif mode in ("push", "push_orderly"):
        consumer = PushConsumer(command["group"], orderly=mode == "push_orderly")
        consumer.set_namesrv_addr(command["namesrv"])
        consumer.set_thread_count(int(command.get("threads", 2)))

        def on_message(msg: RecvMessage) -> None:
            body = _text(msg.body) or ""
            with lock:
                first = body in fail_once and body not in failed
                failed.add(body)
            if first:
                emit("rejected", **_received(msg))
                # The wrapper's way of saying RECONSUME_LATER: the listener raises.
                raise RuntimeError(f"reconsume {body} later")
            record(msg)

        consumer.subscribe(command["topic"], on_message, command.get("expression", "*"))
        _credentials(consumer, command)
        consumer.start()
        try:
            enough.wait(max(0.0, deadline - time.monotonic()))
        finally:
            _shutdown(consumer.shutdown)
    else:
        raise ValueError(f"unknown consume mode {mode!r}")
    emit("done", received=received)
    return 0


def main() -> int:
    command = json.loads(sys.argv[1])
    action = command["action"]
    if action == "produce":
        return produce(command)
    if action == "consume":
        return consume(command)
    raise ValueError(f"unknown action {action!r}")


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # noqa: BLE001 - the parent reads what went wrong from stdout
        emit("error", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
