"""RocketMQ's SQL92 message selector: text -> syntax tree, with RocketMQ's parse-time checks.

The language is the one of RocketMQ's ``filter`` module (``SelectorParser.jj``, itself ActiveMQ's
JMS selector grammar without LIKE, arithmetic and hex / octal literals). Facts this module keeps:

- **Tokens.** Keywords ``NOT AND OR BETWEEN IN TRUE FALSE NULL IS`` in any case; identifiers
  ``[A-Za-z_$][A-Za-z0-9_$]*`` (case-sensitive names of message properties; ``TAGS`` is the
  tag); strings in single quotes, ``''`` for a quote; integers ``0`` or ``[1-9][0-9]*`` with an
  optional ``L`` (an Integer up to 2^31-1, else a Long; past 2^63-1 an error); decimals ``1.5``,
  ``1.``, ``.5``, ``1e5``, ``1.5E-3`` (a Double). Operators ``= <> < <= > >= ( ) , + -``.
  Whitespace is `` \\t\\n\\r\\f``; ``/* ... */`` comments, and ``-- ...`` comments that a line
  break ends (without one the ``--`` is two minus signs, as in RocketMQ).
- **Precedence**, loosest first: ``OR``; ``AND``; ``=``, ``<>``, ``IS [NOT] NULL``; ``>``,
  ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN``, ``[NOT] IN``; unary ``+``, ``-`` and ``NOT``. Note
  that ``NOT`` binds tighter than a comparison, as in RocketMQ and ActiveMQ: ``NOT a = 1`` is
  ``(NOT a) = 1``; write ``NOT (a = 1)``.
- ``IN`` lists hold string literals only and need a property on the left. ``BETWEEN`` is
  ``>=`` and ``<=``; ``NOT BETWEEN`` is ``<`` or ``>``. ``<>`` is ``NOT (=)``; ``IS NOT NULL``
  is ``NOT (IS NULL)``: those equivalences carry RocketMQ's NULL semantics (sql92_eval).
- **Checks at parse time** (RocketMQ's ``ComparisonExpression.check*``, ``asBooleanExpression``):
  an operand of ``AND``/``OR``/``NOT`` and the whole selector must be boolean (a property is
  read as one: see sql92_eval); ``NULL`` cannot be an operand of ``=``/``<>``; ``TRUE``/``FALSE``
  cannot be compared with ``=`` to a string or number literal; ``<``, ``<=``, ``>``, ``>=`` and
  ``BETWEEN`` take no string, boolean or NULL literal and no boolean expression; literal bounds
  of ``BETWEEN`` must be in order.

Two deliberate differences, both stricter or fixed upstream: text after a complete selector is
an error (RocketMQ's grammar has no end-of-input rule and ignores it, so ``a = 1 b = 2`` would
mean ``a = 1``); and ``0.0`` is accepted (RocketMQ rejects a decimal literal below
``Double.MIN_VALUE``, i.e. zero: apache/rocketmq#10862).

Every error is a ``Sql92Error`` that names the line and column (1-based) where it was found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = [
    "And",
    "BoolCast",
    "Compare",
    "Const",
    "Equal",
    "In",
    "Long",
    "Negate",
    "Node",
    "Not",
    "Or",
    "Prop",
    "Sql92Error",
    "Value",
    "parse",
]

INT_MAX: Final = (1 << 31) - 1
LONG_MAX: Final = (1 << 63) - 1


class Long(int):
    """A Java ``Long`` value (an integer literal past 2^31-1): a string property compared with
    it is read with ``Long.valueOf`` instead of ``Integer.valueOf``, so the range differs."""

    __slots__ = ()

    def __neg__(self) -> Long:
        return Long(-int(self))

    def __repr__(self) -> str:
        return f"{int(self)}L"


Value: TypeAlias = "str | bool | int | float | None"
"""A runtime value: Java's String, Boolean, Integer (``int``), Long (``Long``), Double
(``float``) or null (``None``)."""


class Sql92Error(ValueError):
    """A selector that does not parse, or that RocketMQ refuses when it builds it."""

    def __init__(self, reason: str, line: int, column: int) -> None:
        where = f"column {column}" if line == 1 else f"line {line}, column {column}"
        super().__init__(f"{reason} at {where}")
        self.reason = reason
        self.line = line
        self.column = column


# ---------------------------------------------------------------- syntax tree
@dataclass(frozen=True, slots=True)
class Const:
    value: Value


@dataclass(frozen=True, slots=True)
class Prop:
    name: str


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A property where a boolean is wanted (``asBooleanExpression``)."""

    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Equal:
    """``=`` and ``IS NULL`` (``doCreateEqual``)."""

    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    """``<``, ``<=``, ``>`` or ``>=``."""
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    operand: Prop
    values: frozenset[str]
    negated: bool


