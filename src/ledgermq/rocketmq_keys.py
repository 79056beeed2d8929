"""RocketMQ 4.9's configuration key names, and how LedgerMQ treats keys it has no use for.

A RocketMQ ``broker.conf`` or ``namesrv.conf`` should start a LedgerMQ process unchanged: keys
that tune things LedgerMQ does not have (Netty thread pools, HA ports, transactions) are
accepted and named in ONE warning line, while a key that is neither ours nor RocketMQ's, most
often a typo of one we do use, stays an error that suggests the closest known key.

Where the names come from: apache/rocketmq at tag ``rocketmq-all-4.9.8`` (the last 4.9 release;
every key of 4.9.0-4.9.7 is in it), the setters of ``BrokerConfig`` (common/.../common/
BrokerConfig.java), ``MessageStoreConfig`` (store/.../store/config/MessageStoreConfig.java),
``NettyServerConfig`` and ``NettyClientConfig`` (remoting/.../remoting/netty/) and
``NamesrvConfig`` (common/.../common/namesrv/NamesrvConfig.java). RocketMQ reads a config file with
``MixAll.properties2Object``, which maps each ``setXyz`` method to the key ``xyz``; the broker
applies the file to all four of its objects (BrokerStartup), the NameServer to ``NamesrvConfig``
and ``NettyServerConfig`` (NamesrvStartup). The setter names equal the field names except
``isEnableBatchPush``, whose key is ``enableBatchPush``.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Final

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "BROKER_CONFIG",
    "BROKER_FILE_KEYS",
    "DLEDGER_MODE_IGNORED",
    "MESSAGE_STORE_CONFIG",
    "NAMESRV_CONFIG",
    "NAMESRV_FILE_KEYS",
    "NETTY_CLIENT_CONFIG",
    "NETTY_SERVER_CONFIG",
    "check_keys",
    "ignored_warning",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


BROKER_CONFIG: Final = _names(
    """
    aclEnable adminBrokerThreadPoolNums autoCreateSubscriptionGroup autoCreateTopicEnable
    autoDeleteUnusedStats brokerClusterName brokerFastFailureEnable brokerIP1 brokerIP2
    brokerId brokerName brokerPermission brokerTopicEnable clientManageThreadPoolNums
    clientManagerThreadPoolQueueCapacity clusterTopicEnable commercialBaseCount
    commercialBigCount commercialEnable commercialTimerCount commercialTransCount
    compressedRegister configBlackList consumerFallbehindThreshold
    consumerManageThreadPoolNums consumerManagerThreadPoolQueueCapacity defaultTopicQueueNums
    disableConsumeIfConsumerReadSlowly enableCalcFilterBitMap enableDetailStat
    enablePropertyFilter endTransactionPoolQueueCapacity endTransactionThreadPoolNums
    expectConsumerNumUseFilter fetchNamesrvAddrByAddressServer filterDataCleanTimeSpan
    filterServerNums filterSupportRetry flushConsumerOffsetHistoryInterval
    flushConsumerOffsetInterval forceRegister heartbeatThreadPoolNums
    heartbeatThreadPoolQueueCapacity highSpeedMode isolateLogEnable longPollingEnable
    maxDelayTime maxErrorRateOfBloomFilter messageStorePlugIn msgTraceTopicName namesrvAddr
    notifyConsumerIdsChangedEnable processReplyMessageThreadPoolNums pullMessageThreadPoolNums
    pullThreadPoolQueueCapacity putMessageFutureThreadPoolNums putThreadPoolQueueCapacity
    queryMessageThreadPoolNums queryThreadPoolQueueCapacity regionId
    registerBrokerTimeoutMills registerNameServerPeriod rejectTransactionMessage
    replyThreadPoolQueueCapacity rocketmqHome sendMessageThreadPoolNums
    sendThreadPoolQueueCapacity shortPollingTimeMills slaveReadEnable
    startAcceptSendRequestTimeStamp storeReplyMessageEnable traceOn traceTopicEnable
    transactionCheckInterval transactionCheckMax transactionTimeOut transferMsgByHeap
    waitTimeMillsInHeartbeatQueue waitTimeMillsInPullQueue waitTimeMillsInSendQueue
    waitTimeMillsInTransactionQueue
    """
)
"""``BrokerConfig``: BrokerConfig.java, 81 keys."""

MESSAGE_STORE_CONFIG: Final = _names(
    """
    accessMessageInMemoryMaxRatio bitMapLengthConsumeQueueExt brokerRole checkCRCOnRecover
    cleanFileForciblyEnable cleanResourceInterval commitCommitLogLeastPages
    commitCommitLogThoroughInterval commitIntervalCommitLog dLegerGroup dLegerPeers
    dLegerSelfId debugLockEnable defaultQueryMaxNum deleteCommitLogFilesInterval
    deleteConsumeQueueFilesInterval deleteWhen destroyMapedFileIntervalForcibly
    diskFallRecorded diskMaxUsedSpaceRatio duplicationEnable enableBatchPush
    enableConsumeQueueExt enableDLegerCommitLog enableLmq enableMultiDispatch
    enableScheduleAsyncDeliver enableScheduleMessageStats fastFailIfNoBufferInStorePool
    fileReservedTime flushCommitLogLeastPages flushCommitLogThoroughInterval
    flushCommitLogTimed flushConsumeQueueLeastPages flushConsumeQueueThoroughInterval
    flushDelayOffsetInterval flushDiskType flushIntervalCommitLog flushIntervalConsumeQueue
    flushLeastPagesWhenWarmMapedFile haHousekeepingInterval haListenPort haMasterAddress
    haSendHeartbeatInterval haSlaveFallbehindMax haTransferBatchSize mappedFileSizeCommitLog
    mappedFileSizeConsumeQueue mappedFileSizeConsumeQueueExt maxHashSlotNum maxIndexNum
    maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch maxTransferBytesOnMessageInDisk
    maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInDisk
    maxTransferCountOnMessageInMemory messageDelayLevel messageIndexEnable messageIndexSafe
    offsetCheckInSlave osPageCacheBusyTimeOutMills preferredLeaderId putMsgIndexHightWater
    readOnlyCommitLogStorePaths redeleteHangedFileInterval scheduleAsyncDeliverMaxPendingLimit
    scheduleAsyncDeliverMaxResendNum2Blocked slaveTimeout storePathCommitLog
    storePathDLedgerCommitLog storePathRootDir syncFlushTimeout transientStorePoolEnable
    transientStorePoolSize useReentrantLockWhenPutMessage warmMapedFileEnable
    """
)
"""``MessageStoreConfig``: MessageStoreConfig.java, 78 keys."""

NETTY_SERVER_CONFIG: Final = _names(
    """
    listenPort serverAsyncSemaphoreValue serverCallbackExecutorThreads
    serverChannelMaxIdleTimeSeconds serverOnewaySemaphoreValue
    serverPooledByteBufAllocatorEnable serverSelectorThreads serverSocketBacklog
    serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads useEpollNativeSelector
    writeBufferHighWaterMark writeBufferLowWaterMark
    """
)
"""``NettyServerConfig``: NettyServerConfig.java, 14 keys."""

NETTY_CLIENT_CONFIG: Final = _names(
    """
    channelNotActiveInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
    clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize
    clientWorkerThreads connectTimeoutMillis useTLS writeBufferHighWaterMark
    writeBufferLowWaterMark
    """
)
"""``NettyClientConfig``: NettyClientConfig.java, 14 keys."""

NAMESRV_CONFIG: Final = _names(
    """
    clusterTest configBlackList configStorePath kvConfigPath orderMessageEnable productEnvName
    rocketmqHome
    """
)
"""``NamesrvConfig``: NamesrvConfig.java, 7 keys."""


BROKER_FILE_KEYS: Final = (
    BROKER_CONFIG | MESSAGE_STORE_CONFIG | NETTY_SERVER_CONFIG | NETTY_CLIENT_CONFIG
)
"""Every key RocketMQ's broker reads from ``broker.conf``."""

