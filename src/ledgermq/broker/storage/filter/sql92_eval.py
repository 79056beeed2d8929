"""RocketMQ's SQL92 selector evaluated against a message's properties (syntax tree -> predicate).

The semantics are those of RocketMQ's ``filter`` module (``ComparisonExpression``,
``LogicExpression``, ``UnaryExpression``) as its broker runs it (``ExpressionMessageFilter``),
with Java's conversions where the broker leans on them. Every property value is a string.

- **NULL.** A property the message lacks is NULL. ``AND``/``OR``/``NOT`` are three-valued
  (``FALSE AND NULL`` is FALSE, ``TRUE OR NULL`` is TRUE, ``NOT NULL`` is NULL). A comparison
  with NULL on the left is NULL: ``a = 'x'``, ``a <> 'x'``, ``a > 1``, ``a BETWEEN 1 AND 2``,
  ``a IN ('x')`` and ``a NOT IN ('x')`` are all not true when ``a`` is missing. Only a TRUE
  result delivers the message. RocketMQ's asymmetries are kept: ``x = NULL-valued`` with ``x``
  present is FALSE (so its ``<>`` is TRUE), and two missing properties are equal.
- **Numbers.** A property compared with a number is converted to that number's Java type:
  ``Integer.valueOf`` for an integer literal up to 2^31-1, ``Long.valueOf`` past it,
  ``Double.valueOf`` for a decimal literal. So ``a > 1`` with ``a = '1.5'`` fails (not an
  integer) while ``a > 1.0`` is true. Two properties compared with ``<``... are both read as
  doubles. Integers meet doubles as doubles. Doubles compare as ``Double.compare`` (NaN above
  everything, -0.0 below 0.0).
- **Strings** compare only with ``=``/``<>``; **booleans**: a property equals ``TRUE`` when its
  value is ``true`` in any case; a property where a condition is wanted (``a AND ...``) is
  FALSE when present, NULL when missing.
- **A failed conversion fails the whole evaluation** (RocketMQ throws; its filter then says "no
  match"), except where ``AND``/``OR`` did not need to evaluate that side: ``a = 1`` with
  ``a = 'x'`` does not match, and neither does ``a = 1 OR b = 2`` (but ``b = 2 OR a = 1`` does
  when ``b = '2'``).

The tree is compiled once into nested closures (``compile_selector``); evaluating it is then a few
calls per node.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final

from ledgermq.broker.storage.filter.sql92_parser import (
    INT_MAX,
    LONG_MAX,
    And,
    BoolCast,
    Compare,
    Const,
    Equal,
    In,
    Long,
    Negate,
    Not,
    Or,
    Prop,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ledgermq.broker.storage.filter.sql92_parser import Node, Value

    Evaluator = Callable[[Mapping[str, str]], Value]

__all__ = ["EvaluationError", "compile_selector", "java_compare"]


class EvaluationError(Exception):
    """What Java throws while evaluating (NumberFormatException, ClassCastException): the
    message does not match."""


# ---------------------------------------------------------------- Java's conversions
_JAVA_INT: Final = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
    r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)"
)
_JAVA_TRIM: Final = "".join(map(chr, range(33)))
"""``String.trim`` removes every char up to U+0020."""


def _java_integer(text: str, limit: int) -> int:
    """``Integer.valueOf`` (``limit`` 2^31-1) or ``Long.valueOf`` (2^63-1) of ``text``."""
    if _JAVA_INT.fullmatch(text) is None:
        raise EvaluationError(f"not an integer: {text!r:.40}")
    number = int(text)
    if not -limit - 1 <= number <= limit:
        raise EvaluationError(f"out of range: {text!r:.40}")
    return number


def _java_double(text: str) -> float:
    """``Double.valueOf``: Java's float syntax, not Python's (no ``_``, ``inf``, ...)."""
    trimmed = text.strip(_JAVA_TRIM)
    match = _JAVA_DOUBLE.fullmatch(trimmed)
    if match is None:
        raise EvaluationError(f"not a number: {text!r:.40}")
    negative = trimmed.startswith("-")
    if match.group("dec") is not None:
        value = float(match.group("dec"))
    elif match.group("hex") is not None:
        value = float.fromhex(match.group("hex"))
    elif "NaN" in trimmed:
        return math.nan
    else:
        value = math.inf
    return -value if negative else value


def _java_boolean(text: str) -> bool:
    """``Boolean.valueOf``: ``"true"`` in any case."""
    return len(text) == 4 and all(a.upper() == b for a, b in zip(text, "TRUE", strict=True))


def _double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0:
        return int(math.copysign(1, a) - math.copysign(1, b)) // 2
    return 0


def java_compare(left: Value, right: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (as the broker parses):
    the sign of ``left.compareTo(right)`` after converting one side to the other's type.

    Raises:
        EvaluationError: a conversion failed, as Java's would.
    """
    lt, rt = type(left), type(right)
    if lt is not rt:
        if lt is bool:
            if rt is str:  # Java casts the Boolean to String here: ClassCastException
                raise EvaluationError("a boolean compared with a string")
            return -1
        if lt is int:
            if rt is Long:
                pass
            elif rt is float:
                left = float(left)  # type: ignore[arg-type]
            elif rt is str:
                right = _java_integer(right, INT_MAX)  # type: ignore[arg-type]
            else:
                return -1
        elif lt is Long:
            if rt is int:
                pass
            elif rt is float:
                left = float(left)  # type: ignore[arg-type]
            elif rt is str:
                right = _java_integer(right, LONG_MAX)  # type: ignore[arg-type]
            else:
                return -1
        elif lt is float:
            if rt is int or rt is Long:
                right = float(right)  # type: ignore[arg-type]
            elif rt is str:
                right = _java_double(right)  # type: ignore[arg-type]
            else:
                return -1
        elif lt is str:
            if rt is bool:
                left = _java_boolean(left)  # type: ignore[arg-type]
            elif rt is int:
                left = _java_integer(left, INT_MAX)  # type: ignore[arg-type]
            elif rt is Long:
                left = _java_integer(left, LONG_MAX)  # type: ignore[arg-type]
            elif rt is float:
                left = _java_double(left)  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    if type(left) is float:
        return _double_compare(left, right)  # type: ignore[arg-type]
    if left == right:
        return 0
    if type(left) is str:
        return 1  # only equality asks about strings (ordering reads them as doubles)
    return 1 if left > right else -1  # type: ignore[operator]


