"""What a subscription asks the broker to filter by, and the broker's answer to it.

A subscription is an expression and its type (RocketMQ's ``ExpressionType``): ``TAG`` (also an
empty or missing type; ``"a || b"``, ``"*"``) or ``SQL92`` (a property selector). The pull path
and CHECK_CLIENT_CONFIG (46) both ask ``resolve``, so they give the same answers as RocketMQ's
``PullMessageProcessor`` and ``ClientManageProcessor.checkClientConfig``:

- a TAG expression is always accepted;
- a SQL92 one on a broker with ``enablePropertyFilter=false``: SYSTEM_ERROR, "The broker does not
  support consumer to filter message by SQL92" (the pull is refused, no offset moves);
- a SQL92 one that does not parse: SUBSCRIPTION_PARSE_FAILED, with the reason and column;
- any other type: SUBSCRIPTION_PARSE_FAILED (RocketMQ has no filter for it either).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from ledgermq.broker.storage.filter.selector import Sql92Selector, compile_sql92
from ledgermq.broker.storage.filter.sql92_parser import Sql92Error
from ledgermq.errors import BadRequestError, RequestRejectedError
from ledgermq.wire import MQResponseCode
from ledgermq.wire.message import parse_subscription

__all__ = [
    "SQL92",
    "TAG",
    "ClientCheck",
    "PullFilter",
    "is_tag_type",
    "parse_check_client_body",
    "resolve",
]

TAG: Final = "TAG"
SQL92: Final = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``: no type, an empty one, or ``TAG`` (case-sensitive)."""
    return not expression_type or expression_type == TAG


@dataclass(frozen=True, slots=True)
class PullFilter:
    """What a pull filters by: tag hash codes (None: every tag) and/or a SQL92 selector."""

    tag_codes: frozenset[int] | None
    sql: Sql92Selector | None = None


_ALL: Final = PullFilter(None)


def resolve(expression: str, expression_type: str | None, *, property_filter: bool) -> PullFilter:
    """The filter of a subscription, or the refusal RocketMQ answers it with.

    Args:
        expression: the subscription string (a tag expression or a SQL92 selector).
        expression_type: ``TAG``/``SQL92`` (None or empty: TAG).
        property_filter: the broker's ``enablePropertyFilter``.

    Raises:
        RequestRejectedError: SYSTEM_ERROR (SQL92 disabled) or SUBSCRIPTION_PARSE_FAILED.
    """
    if is_tag_type(expression_type):
        tags, codes = parse_subscription(expression)
        return _ALL if tags is None else PullFilter(codes)
    if expression_type != SQL92:
        raise RequestRejectedError(
            f"the expression type {expression_type!r:.40} is not supported; use TAG or SQL92",
            MQResponseCode.SUBSCRIPTION_PARSE_FAILED,
        )
    if not property_filter:
        raise RequestRejectedError(
            f"The broker does not support consumer to filter message by {expression_type}",
            MQResponseCode.SYSTEM_ERROR,
        )
    try:
        return PullFilter(None, compile_sql92(expression))
    except Sql92Error as exc:
        raise RequestRejectedError(
            f"Invalid MessageSelector {expression!r:.200}: {exc}",
            MQResponseCode.SUBSCRIPTION_PARSE_FAILED,
        ) from None


@dataclass(frozen=True, slots=True)
class ClientCheck:
    """``CheckClientRequestBody``: a consumer asks whether the broker takes its subscription."""

    client_id: str
    group: str
    topic: str
    expression: str
    expression_type: str | None


def parse_check_client_body(body: bytes) -> ClientCheck | None:
    """The JSON body of CHECK_CLIENT_CONFIG; None when it carries no ``subscriptionData``
    (RocketMQ answers SUCCESS then).

    Raises:
        BadRequestError: the body is not that JSON object.
    """
    try:
        data = json.loads(body or b"{}")
        if not isinstance(data, dict):
            raise TypeError("the body is not a JSON object")  # noqa: TRY301 - one handler
        sub = data.get("subscriptionData")
        if sub is None:
            return None
        if not isinstance(sub, dict):
            raise TypeError("subscriptionData is not an object")  # noqa: TRY301
        expression_type = sub.get("expressionType")
        return ClientCheck(
            client_id=str(data.get("clientId") or ""),
            group=str(data.get("group") or ""),
            topic=str(sub.get("topic") or ""),
            expression=str(sub.get("subString") or ""),
            expression_type=None if expression_type is None else str(expression_type),
        )
    except (ValueError, TypeError) as exc:
        raise BadRequestError(
            f"the CHECK_CLIENT_CONFIG body is not valid CheckClientRequestBody JSON: {exc}"
        ) from None
