"""A subscription group's config (RocketMQ's ``SubscriptionGroupConfig``): a record of the
metadata state (``metadata``) and of its ``put_group`` op (``ops``), in its own module so that
both use it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SubscriptionGroupConfig"]


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """RocketMQ's ``SubscriptionGroupConfig`` (the fields clients and tools look at)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1

    def to_object(self) -> dict[str, object]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_object(cls, value: Mapping[str, Any]) -> SubscriptionGroupConfig:
        name = value.get("groupName")
        if not isinstance(name, str) or not name:
            raise ValueError("a subscription group needs a groupName")
        return cls(
            group_name=name,
            consume_enable=bool(value.get("consumeEnable", True)),
            consume_from_min_enable=bool(value.get("consumeFromMinEnable", True)),
            consume_broadcast_enable=bool(value.get("consumeBroadcastEnable", True)),
            consume_message_orderly=bool(value.get("consumeMessageOrderly", False)),
            retry_queue_nums=int(value.get("retryQueueNums", 1)),
            retry_max_times=int(value.get("retryMaxTimes", 16)),
            broker_id=int(value.get("brokerId", 0)),
            which_broker_when_consume_slowly=int(value.get("whichBrokerWhenConsumeSlowly", 1)),
        )
