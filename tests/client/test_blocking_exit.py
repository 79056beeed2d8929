"""The blocking facades: ``close()`` and ``shutdown()`` on each, and a facade nobody closed
closes quietly at exit (issue 13, item 13) against a real one-replica cluster."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from ledgermq.bench.processes import child_env
from ledgermq.client.blocking import SyncAdmin, SyncProducer, SyncPullConsumer, SyncPushConsumer

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledgermq.testing.broker_cluster import BrokerCluster

pytestmark = pytest.mark.timeout(120)

FORGETFUL_SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from ledgermq.client import ConsumeStatus
    from ledgermq.client.blocking import (
        SyncAdmin, SyncProducer, SyncPullConsumer, SyncPushConsumer,
    )

    addr = sys.argv[1]
    producer = SyncProducer("forgetful-producer", addr)
    producer.start()
    print(producer.send("Forgotten", b"hello").status.name)
    admin = SyncAdmin(addr)
    print(admin.topic_route("Forgotten").broker_datas[0].broker_name)
    pull = SyncPullConsumer("forgetful-pull", addr)
    pull.start()
    print(len(pull.fetch_queues("Forgotten")))
    if "--push" in sys.argv:
        push = SyncPushConsumer("forgetful-push", addr)
        push.subscribe("Forgotten")
        push.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        push.start()
    never_started = SyncProducer("never-started", addr)

    class Holder:  # a reference cycle: collected by the GC while the interpreter ends
        pass

    holder = Holder()
    holder.self = holder
    holder.producer = SyncProducer("in-a-cycle", addr)
    holder.producer.start()

    def in_thread():
        global from_thread
        from_thread = SyncAdmin(addr)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    print("exiting without close()")
    sys.exit(0)
    """
)


@pytest.mark.parametrize("push", [False, True], ids=["without-push-consumer", "with-push-consumer"])
def test_unclosed_facades_close_quietly_at_exit(
    broker_clusters: Callable[..., BrokerCluster], push: bool
) -> None:
    """Without the push consumer the old ``__del__`` printed ``RuntimeError: Cannot close a
    running event loop`` (ignored exceptions, twice per facade kind); with it, a new group's
    retry topic made a warning on stderr."""
    cluster = broker_clusters(replicas=1)
    cluster.wait_routable()
    result = subprocess.run(
        [sys.executable, "-c", FORGETFUL_SCRIPT, cluster.namesrv_addr, *(["--push"] * push)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert result.stdout.split() == ["SEND_OK", "broker-a", "4", "exiting", "without", "close()"]
    assert result.stderr == ""
    assert result.returncode == 0


@pytest.mark.parametrize("method", ["close", "shutdown"])
def test_every_facade_has_close_and_shutdown(method: str) -> None:
    for cls in (SyncAdmin, SyncProducer, SyncPullConsumer, SyncPushConsumer):
        assert callable(getattr(cls, "close", None)), cls
        assert callable(getattr(cls, "shutdown", None)), cls
    addr = "127.0.0.1:9"  # nothing is asked of it: the facades are made and stopped
    facades = [
        SyncProducer("p", addr),
        SyncPullConsumer("c", addr),
        SyncPushConsumer("pc", addr),
        SyncAdmin(addr),
    ]
    for facade in facades:
        getattr(facade, method)()
        getattr(facade, method)()  # twice is fine
        with pytest.raises(RuntimeError, match="closed"):
            facade._run(_noop())


async def _noop() -> None:
    return None
