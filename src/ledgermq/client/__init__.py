"""The LedgerMQ client: producer, consumers and admin over RocketMQ remoting (asyncio), and
blocking facades of them for threads (the CLI, Spark executors).

Only the names listed here are the public API; modules starting with ``_`` are private.
"""

from ledgermq.client._remoting import ClientInstance
from ledgermq.client._routing import MessageQueue, allocate_averagely
from ledgermq.client._selector import MessageSelector
from ledgermq.client.admin import (
    Admin,
    ConsumerConnection,
    ConsumerProgress,
    OffsetReset,
    QueueStats,
)
from ledgermq.client.blocking import SyncAdmin, SyncProducer, SyncPullConsumer, SyncPushConsumer
from ledgermq.client.consumer import (
    ConsumeStatus,
    PullConsumer,
    PullResult,
    PullStatus,
    PushConsumer,
    RecordsPullResult,
)
from ledgermq.client.credentials import Credentials
from ledgermq.client.pop import PopConsumer, PoppedMessage, PopReceiveResult
from ledgermq.client.producer import Message, Producer, SendResult, SendStatus
from ledgermq.client.transaction import (
    LocalTransactionState,
    TransactionalMessage,
    TransactionProducer,
    TransactionSendResult,
)
from ledgermq.net.tls import TlsClientConfig

__all__ = [
    "Admin",
    "ClientInstance",
    "ConsumeStatus",
    "ConsumerConnection",
    "ConsumerProgress",
    "Credentials",
    "LocalTransactionState",
    "Message",
    "MessageQueue",
    "MessageSelector",
    "OffsetReset",
    "PopConsumer",
    "PopReceiveResult",
    "PoppedMessage",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "QueueStats",
    "RecordsPullResult",
    "SendResult",
    "SendStatus",
    "SyncAdmin",
    "SyncProducer",
    "SyncPullConsumer",
    "SyncPushConsumer",
    "TlsClientConfig",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionalMessage",
    "allocate_averagely",
]
