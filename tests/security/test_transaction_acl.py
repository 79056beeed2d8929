"""Transactions under the broker's ACL (issue 16 section 3, RocketMQ's PlainAccessValidator):
a producer with PUB on its topic sends and commits a transactional message; END_TRANSACTION
naming a topic the account may not publish to, or from an account with SUB only, is refused
NO_PERMISSION and changes nothing. Real processes (``test_broker_acl``'s secured cluster).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from ledgermq.client import Admin, LocalTransactionState, PullConsumer, TransactionProducer
from ledgermq.client._remoting import ClientInstance
from ledgermq.errors import MQResponseError
from ledgermq.wire import MQRequestCode, MQResponseCode, decode_offset_message_id

from .test_broker_acl import ADMIN, CONSUMER, PRODUCER, _secure_cluster

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ledgermq.client import TransactionalMessage
    from ledgermq.wire.message import MessageExt

    from .test_broker_acl import MakeCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

UNKNOWN = LocalTransactionState.UNKNOWN


def test_end_transaction_needs_pub_on_the_topic(
    broker_clusters: MakeCluster, tmp_path: Path
) -> None:
    cluster = _secure_cluster(broker_clusters, tmp_path)
    cluster.wait_routable()
    ns = cluster.namesrv_addr

    def check(message: MessageExt) -> LocalTransactionState:
        return UNKNOWN

    def decide(
        state: LocalTransactionState,
    ) -> Callable[[TransactionalMessage, object], LocalTransactionState]:
        def run(message: TransactionalMessage, arg: object) -> LocalTransactionState:
            return state

        return run

    async def main() -> None:
        async with Admin(ns, credentials=ADMIN) as admin:
            await admin.create_topic("Orders", 4, wait_s=20)
        producer = TransactionProducer("orders-tx", ns, checker=check, credentials=PRODUCER)
        await producer.start()
        try:
            done = await producer.send_message_in_transaction(
                "Orders", b"paid", decide(LocalTransactionState.COMMIT_MESSAGE)
            )
            assert done.end_error is None
            held = await producer.send_message_in_transaction("Orders", b"held", decide(UNKNOWN))
        finally:
            await producer.shutdown()
        sent = held.send_result
        fields = {
            "producerGroup": "orders-tx",
            "tranStateTableOffset": str(sent.queue_offset),
            "commitLogOffset": str(decode_offset_message_id(sent.offset_msg_id)[2]),
            "commitOrRollback": "8",
            "fromTransactionCheck": "false",
            "msgId": sent.msg_id,
            "transactionId": sent.msg_id,
        }
        node = await asyncio.to_thread(cluster.wait_master, "broker-a")
        master = cluster.address("broker-a", node)
        for credentials, topic in ((PRODUCER, "Other"), (CONSUMER, "Orders")):
            client = ClientInstance(ns, credentials=credentials)
            try:
                with pytest.raises(MQResponseError) as caught:
                    await client.invoke(
                        master, MQRequestCode.END_TRANSACTION, {**fields, "topic": topic}
                    )
                assert caught.value.code == MQResponseCode.NO_PERMISSION, caught.value
            finally:
                await client.close()
        reader = PullConsumer("orders-reader", ns, credentials=ADMIN)
        await reader.start()
        try:
            bodies = []
            for queue in await reader.fetch_queues("Orders"):
                result = await reader.pull(queue, 0, max_nums=32)
                bodies += [m.body for m in result.messages]
        finally:
            await reader.shutdown()
        assert bodies == [b"paid"]  # "held" stays a half message

    asyncio.run(asyncio.wait_for(main(), 200))
