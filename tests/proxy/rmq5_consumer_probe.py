"""Child process: the official RocketMQ 5 Python client's consumers start against our gRPC door.
Runs in the client's own venv, with its own ``HOME``.

``python rmq5_consumer_probe.py ENDPOINTS TOPIC`` prints one JSON object: whether a
SimpleConsumer starts and what its ``receive`` answers (or raises), and whether a PushConsumer
starts (it needs the server's Settings on the Telemetry stream within 10 s, and QueryAssignment).
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
    SimpleConsumer,
)


class Listener(MessageListener):  # type: ignore[misc]
    def consume(self, message: object) -> object:
        return ConsumeResult.SUCCESS


def main() -> int:
    endpoints, topic = sys.argv[1], sys.argv[2]
    config = ClientConfiguration(endpoints, Credentials(), request_timeout=3)
    out: dict[str, str] = {}
    simple = SimpleConsumer(config, "probe-simple", {topic: FilterExpression()}, await_duration=2)
    try:
        simple.startup()
        out["simple_startup"] = "ok"
        try:
            out["simple_receive"] = f"{len(simple.receive(16, 15))} messages"
        except Exception as exc:  # noqa: BLE001 - reported to the test, which judges
            out["simple_receive"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        out["simple_startup"] = f"{type(exc).__name__}: {exc}"
    finally:
        simple.shutdown()
    push = PushConsumer(config, "probe-push", Listener(), {topic: FilterExpression()})
    try:
        push.startup()
        out["push_startup"] = "ok"
        time.sleep(2)
    except Exception as exc:  # noqa: BLE001
        out["push_startup"] = f"{type(exc).__name__}: {exc}"
    finally:
        push.shutdown()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
