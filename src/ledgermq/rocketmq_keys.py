"""RocketMQ's configuration key names (4.9 and 5.x), and how LedgerMQ treats keys it has no use for.

A RocketMQ ``broker.conf``, ``namesrv.conf`` or proxy config should start a LedgerMQ process
unchanged: keys that tune things LedgerMQ does not have (Netty thread pools, HA ports, 5.x's
controller mode and timer wheel tuning) are accepted and named in ONE warning line, while a key
that is neither ours nor RocketMQ's, most often a typo of one we do use, stays an error that
suggests the (at most three) closest known keys. A RocketMQ value that asks for a security
feature LedgerMQ lacks (5.x's ACL 2.0: ``authenticationEnabled=true``) is refused, never ignored:
ignoring it would run a broker open that its operator believes closed.

Where the names come from: apache/rocketmq at tag ``rocketmq-all-4.9.8`` (the last 4.9 release;
every key of 4.9.0-4.9.7 is in it), the setters of ``BrokerConfig`` (common/.../common/
BrokerConfig.java), ``MessageStoreConfig`` (store/.../store/config/MessageStoreConfig.java),
``NettyServerConfig`` and ``NettyClientConfig`` (remoting/.../remoting/netty/) and
``NamesrvConfig`` (common/.../common/namesrv/NamesrvConfig.java). RocketMQ reads a config file with
``MixAll.properties2Object``, which maps each ``setXyz`` method to the key ``xyz``; the broker
applies the file to all four of its objects (BrokerStartup), the NameServer to ``NamesrvConfig``
and ``NettyServerConfig`` (NamesrvStartup). The setter names equal the field names except
``isEnableBatchPush``, whose key is ``enableBatchPush``. The ``*_5`` sets are the keys that the
same classes gained by tag ``rocketmq-all-5.3.3`` (the latest 5.x release), with the classes 5.x
reads besides (``BrokerIdentity``, ``AuthConfig`` in the broker; ``NettyClientConfig`` and
``ControllerConfig`` in the NameServer; ``ProxyConfig`` in the proxy).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Final

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "AUTH_CONFIG_5",
    "BROKER_CONFIG",
    "BROKER_CONFIG_5",
    "BROKER_FILE_KEYS",
    "CONTROLLER_CONFIG_5",
    "DLEDGER_MODE_IGNORED",
    "LEDGER_DOES_HA",
    "MESSAGE_STORE_CONFIG",
    "MESSAGE_STORE_CONFIG_5",
    "NAMESRV_CONFIG",
    "NAMESRV_CONFIG_5",
    "NAMESRV_FILE_KEYS",
    "NETTY_CLIENT_CONFIG",
    "NETTY_CLIENT_CONFIG_5",
    "NETTY_SERVER_CONFIG",
    "NETTY_SERVER_CONFIG_5",
    "PROXY_CONFIG_5",
    "PROXY_FILE_KEYS",
    "check_keys",
    "ignored_warning",
    "suggestions",
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


BROKER_CONFIG_5: Final = _names(
    """
    accountStatsEnable accountStatsPrintZeroValues ackMessageThreadPoolNums
    ackThreadPoolQueueCapacity adminBrokerThreadPoolQueueCapacity
    allowRecallWhenBrokerNotWriteable appendAckAsync appendCkAsync asyncSendEnable
    broadcastOffsetExpireMaxSecond broadcastOffsetExpireSecond brokerConfigPath
    brokerElectionPriority brokerHeartbeatInterval brokerNotActiveTimeoutMillis
    cgColdReadThreshold channelExpiredTimeout checkSyncStateSetPeriod
    cleanOfflineBrokerInterval clearRetryTopicWhenDeleteTopic coldCtrStrategyEnable
    commercialSizePerMsg compatibleWithOldNameSrv configManagerVersion
    consumerOffsetUpdateVersionStep controllerAddr controllerHeartBeatTimeoutMills
    defaultMessageRequestMode defaultPopShareQueueNum delayOffsetUpdateVersionStep
    enableBroadcastOffsetStore enableControllerMode enableCreateSysGroup
    enableFastChannelEventProcess enableLmqStats enableMixedMessageType
    enableNetWorkFlowControl enableNotifyAfterPopOrderLockRelease
    enableNotifyBeforePopCalculateLag enablePopBatchAck enablePopBufferMerge enablePopLog
    enablePopMessageThreshold enableRegisterProducer enableRemoteEscape enableRetryTopicV2
    enableSingleTopicRegister enableSkipLongAwaitingAck enableSlaveActingMaster
    enableSplitRegistration estimateAccumulation fetchControllerAddrByDnsLookup
    fetchNameSrvAddrByDnsLookup fetchNamesrvAddrInterval forwardTimeout globalColdReadThreshold
    inBrokerContainer initPopOffsetByCheckMsgInMem listenPort litePullMessageEnable
    litePullMessageThreadPoolNums litePullThreadPoolQueueCapacity
    loadBalancePollNameServerInterval loadBalanceProcessorThreadPoolNums
    loadBalanceThreadPoolQueueCapacity lockInStrictMode maxPopPollingSize
    maxStatsIdleTimeInMinutes metricGrpcExporterIntervalInMills
    metricGrpcExporterTimeOutInMills metricLoggingExporterIntervalInMills metricsExporterType
    metricsGrpcExporterHeader metricsGrpcExporterTarget metricsInDelta metricsLabel
    metricsOtelCardinalityLimit metricsPromExporterHost metricsPromExporterPort
    popCkMaxBufferSize popCkOffsetMaxQueueSize popCkStayBufferTime popCkStayBufferTimeOut
    popConsumerFSServiceInit popConsumerKVServiceEnable popConsumerKVServiceInit
    popConsumerKVServiceLog popFromRetryProbability popInflightMessageThreshold
    popLongPollingForceNotifyInterval popPollingMapSize popPollingSize
    popResponseReturnActualRetryTopic popReviveMaxAttemptTimes popReviveMaxReturnSizePerRead
    printChannelGroups printChannelGroupsMinNum realTimeNotifyConsumerChange
    recallMessageEnable recoverConcurrently recoverThreadPoolNums rejectPullConsumerEnable
    retrieveMessageFromPopRetryTopicV1 reviveAckWaitMs reviveInterval reviveMaxSlow
    reviveQueueNum reviveScanTime sendHeartbeatTimeoutMillis serverLoadBalancerEnable
    skipPreOnline skipWhenCKRePutReachMaxTimes splitRegistrationSize subscriptionExpiredTimeout
    syncBrokerMemberGroupPeriod syncBrokerMetadataPeriod syncControllerMetadataPeriod
    transactionMetricFlushInterval transactionOpBatchInterval transactionOpMsgMaxSize
    updateNameServerAddrPeriod usePIDColdCtrStrategy useServerSideResetOffset
    useStaticSubscription validateSystemTopicWhenUpdateTopic waitTimeMillsInAckQueue
    waitTimeMillsInAdminBrokerQueue waitTimeMillsInLitePullQueue
    """
)
"""``BrokerConfig`` and its base ``BrokerIdentity`` of 5.3.3: the keys 4.9 lacked (controller mode,
slave acting master, POP, the broker container, ...)."""

MESSAGE_STORE_CONFIG_5: Final = _names(
    """
    accessMessageInMemoryHotRatio allAckInSyncStateSet asyncLearner
    autoMessageVersionOnTopicLen batchDispatchRequestThreadPoolNums
    bottomMostCompressionTypeForConsumeQueueStore cleanRocksDBDirtyCQIntervalMin
    cleanSwapedMapInterval coldDataFlowControlEnable coldDataScanEnable
    commitLogForceSwapMapInterval commitLogSwapMapInterval commitLogSwapMapReserveFileNum
    compactionCqMappedFileSize compactionMappedFileSize compactionScheduleInternal
    compactionThreadNum correctLogicMinOffsetForceInterval correctLogicMinOffsetSleepInterval
    dataReadAheadEnable deleteFileBatchMax disappearTimeAfterStart diskSpaceCleanForciblyRatio
    diskSpaceWarningLevelRatio dispatchCqCacheNum dispatchCqThreads dispatchFromSenderThread
    enableAsyncReput enableAutoInSyncReplicas enableBuildConsumeQueueConcurrently
    enableCleanExpiredOffset enableCompaction enableRocksDBLog enabledAppendPropCRC
    forceVerifyPropCRC haFlowControlEnable haMaxGapNotInSync haMaxTimeSlaveNotCatchup
    inSyncReplicas logicQueueForceSwapMapInterval logicQueueSwapMapInterval
    logicQueueSwapMapReserveFileNum logicalDiskSpaceCleanForciblyThreshold
    mappedFileSizeTimerLog mappedFileSwapEnable mapperFileSizeBatchConsumeQueue
    maxAsyncPutMessageRequests maxBatchDeleteFilesNum maxChecksumRange maxConsumeQueueScan
    maxFilterMessageSize maxHaTransferByteInSecond maxOffsetMapSize maxRecoveryCommitlogFiles
    maxSlaveResendLength maxTopicLength memTableFlushIntervalMs minInSyncReplicas
    pullBatchMaxMessageCount putConsumeQueueDataByFileChannel putMessageTimeout readUnCommitted
    realTimePersistRocksDBConfig recheckReputOffsetFromCq replicasPerDiskPartition
    rocksdbCQDoubleWriteEnable rocksdbCompressionType rocksdbFlushWalFrequency
    rocksdbWalFileRollingThreshold sampleCountThreshold sampleSteps searchBcqByCacheEnable
    spinLockCollisionRetreatOptimalDegree statRocksDBCQIntervalSec storePathBrokerIdentity
    storePathEpochFile storeType syncFromLastFile syncMasterFlushOffsetWhenStartup
    timerColdDataCheckIntervalMs timerCongestNumEachSlot timerEnableCheckMetrics
    timerEnableRetryUntilSuccess timerFlushIntervalMs timerGetMessageThreadNum
    timerInterceptDelayLevel timerMaxDelaySec timerMetricSmallThreshold timerPrecisionMs
    timerProgressLogIntervalMs timerPutMessageThreadNum timerRollWindowSlot
    timerSkipUnknownError timerStopEnqueue timerWheelEnable topicQueueLockNum totalReplicas
    travelCqFileNumWhenGetMessage useABSLock wakeCommitWhenPutMessage wakeFlushWhenPutMessage
    """
)
"""``MessageStoreConfig`` of 5.3.3: the keys 4.9 lacked, the timer wheel's (RocketMQ 5 keeps
``TimerConfig`` there: ``timerWheelEnable``, ``timerPrecisionMs``, ...) included."""

AUTH_CONFIG_5: Final = _names(
    """
    aclCacheExpiredSecond aclCacheMaxNum aclCacheRefreshSecond authConfigPath
    authenticationEnabled authenticationMetadataProvider authenticationProvider
    authenticationStrategy authenticationWhitelist authorizationEnabled
    authorizationMetadataProvider authorizationProvider authorizationStrategy
    authorizationWhitelist clusterName configName initAuthenticationUser
    innerClientAuthenticationCredentials migrateAuthFromV1Enabled
    statefulAuthenticationCacheExpiredSecond statefulAuthenticationCacheMaxNum
    statefulAuthorizationCacheExpiredSecond statefulAuthorizationCacheMaxNum
    userCacheExpiredSecond userCacheMaxNum userCacheRefreshSecond
    """
)
"""``AuthConfig`` (auth/.../auth/config/AuthConfig.java), read from ``broker.conf`` since 5.3:
RocketMQ's ACL 2.0 (users and policies)."""