Node: TypeAlias = "Const | Prop | Negate | Not | BoolCast | And | Or | Equal | Compare | In"

_BOOLEAN_NODES: Final = (Not, BoolCast, And, Or, Equal, Compare, In)


def _is_boolean(node: Node) -> bool:
    """RocketMQ's ``instanceof BooleanExpression``: TRUE, FALSE and NULL literals are."""
    if isinstance(node, Const):
        return node.value is None or type(node.value) is bool
    return isinstance(node, _BOOLEAN_NODES)


def _is_number(value: Value) -> bool:
    return type(value) in (int, Long, float)


# ---------------------------------------------------------------- tokens
_KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
_TOKEN: Final = re.compile(
    r"""
    (?P<skip>[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)
  | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<decimal>0|[1-9][0-9]*[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[<>=(),+-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """A keyword in upper case, an operator, ``id``, ``string``, ``decimal``, ``float``, or
    ``end``."""
    text: str
    pos: int


def _position(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            line, column = _position(text, pos)
            what = "unterminated string" if text[pos] == "'" else f"unexpected {text[pos]!r}"
            raise Sql92Error(what, line, column)
        kind = match.lastgroup
        assert kind is not None
        if kind != "skip":
            word = match.group()
            if kind == "id" and word.upper() in _KEYWORDS:
                kind = word.upper()
            elif kind == "op":
                kind = word
            tokens.append(_Token(kind, word, pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


# ---------------------------------------------------------------- parser
class _Parser:
    """Recursive descent over SelectorParser.jj's productions, one method each."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    # -- helpers
    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def error(self, reason: str, pos: int) -> Sql92Error:
        line, column = _position(self.text, pos)
        return Sql92Error(reason, line, column)

    def unexpected(self, token: _Token, wanted: str) -> Sql92Error:
        found = "the end of the expression" if token.kind == "end" else repr(token.text)
        return self.error(f"expected {wanted} but found {found}", token.pos)

    def expect(self, kind: str, wanted: str) -> _Token:
        token = self.peek()
        if token.kind != kind:
            raise self.unexpected(token, wanted)
        return self.take()

    def boolean(self, node: Node, pos: int) -> Node:
        """``asBooleanExpression``: a property is cast, a boolean kept, anything else refused."""
        if isinstance(node, Prop):
            return BoolCast(node)
        if not _is_boolean(node):
            raise self.error("this operand is not a boolean (a condition or a property)", pos)
        return node

    # -- productions
    def selector(self) -> Node:
        pos = self.peek().pos
        node = self.boolean(self.or_expression(), pos)
        end = self.peek()
        if end.kind != "end":
            raise self.unexpected(end, "AND, OR or the end of the expression")
        return node

    def or_expression(self) -> Node:
        pos = self.peek().pos
        left = self.and_expression()
        while self.peek().kind == "OR":
            self.take()
            right_pos = self.peek().pos
            right = self.and_expression()
            left = Or(self.boolean(left, pos), self.boolean(right, right_pos))
        return left

    def and_expression(self) -> Node:
        pos = self.peek().pos
        left = self.equality()
        while self.peek().kind == "AND":
            self.take()
            right_pos = self.peek().pos
            right = self.equality()
            left = And(self.boolean(left, pos), self.boolean(right, right_pos))
        return left

    def equality(self) -> Node:
        left_pos = self.peek().pos
        left = self.comparison()
        while True:
            token = self.peek()
            if token.kind in ("=", "<>"):
                self.take()
                right_pos = self.peek().pos
                right = self.comparison()
                self.check_equal(left, right, left_pos, right_pos)
                left = Equal(left, right) if token.kind == "=" else Not(Equal(left, right))
            elif token.kind == "IS":
                self.take()
                if self.peek().kind == "NULL":
                    self.take()
                    left = Equal(left, Const(None))
                else:
                    self.expect("NOT", "NULL or NOT NULL after IS")
                    self.expect("NULL", "NULL after IS NOT")
                    left = Not(Equal(left, Const(None)))
            else:
                return left

    def comparison(self) -> Node:
        left_pos = self.peek().pos
        left = self.unary()
        while True:
            token = self.peek()
            kind = token.kind
            negated = kind == "NOT" and self.peek(1).kind in ("BETWEEN", "IN")
            if negated:
                self.take()
                kind = self.peek().kind
            if kind in ("<", "<=", ">", ">="):
                self.take()
                right_pos = self.peek().pos
                right = self.unary()
                self.check_ordered(left, left_pos)
                self.check_ordered(right, right_pos)
                left = Compare(kind, left, right)
            elif kind == "BETWEEN":
                self.take()
                low_pos = self.peek().pos
                low = self.unary()
                self.expect("AND", "AND between the bounds of BETWEEN")
                high_pos = self.peek().pos
                high = self.unary()
                left = self.between(left, low, high, negated, (left_pos, low_pos, high_pos))
            elif kind == "IN":
                self.take()
                if not isinstance(left, Prop):
                    raise self.error("IN needs a property on its left", left_pos)
                left = In(left, frozenset(self.in_list()), negated)
            else:
                return left

    def between(
        self, value: Node, low: Node, high: Node, negated: bool, positions: tuple[int, int, int]
    ) -> Node:
        value_pos, low_pos, high_pos = positions
        if not negated and isinstance(low, Const) and isinstance(high, Const):
            if low.value is None or high.value is None:
                raise self.error("the bounds of BETWEEN cannot be NULL", low_pos)
            if _is_number(low.value) and _is_number(high.value) and high.value < low.value:  # type: ignore[operator]
                raise self.error(
                    f"the lower bound of BETWEEN ({low.value}) is greater than its upper bound "
                    f"({high.value})",
                    low_pos,
                )
        self.check_ordered(value, value_pos)
        self.check_ordered(low, low_pos)
        self.check_ordered(high, high_pos)
        if negated:
            return Or(Compare("<", value, low), Compare(">", value, high))
        return And(Compare(">=", value, low), Compare("<=", value, high))

    def in_list(self) -> list[str]:
        self.expect("(", "'(' after IN")
        values = [self.string()]
        while self.peek().kind == ",":
            self.take()
            values.append(self.string())
        self.expect(")", "',' or ')' in the IN list")
        return values

    def unary(self) -> Node:
        token = self.peek()
        if token.kind == "+":
            self.take()
            return self.unary()
        if token.kind == "-":
            self.take()
            return Negate(self.unary())
        if token.kind == "NOT":
            self.take()
            pos = self.peek().pos
            return Not(self.boolean(self.unary(), pos))
        return self.primary()

    def primary(self) -> Node:
        token = self.peek()
        kind = token.kind
        if kind == "(":
            self.take()
            node = self.or_expression()
            self.expect(")", "')'")
            return node
        if kind == "id":
            self.take()
            return Prop(token.text)
        if kind == "string":
            return Const(self.string())
        if kind == "decimal":
            self.take()
            digits = token.text.rstrip("lL")
            number = int(digits)
            if number > LONG_MAX:
                raise self.error(f"the integer {digits} is out of the range of a long", token.pos)
            return Const(number if number <= INT_MAX else Long(number))
        if kind == "float":
            self.take()
            value = float(token.text)
            if value == float("inf"):
                raise self.error(
                    f"the number {token.text} is out of the range of a double", token.pos
                )
            return Const(value)
        if kind in ("TRUE", "FALSE", "NULL"):
            self.take()
            return Const({"TRUE": True, "FALSE": False, "NULL": None}[kind])
        raise self.unexpected(token, "a property, a literal, '(', '+', '-' or NOT")

    def string(self) -> str:
        token = self.expect("string", "a string literal in single quotes")
        return token.text[1:-1].replace("''", "'")

    # -- RocketMQ's checks
    def check_equal(self, left: Node, right: Node, left_pos: int, right_pos: int) -> None:
        """``checkEqualOperand`` and ``checkEqualOperandCompatability``."""
        if isinstance(left, Const) and left.value is None:
            raise self.error("NULL cannot be compared with = or <> (use IS NULL)", left_pos)
        if isinstance(right, Const) and right.value is None:
            raise self.error("NULL cannot be compared with = or <> (use IS NULL)", right_pos)
        if (
            isinstance(left, Const)
            and isinstance(right, Const)
            and type(left.value) is bool
            and type(right.value) is not bool
        ):
            raise self.error(f"{left.value!s:.5} cannot be compared with a non-boolean", left_pos)

    def check_ordered(self, node: Node, pos: int) -> None:
        """``checkLessThanOperand``: only numbers (and properties) are ordered."""
        if isinstance(node, Const):
            if not _is_number(node.value):
                raise self.error("only numbers can be compared with <, <=, >, >=, BETWEEN", pos)
        elif _is_boolean(node):
            raise self.error("a condition cannot be compared with <, <=, >, >=, BETWEEN", pos)


def parse(text: str) -> Node:
    """The syntax tree of selector ``text`` (see the module docstring).

    Raises:
        Sql92Error: the text is not a selector RocketMQ would build; says where.
    """
    return _Parser(text).selector()