# ---------------------------------------------------------------- compiling the tree
_ORDER: Final[dict[str, Callable[[int], bool]]] = {
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


def compile_selector(node: Node) -> Evaluator:
    """A function of a message's properties giving TRUE, FALSE or None (NULL).

    The function raises ``EvaluationError`` where RocketMQ's evaluation throws.
    """
    if isinstance(node, Const):
        value = node.value
        return lambda props: value
    if isinstance(node, Prop):
        name = node.name
        return lambda props: props.get(name)
    if isinstance(node, Negate):
        return _negate(compile_selector(node.operand))
    if isinstance(node, Not):
        return _not(compile_selector(node.operand))
    if isinstance(node, BoolCast):
        return _bool_cast(compile_selector(node.operand))
    if isinstance(node, And):
        return _and(compile_selector(node.left), compile_selector(node.right))
    if isinstance(node, Or):
        return _or(compile_selector(node.left), compile_selector(node.right))
    if isinstance(node, Equal):
        return _equal(compile_selector(node.left), compile_selector(node.right))
    if isinstance(node, Compare):
        return _compare(node.op, compile_selector(node.left), compile_selector(node.right))
    assert isinstance(node, In)
    return _in(node.operand.name, node.values, node.negated)


def _negate(operand: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        value = operand(props)
        kind = type(value)
        if kind is int or kind is float or kind is Long:
            return -value  # type: ignore[operator]
        return None  # a string or boolean: not a Number

    return run


def _not(operand: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        value = operand(props)
        return None if value is None else not value

    return run


def _bool_cast(operand: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        value = operand(props)
        if value is None:
            return None
        return value if type(value) is bool else False

    return run


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        lv = left(props)
        if lv is False:
            return False
        rv = right(props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return run


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        lv = left(props)
        if lv is True:
            return True
        rv = right(props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return run


def _equal(left: Evaluator, right: Evaluator) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        lv = left(props)
        rv = right(props)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return java_compare(lv, rv) == 0

    return run


def _compare(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    test = _ORDER[op]

    def run(props: Mapping[str, str]) -> Value:
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(_double_compare(_java_double(lv), _java_double(rv)))
        return test(java_compare(lv, rv))

    return run


def _in(name: str, values: frozenset[str], negated: bool) -> Evaluator:
    def run(props: Mapping[str, str]) -> Value:
        value = props.get(name)
        if value is None:
            return None
        return (value in values) != negated

    return run