NETTY_SERVER_CONFIG_5: Final = _names(
    """
    bindAddress enableShutdownGracefully serverNettyWorkerGroupEnable shutdownWaitTimeSeconds
    """
)
"""``NettyServerConfig`` of 5.3.3: the keys 4.9 lacked."""

NETTY_CLIENT_CONFIG_5: Final = _names(
    """
    disableCallbackExecutor disableNettyWorkerGroup enableReconnectForGoAway
    maxReconnectIntervalTimeSeconds scanAvailableNameSrv socksProxyConfig
    """
)
"""``NettyClientConfig`` of 5.3.3: the keys 4.9 lacked."""

NAMESRV_CONFIG_5: Final = _names(
    """
    clientRequestThreadPoolNums clientRequestThreadPoolQueueCapacity defaultThreadPoolNums
    defaultThreadPoolQueueCapacity deleteTopicWithBrokerRegistration enableAllTopicList
    enableControllerInNamesrv enableTopicList needWaitForService notifyMinBrokerIdChanged
    returnOrderTopicConfigToBroker scanNotActiveBrokerInterval supportActingMaster
    unRegisterBrokerQueueCapacity waitSecondsForService
    """
)
"""``NamesrvConfig`` of 5.3.3: the keys 4.9 lacked."""

CONTROLLER_CONFIG_5: Final = _names(
    """
    configBlackList configStorePath controllerDLegerGroup controllerDLegerPeers
    controllerDLegerSelfId controllerRequestThreadPoolQueueCapacity controllerStorePath
    controllerThreadPoolNums controllerType electMasterMaxRetryCount enableElectUncleanMaster
    jraftConfig mappedFileSize metricGrpcExporterIntervalInMills
    metricGrpcExporterTimeOutInMills metricLoggingExporterIntervalInMills metricsExporterType
    metricsGrpcExporterHeader metricsGrpcExporterTarget metricsInDelta metricsLabel
    metricsPromExporterHost metricsPromExporterPort notifyBrokerRoleChanged processReadEvent
    rocketmqHome scanInactiveMasterInterval scanNotActiveBrokerInterval
    jRaftControllerRPCAddr jRaftElectionTimeoutMs jRaftGroupId jRaftInitConf
    jRaftScanWaitTimeoutMs jRaftServerId jRaftSnapshotIntervalSecs
    """
)
"""``ControllerConfig`` and ``JraftConfig`` (common/.../common/), which 5.x's NameServer reads
from its file too when ``enableControllerInNamesrv`` is set."""

