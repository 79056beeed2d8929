"""A compiled SQL92 selector, and the cache of them per subscription string.

RocketMQ caches parsed selectors (and parse failures) by text (``SelectorParser.PARSE_CACHE``,
100 entries) and keeps one compiled filter per group and topic; a pull here looks its text up in
a cache of the same kind, so a consumer's pulls parse its selector once.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Final

from ledgermq.broker.storage.filter.sql92_eval import EvaluationError, compile_selector
from ledgermq.broker.storage.filter.sql92_parser import Sql92Error, parse

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledgermq.broker.storage.filter.sql92_eval import Evaluator

__all__ = ["Sql92Selector", "compile_sql92"]

_log = logging.getLogger(__name__)

CACHE_SIZE: Final = 256


class Sql92Selector:
    """``matches(properties)``: whether a message with these properties is delivered."""

    __slots__ = ("_evaluate", "text")

    def __init__(self, text: str, evaluate: Evaluator) -> None:
        self.text = text
        self._evaluate = evaluate

    def matches(self, properties: Mapping[str, str]) -> bool:
        """True only when the selector is TRUE; FALSE, NULL and a failed conversion are not
        (``ExpressionMessageFilter.isMatchedByCommitLog``)."""
        try:
            return self._evaluate(properties) is True
        except EvaluationError as exc:
            _log.debug("selector %r on %r: %s", self.text, properties, exc)
            return False

    def __repr__(self) -> str:
        return f"Sql92Selector({self.text!r})"


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compile(text: str) -> Sql92Selector | tuple[str, int, int]:
    try:
        return Sql92Selector(text, compile_selector(parse(text)))
    except Sql92Error as exc:
        # The error's parts, not the exception: raising one object again and again would
        # grow its traceback each time.
        return exc.reason, exc.line, exc.column


def compile_sql92(text: str) -> Sql92Selector:
    """The selector of ``text``, parsed once per distinct text (cached, failures too).

    Raises:
        Sql92Error: ``text`` is not a valid selector; the message says where.
    """
    result = _compile(text)
    if isinstance(result, tuple):
        raise Sql92Error(*result)
    return result
