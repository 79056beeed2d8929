"""The client checks names before it sends anything (issue 25, item 1; RocketMQ's
``Validators.checkGroup`` / ``checkTopic``): a group whose ``%RETRY%`` / ``%DLQ%`` topic would not
be a valid topic is refused when the client is made, and a send into a topic with a bad name or
into a system topic only the broker writes is refused before any request goes out."""

from __future__ import annotations

import pytest

from ledgermq.client import PopConsumer, Producer, PullConsumer, PushConsumer
from ledgermq.errors import ConfigError, InvalidTopicNameError
from ledgermq.wire import MQRequestCode

from .conftest import NAMESRV, arun, cluster


@pytest.mark.parametrize("group", ["orders.v1", "g" * 125, "a b", ""])
@pytest.mark.parametrize("kind", [Producer, PushConsumer, PullConsumer, PopConsumer])
def test_bad_group_names_are_refused_when_the_client_is_made(kind: type, group: str) -> None:
    with pytest.raises(ConfigError, match="group"):
        kind(group, NAMESRV)


def test_a_group_of_120_characters_is_taken() -> None:
    Producer("g" * 120, NAMESRV)
    PushConsumer("g" * 120, NAMESRV)


def test_sends_into_bad_or_system_topics_are_refused_before_sending() -> None:
    async def main() -> None:
        async with cluster() as env:
            producer = Producer("pg", NAMESRV, network=env.network)
            await producer.start()
            sends_before = [
                r for b in env.brokers.values() for r in b.requests
                if r.code in (MQRequestCode.SEND_MESSAGE, MQRequestCode.SEND_MESSAGE_V2)
            ]  # fmt: skip
            for topic in ("SCHEDULE_TOPIC_XXXX", "TBW102", "RMQ_SYS_TRANS_HALF_TOPIC"):
                with pytest.raises(InvalidTopicNameError, match="forbidden"):
                    await producer.send(topic, b"x")
                with pytest.raises(InvalidTopicNameError, match="forbidden"):
                    await producer.send_batch(topic, [b"x"])
            with pytest.raises(InvalidTopicNameError, match="may contain only"):
                await producer.send("orders.v1", b"x")
            sends_after = [
                r for b in env.brokers.values() for r in b.requests
                if r.code in (MQRequestCode.SEND_MESSAGE, MQRequestCode.SEND_MESSAGE_V2)
            ]  # fmt: skip
            assert sends_after == sends_before
            await producer.shutdown()

    arun(main())