PROXY_CONFIG_5: Final = _names(
    """
    aclCacheExpiredSeconds aclCacheMaxNum aclCacheRefreshSeconds brokerConfigPath
    channelExpiredInSeconds channelExpiredTimeout consumerProcessorThreadPoolNums
    consumerProcessorThreadPoolQueueCapacity contextExpiredInSeconds defaultInvisibleTimeMills
    detectInterval detectTimeout enableAclRpcHookForClusterMode enableBatchAck enableGrpcEpoll
    enableMessageBodyEmptyCheck enablePrintJstack enableProxyAutoRenew
    enableRemotingLocalProxyGrpc enableTopicMessageTypeCheck grpcBossLoopNum
    grpcClientConsumerLongPollingBatchSize grpcClientConsumerMaxLongPollingTimeoutMillis
    grpcClientConsumerMinLongPollingTimeoutMillis grpcClientIdleTimeMills
    grpcClientManagerThreadPoolNums grpcClientManagerThreadQueueCapacity
    grpcClientProducerBackoffInitialMillis grpcClientProducerBackoffMaxMillis
    grpcClientProducerBackoffMultiplier grpcClientProducerMaxAttempts
    grpcConsumerThreadPoolNums grpcConsumerThreadQueueCapacity grpcMaxInboundMessageSize
    grpcProducerThreadPoolNums grpcProducerThreadQueueCapacity
    grpcProxyRelayRequestTimeoutInSeconds grpcRouteThreadPoolNums grpcRouteThreadQueueCapacity
    grpcServerPort grpcShutdownTimeSeconds grpcThreadPoolNums grpcThreadPoolQueueCapacity
    grpcTransactionThreadPoolNums grpcTransactionThreadQueueCapacity grpcWorkerLoopNum
    heartbeatSyncerThreadPoolNums heartbeatSyncerThreadPoolQueueCapacity
    heartbeatSyncerTopicClusterName heartbeatSyncerTopicName invisibleTimeMillisWhenClear
    localProxyConnectTimeoutMs localServeAddr lockTimeoutMsInHandleGroup
    longPollingReserveTimeInMillis maxDelayTimeMills maxInvisibleTimeMills maxMessageGroupSize
    maxMessageSize maxRenewRetryTimes maxTransactionRecoverySecond maxUserPropertySize
    messageDelayLevel metadataThreadPoolNums metadataThreadPoolQueueCapacity
    metricCollectorAddress metricCollectorMode metricGrpcExporterIntervalInMills
    metricGrpcExporterTimeOutInMills metricLoggingExporterIntervalInMills metricsExporterType
    metricsGrpcExporterHeader metricsGrpcExporterTarget metricsInDelta metricsLabel
    metricsPromExporterHost metricsPromExporterPort minInvisibleTimeMillsForRecv namesrvAddr
    namesrvDomain namesrvDomainSubgroup printJstackInMillis printThreadPoolStatusInMillis
    producerProcessorThreadPoolNums producerProcessorThreadPoolQueueCapacity proxyClusterName
    proxyMode proxyName regionId remotingAccessAddr remotingDefaultThreadPoolNums
    remotingDefaultThreadPoolQueueCapacity remotingHeartbeatThreadPoolNums
    remotingHeartbeatThreadPoolQueueCapacity remotingListenPort
    remotingPullMessageThreadPoolNums remotingPullThreadPoolQueueCapacity
    remotingSendMessageThreadPoolNums remotingSendThreadPoolQueueCapacity
    remotingTopicRouteThreadPoolNums remotingTopicRouteThreadPoolQueueCapacity
    remotingUpdateOffsetThreadPoolNums remotingUpdateOffsetThreadPoolQueueCapacity
    remotingWaitTimeMillsInDefaultQueue remotingWaitTimeMillsInHeartbeatQueue
    remotingWaitTimeMillsInPullQueue remotingWaitTimeMillsInSendQueue
    remotingWaitTimeMillsInTopicRouteQueue remotingWaitTimeMillsInUpdateOffsetQueue
    renewAheadTimeMillis renewMaxThreadPoolNums renewMaxTimeMillis renewSchedulePeriodMillis
    renewThreadPoolNums renewThreadPoolQueueCapacity rocketMQClusterName rocketmqMQClientNum
    sendLatencyEnable startDetectorEnable subscriptionGroupConfigCacheExpiredSeconds
    subscriptionGroupConfigCacheMaxNum subscriptionGroupConfigCacheRefreshSeconds tlsCertPath
    tlsKeyPath tlsTestModeEnable topicConfigCacheExpiredSeconds topicConfigCacheMaxNum
    topicConfigCacheRefreshSeconds topicRouteServiceCacheExpiredSeconds
    topicRouteServiceCacheMaxNum topicRouteServiceCacheRefreshSeconds
    topicRouteServiceThreadPoolNums topicRouteServiceThreadPoolQueueCapacity traceOn
    transactionDataExpireMillis transactionDataExpireScanPeriodMillis transactionDataMaxNum
    transactionDataMaxWaitClearMillis transactionHeartbeatBatchNum
    transactionHeartbeatPeriodSecond transactionHeartbeatThreadPoolNums
    transactionHeartbeatThreadPoolQueueCapacity useDelayLevel useEndpointPortFromRequest
    userCacheExpiredSeconds userCacheMaxNum userCacheRefreshSeconds userPropertyMaxNum
    """
)
"""``ProxyConfig`` (proxy/.../proxy/config/ProxyConfig.java): RocketMQ 5's proxy settings
(``rmq-proxy.json``), which ``ledgermq proxy -c`` accepts as ``key=value`` lines."""

