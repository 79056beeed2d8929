"""GET_CONSUMER_RUNNING_INFO at the broker (``broker.remoting.running_info``): the question goes
to the member's own connection with the admin's header, the client's answer comes back as it is,
and a client that is not a member, has no connection or does not answer is a SYSTEM_ERROR that
says which."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, cast

from ledgermq.broker.remoting.consumers import Registry, parse_heartbeat
from ledgermq.broker.remoting.running_info import consumer_running_info
from ledgermq.broker.service.client_registry import ConsumerManager
from ledgermq.errors import RequestTimeoutError
from ledgermq.wire import MQRequestCode, MQResponseCode, RemotingCommand
from ledgermq.wire.headers import GetConsumerRunningInfoRequestHeader

if TYPE_CHECKING:
    from ledgermq.net import Connection

HEARTBEAT = {
    "clientID": "10.0.0.1@42#1",
    "producerDataSet": [],
    "consumerDataSet": [
        {
            "groupName": "watchers",
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [{"topic": "T", "subString": "*"}],
        }
    ],
}


class FakeClient:
    """A member's connection: records what it is asked, answers or stays silent."""

    def __init__(self, answer: RemotingCommand | None, *, closed: bool = False) -> None:
        self.answer = answer
        self.closed = closed
        self.asked: list[RemotingCommand] = []

    async def request(self, command: RemotingCommand, timeout_s: float) -> RemotingCommand:
        self.asked.append(command)
        if self.answer is None:
            raise RequestTimeoutError(f"no answer in {timeout_s} s")
        return self.answer


def ask(group: str = "watchers", client_id: str = "10.0.0.1@42#1") -> RemotingCommand:
    fields = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}
    return RemotingCommand(MQRequestCode.GET_CONSUMER_RUNNING_INFO, 77, ext_fields=fields)


def running_info(
    consumers: Registry, request: RemotingCommand, timeout_s: float = 5.0
) -> RemotingCommand:
    """The door's call: the header parsed from the request, then the translator."""
    header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
    return asyncio.run(consumer_running_info(consumers, request, header, timeout_s=timeout_s))


def manager_with(client: FakeClient | None) -> Registry:
    consumers: Registry = ConsumerManager()
    request = RemotingCommand(MQRequestCode.HEART_BEAT, 1)
    heartbeat = parse_heartbeat(json.dumps(HEARTBEAT).encode())
    connection = cast("Connection | None", client)
    consumers.register(heartbeat, connection, request.language, request.version, 0)
    return consumers


def test_the_clients_answer_comes_back_unchanged() -> None:
    client = FakeClient(RemotingCommand(0, 5, flag=1, remark="fine", body=b'{"properties":{}}'))
    response = running_info(manager_with(client), ask())
    assert (response.code, response.opaque, response.remark) == (0, 77, "fine")
    assert response.is_response
    assert response.body == b'{"properties":{}}'
    (question,) = client.asked
    assert question.code == MQRequestCode.GET_CONSUMER_RUNNING_INFO
    assert dict(question.ext_fields) == dict(ask().ext_fields)


def test_a_client_error_is_passed_on() -> None:
    refused = RemotingCommand(MQResponseCode.SYSTEM_ERROR, 5, flag=1, remark="not here")
    response = running_info(manager_with(FakeClient(refused)), ask())
    assert (response.code, response.remark) == (MQResponseCode.SYSTEM_ERROR, "not here")


def test_not_a_member_not_connected_or_silent_say_which() -> None:
    consumers = manager_with(FakeClient(None))
    for request, remark in (
        (ask(group="others"), "The Consumer <others> <10.0.0.1@42#1> not online"),
        (ask(client_id="someone"), "The Consumer <watchers> <someone> not online"),
        (ask(), "consumer <watchers> <10.0.0.1@42#1> did not answer: no answer in 0.01 s"),
    ):
        response = running_info(consumers, request, timeout_s=0.01)
        assert (response.code, response.remark) == (MQResponseCode.SYSTEM_ERROR, remark)
    for gone in (manager_with(None), manager_with(FakeClient(None, closed=True))):
        response = running_info(gone, ask())
        assert response.code == MQResponseCode.SYSTEM_ERROR
        assert response.remark == (
            "consumer <watchers> <10.0.0.1@42#1> has no open connection to this broker"
        )
