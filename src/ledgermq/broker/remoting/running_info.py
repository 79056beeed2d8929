"""GET_CONSUMER_RUNNING_INFO (307): an admin asks the broker, the broker asks the consumer client.

``mqadmin consumerStatus`` (``ledgermq admin consumer-status``) wants a consumer's own view:
its subscriptions, the queues it holds with their offsets and caches. Only the client knows it,
so the broker (RocketMQ's ``AdminBrokerProcessor.getConsumerRunningInfo``) looks the client up
among the group's members and sends it the same request on the connection its heartbeats came
in on, then returns the client's answer unchanged. A client that is not a member (gRPC clients
never are: they are not remoting members), whose connection is gone, or that does not answer in
time gets a SYSTEM_ERROR whose remark says which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ledgermq.errors import NetworkError
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.headers import GetConsumerRunningInfoRequestHeader

if TYPE_CHECKING:
    from ledgermq.broker.remoting.consumers import Registry

__all__ = ["CLIENT_ANSWER_TIMEOUT_S", "consumer_running_info"]

CLIENT_ANSWER_TIMEOUT_S: Final = 5.0
"""How long the broker waits for the client (an admin waits longer for the broker)."""


async def consumer_running_info(
    consumers: Registry,
    command: RemotingCommand,
    header: GetConsumerRunningInfoRequestHeader,
    timeout_s: float = CLIENT_ANSWER_TIMEOUT_S,
) -> RemotingCommand:
    """The answer of client ``clientId`` of group ``consumerGroup`` (see the module docstring),
    as the door parsed (and checked) them in ``header``."""
    group, client_id = header.consumer_group, header.client_id
    info = consumers.groups.get(group)
    member = info.members.get(client_id) if info is not None else None
    if member is None:
        return command.response(
            MQResponseCode.SYSTEM_ERROR,
            remark=f"The Consumer <{group}> <{client_id}> not online",
        )
    conn = member.connection
    if conn is None or conn.closed:
        return command.response(
            MQResponseCode.SYSTEM_ERROR,
            remark=f"consumer <{group}> <{client_id}> has no open connection to this broker",
        )
    ask = RemotingCommand(
        code=MQRequestCode.GET_CONSUMER_RUNNING_INFO,
        opaque=0,
        ext_fields=GetConsumerRunningInfoRequestHeader(
            group, client_id, header.jstack_enable
        ).to_ext_fields(),
    )
    try:
        answer = await conn.request(ask, timeout_s)
    except NetworkError as exc:
        return command.response(
            MQResponseCode.SYSTEM_ERROR,
            remark=f"consumer <{group}> <{client_id}> did not answer: {exc}",
        )
    return command.response(answer.code, remark=answer.remark, body=answer.body)