BROKER_FILE_KEYS: Final = (
    BROKER_CONFIG
    | MESSAGE_STORE_CONFIG
    | NETTY_SERVER_CONFIG
    | NETTY_CLIENT_CONFIG
    | BROKER_CONFIG_5
    | MESSAGE_STORE_CONFIG_5
    | NETTY_SERVER_CONFIG_5
    | NETTY_CLIENT_CONFIG_5
    | AUTH_CONFIG_5
)
"""Every key RocketMQ's broker (4.9 or 5.x) reads from ``broker.conf``."""

NAMESRV_FILE_KEYS: Final = (
    NAMESRV_CONFIG
    | NETTY_SERVER_CONFIG
    | NAMESRV_CONFIG_5
    | NETTY_SERVER_CONFIG_5
    | NETTY_CLIENT_CONFIG
    | NETTY_CLIENT_CONFIG_5
    | CONTROLLER_CONFIG_5
)
"""Every key RocketMQ's NameServer (4.9 or 5.x) reads from its config file."""

PROXY_FILE_KEYS: Final = PROXY_CONFIG_5 | AUTH_CONFIG_5
"""Every key RocketMQ 5's proxy reads from its config (``Configuration`` parses the one JSON
file as ``ProxyConfig`` and as ``AuthConfig``)."""

