"""``MessageSelector``: what a consumer subscribes to, by tag or by SQL92 over properties.

RocketMQ's ``MessageSelector.byTag`` / ``bySql``. A plain string wherever a subscription is
taken is a tag expression, as before. A SQL92 selector is evaluated by the broker (which must
have ``enablePropertyFilter``); the client cannot check it again, so messages arrive as the
broker chose them. Tag subscriptions are also checked here by tag string, because the broker
filters by the tags' hash codes and different tags may share one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from ledgermq.errors import ConfigError
from ledgermq.wire import parse_subscription

__all__ = ["SQL92", "TAG", "MessageSelector", "Subscription", "as_selector"]

TAG: Final = "TAG"
SQL92: Final = "SQL92"


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression and its type (``TAG`` or ``SQL92``)."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = "*") -> MessageSelector:
        """Messages whose tag is one of ``"a || b"`` (``"*"``: every message)."""
        return cls(TAG, expression.strip() or "*")

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Messages whose properties make ``expression`` TRUE, e.g.
        ``"color = 'red' AND price > 10"`` (``TAGS`` is the tag)."""
        if not expression.strip():
            raise ConfigError("a SQL92 selector must not be empty")
        return cls(SQL92, expression)

    @property
    def is_tag(self) -> bool:
        return self.expression_type == TAG

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags a TAG selector names (None: every tag, and every SQL92 selector)."""
        return parse_subscription(self.expression)[0] if self.is_tag else None

    @property
    def tag_codes(self) -> frozenset[int]:
        return parse_subscription(self.expression)[1] if self.is_tag else frozenset()


Subscription: TypeAlias = "str | MessageSelector"
"""A tag expression, or a ``MessageSelector``."""


def as_selector(subscription: Subscription) -> MessageSelector:
    """A string is a tag expression (the API's original form)."""
    if isinstance(subscription, MessageSelector):
        if subscription.expression_type not in (TAG, SQL92):
            raise ConfigError(
                f"expression type {subscription.expression_type!r} is not TAG or SQL92"
            )
        return subscription
    return MessageSelector.by_tag(subscription)
