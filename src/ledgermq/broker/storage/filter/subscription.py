"""What a subscription asks the broker to filter by, and the broker's answer to it.

A subscription is an expression and its type (RocketMQ's ``ExpressionType``): ``TAG`` (also an
empty or missing type; ``"a || b"``, ``"*"``) or ``SQL92`` (a property selector). The pull path
and CHECK_CLIENT_CONFIG (46) both ask ``resolve``, so they give the same answers as RocketMQ's
``PullMessageProcessor`` and ``ClientManageProcessor.checkClientConfig``:

- a TAG expression is always accepted;
- a SQL92 one on a broker with ``enablePropertyFilter=false``: ``UnsupportedError`` (remoting:
  SYSTEM_ERROR), "The broker does not support consumer to filter message by SQL92" (the pull is
  refused, no offset moves);
- a SQL92 one that does not parse: ``InvalidFilterError`` (SUBSCRIPTION_PARSE_FAILED), with the
  reason and column;
- any other type: ``InvalidFilterError`` (RocketMQ has no filter for it either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ledgermq.broker.errors import InvalidFilterError, UnsupportedError
from ledgermq.broker.storage.filter.selector import Sql92Selector, compile_sql92
from ledgermq.broker.storage.filter.sql92_parser import Sql92Error
from ledgermq.wire.message import parse_subscription

__all__ = [
    "SQL92",
    "TAG",
    "PullFilter",
    "is_tag_type",
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
        UnsupportedError: SQL92 is disabled (``enablePropertyFilter``).
        InvalidFilterError: the type is unknown or the expression does not parse.
    """
    if is_tag_type(expression_type):
        tags, codes = parse_subscription(expression)
        return _ALL if tags is None else PullFilter(codes)
    if expression_type != SQL92:
        raise InvalidFilterError(
            f"the expression type {expression_type!r:.40} is not supported; use TAG or SQL92"
        )
    if not property_filter:
        raise UnsupportedError(
            f"The broker does not support consumer to filter message by {expression_type}"
        )
    try:
        return PullFilter(None, compile_sql92(expression))
    except Sql92Error as exc:
        raise InvalidFilterError(f"Invalid MessageSelector {expression!r:.200}: {exc}") from None