DLEDGER_MODE_IGNORED: Final = frozenset({"brokerId", "brokerRole", "storePathCommitLog"})
"""Keys RocketMQ itself ignores when ``enableDLegerCommitLog=true``: the DLedger election picks
the master and BrokerStartup overwrites ``brokerId``; ``brokerRole`` is set from the Raft role;
DLedger keeps the commit log under ``storePathRootDir`` (DLedgerCommitLog), not
``storePathCommitLog``."""

LEDGER_DOES_HA: Final = frozenset(
    {
        "enableControllerMode",
        "controllerAddr",
        "fetchControllerAddrByDnsLookup",
        "controllerHeartBeatTimeoutMills",
        "syncBrokerMetadataPeriod",
        "checkSyncStateSetPeriod",
        "syncControllerMetadataPeriod",
        "enableSlaveActingMaster",
        "enableRemoteEscape",
        "compatibleWithOldNameSrv",
        "allAckInSyncStateSet",
        "inSyncReplicas",
        "minInSyncReplicas",
        "enableAutoInSyncReplicas",
        "haMasterAddress",
        "haListenPort",
        "enableControllerInNamesrv",
    }
)
"""RocketMQ's other ways to replicate and fail over (4.9's master/slave HA, 5.x's controller
mode and slave acting master): the ledger group does both jobs here, so these are named apart in
the warning, with that reason."""