NAMESRV_FILE_KEYS: Final = NAMESRV_CONFIG | NETTY_SERVER_CONFIG
"""Every key RocketMQ's NameServer reads from its config file."""

DLEDGER_MODE_IGNORED: Final = frozenset({"brokerId", "brokerRole", "storePathCommitLog"})
"""Keys RocketMQ itself ignores when ``enableDLegerCommitLog=true``: the DLedger election picks
the master and BrokerStartup overwrites ``brokerId``; ``brokerRole`` is set from the Raft role;
DLedger keeps the commit log under ``storePathRootDir`` (DLedgerCommitLog), not
``storePathCommitLog``."""

_REFUSED: Final[dict[tuple[str, str], str]] = {}
"""RocketMQ settings whose value asks for a feature LedgerMQ lacks: refused, never ignored."""


def check_keys(
    values: Mapping[str, str], used: Collection[str], rocketmq: Collection[str], what: str
) -> list[str]:
    """The RocketMQ keys of ``values`` that LedgerMQ ignores, sorted; raises on unknown keys.

    Args:
        values: the settings (file keys to text).
        used: the keys this component reads; they are never reported as ignored.
        rocketmq: every key the RocketMQ counterpart reads (``BROKER_FILE_KEYS``, ...).
        what: the component, for messages ("broker", "NameServer").

    Raises:
        ConfigError: a key that is neither used nor RocketMQ's ("did you mean" the closest known
            key), or a RocketMQ value LedgerMQ cannot honour (none today).
    """
    known = set(used) | set(rocketmq)
    unknown = sorted(key for key in values if key not in known)
    if unknown:
        problems = []
        for key in unknown:
            match = _closest(key, used) or _closest(key, known)
            problems.append(f"{key} (did you mean {match}?)" if match else key)
        listing = "" if all("(" in p for p in problems) else f"; known: {', '.join(sorted(used))}"
        raise ConfigError(f"unknown {what} setting(s) {', '.join(problems)}{listing}")
    ignored = sorted(key for key in values if key not in used)
    for key in ignored:
        reason = _REFUSED.get((key, values[key].strip().lower()))
        if reason is not None:
            raise ConfigError(reason)
    return ignored


def ignored_warning(ignored: Collection[str], what: str) -> str:
    """The one warning line naming the RocketMQ keys a component ignores, and why."""
    plain = sorted(k for k in ignored if k not in DLEDGER_MODE_IGNORED)
    parts = []
    if plain:
        parts.append(
            f"ignoring RocketMQ setting(s) that mean nothing to a LedgerMQ {what}: "
            + ", ".join(plain)
        )
    special = sorted(k for k in ignored if k in DLEDGER_MODE_IGNORED)
    if special:
        parts.append(
            f"ignoring {', '.join(special)} as RocketMQ does with enableDLegerCommitLog=true "
            "(the ledger election picks the master, a slave registers as brokerId = the "
            "number of dLegerSelfId + 1, the commit log lives under storePathRootDir)"
        )
    return "; ".join(parts)


def _closest(key: str, candidates: Collection[str]) -> str | None:
    """The candidate most like ``key``, case-insensitively (difflib), or None if none is close."""
    by_lower = {c.lower(): c for c in sorted(candidates)}
    matches = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.75)
    return by_lower[matches[0]] if matches else None
