"""Request and response codes carried in the remoting header's ``code``.

DLedger's replica codes (anchors-dledger.md section 1.3) and RocketMQ's broker / NameServer codes
(``RequestCode.java``, ``ResponseCode.java``; protocol-remoting-and-grpc.md section 2.4). DLedger's
response codes are ``raft.ResponseCode``; the wire layer carries codes and does not interpret them.
"""

from __future__ import annotations

import enum

__all__ = ["LedgerRequestCode", "MQRequestCode", "MQResponseCode"]


class LedgerRequestCode(enum.IntEnum):
    """``DLedgerRequestCode``: what a request to a ledger replica asks for."""

    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005
    AUTH_HELLO = 51100  # ours: peer authentication, step 1 (ledgermq.ledger.peer_auth)
    AUTH_PROOF = 51101  # ours: peer authentication, step 2


class MQRequestCode(enum.IntEnum):
    """RocketMQ's ``RequestCode``: the broker's and the NameServer's requests we serve or send."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    WIPE_WRITE_PERM_OF_BROKER = 205
    ADD_WRITE_PERM_OF_BROKER = 327
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_RUNNING_INFO = 307
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    BROKER_HEARTBEAT = 904
    POP_MESSAGE = 200050  # RocketMQ 5 POP consumption
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    RECALL_MESSAGE = 370  # RocketMQ 5.3: cancel a pending timer message by its recall handle
    TRANSFER_LEADERSHIP = 1000  # ours: move the ledger leadership of a broker group (admin)
    GET_QUARANTINED_ENTRIES = 1001  # ours: committed entries a replica could not apply (admin)
    GET_ROUTE_VERSION = 1010  # ours: the NameServer's route version, which clients poll
    REPLICA_LIST = 1020  # ours: a broker group's ledger members, roles and lags (admin)
    REPLICA_ADD = 1021  # ours: add a replica to a broker group as a learner (admin)
    REPLICA_REMOVE = 1022  # ours: remove a replica from a broker group (admin)
    REPLICA_BACKUP = 1023  # ours: a replica copies its data into a new directory (admin)


class MQResponseCode(enum.IntEnum):
    """RocketMQ's ``ResponseCode`` and ``RemotingSysResponseCode``."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    NOT_LEADER_FOR_QUEUE = 501