_ACL2: Final = (
    "RocketMQ 5's ACL 2.0 (users and policies), which LedgerMQ does not have: use "
    "aclEnable=true with plain_acl.yml (RocketMQ's ACL 1.0), or leave it out"
)
_REFUSED: Final[dict[tuple[str, str], str]] = {
    ("authenticationEnabled", "true"): f"authenticationEnabled=true asks for {_ACL2}",
    ("authorizationEnabled", "true"): f"authorizationEnabled=true asks for {_ACL2}",
}
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
        ConfigError: a key that is neither used nor RocketMQ's, with the (at most three)
            closest known keys, ours first; or a RocketMQ value LedgerMQ cannot honour.
    """
    known = set(used) | set(rocketmq)
    unknown = sorted(key for key in values if key not in known)
    if unknown:
        problems = []
        for key in unknown:
            matches = suggestions(key, used, known)
            problems.append(f"{key} (did you mean {_one_of(matches)}?)" if matches else key)
        hint = (
            ""
            if all("(" in p for p in problems)
            else "; it is neither LedgerMQ's nor RocketMQ's (`ledgermq init-conf DIR` writes "
            "commented samples)"
        )
        raise ConfigError(f"unknown {what} setting(s) {', '.join(problems)}{hint}")
    ignored = sorted(key for key in values if key not in used)
    for key in ignored:
        reason = _REFUSED.get((key, values[key].strip().lower()))
        if reason is not None:
            raise ConfigError(reason)
    return ignored


def suggestions(key: str, used: Collection[str], known: Collection[str]) -> list[str]:
    """At most three keys like ``key``: the close ones this component reads first, then the
    close RocketMQ ones; failing both, the three nearest of all if any is near at all."""
    ours = _closest(key, used, 3, 0.75)
    theirs = [k for k in _closest(key, known, 3, 0.75) if k not in ours]
    found = (ours + theirs)[:3]
    return found or _closest(key, known, 3, 0.6)


def ignored_warning(ignored: Collection[str], what: str) -> str:
    """The one warning line naming the RocketMQ keys a component ignores, and why."""
    plain = sorted(k for k in ignored if k not in DLEDGER_MODE_IGNORED | LEDGER_DOES_HA)
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
    ha = sorted(k for k in ignored if k in LEDGER_DOES_HA)
    if ha:
        parts.append(
            f"ignoring {', '.join(ha)}: RocketMQ's master/slave HA and controller mode, whose "
            "job the ledger group does here (it replicates every entry and elects the master)"
        )
    return "; ".join(parts)


def _one_of(names: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _closest(key: str, candidates: Collection[str], n: int, cutoff: float) -> list[str]:
    """Up to ``n`` candidates most like ``key``, case-insensitively (difflib), best first."""
    by_lower = {c.lower(): c for c in sorted(candidates)}
    matches = difflib.get_close_matches(key.lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[m] for m in matches]
