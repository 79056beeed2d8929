"""RocketMQ's SQL92 selector: parser and evaluator against a reference built from Python
expressions (hypothesis), RocketMQ's NULL and conversion rules, and parse errors with positions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgermq.broker.storage.filter import Sql92Error, compile_sql92
from ledgermq.broker.storage.filter.sql92_eval import java_compare
from ledgermq.broker.storage.filter.sql92_parser import parse

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    Props = Mapping[str, str]
    Ref = Callable[[Props], bool | None]


class RefError(Exception):
    """Where Java's evaluation throws (a string that is not the number it is compared with)."""


# ---------------------------------------------------------------- the reference
# Each generated case is (SQL text, a Python function of the properties). The functions are
# written from RocketMQ's documented rules, independently of the implementation's code.

NAMES = ["a", "b", "c", "TAGS", "$x_1"]
INT_STRINGS = ["0", "1", "-3", "10", "+7", "2147483647", "2147483648"]
DEC_STRINGS = ["1.5", "-2.25", "10.0", "3e2", " 4 "]
WORDS = ["red", "x", "it's", "TRUE", "true", "tRuE", "", "日本", "a b"]


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _as_int(value: str) -> int:
    """``Integer.valueOf`` of the values above."""
    if re.fullmatch(r"[+-]?[0-9]+", value) is None or not -(2**31) <= int(value) < 2**31:
        raise RefError(value)
    return int(value)


def _as_float(value: str) -> float:
    text = value.strip()
    allowed = set("0123456789+-.eE")
    if not text or not set(text) <= allowed:
        raise RefError(value)
    try:
        return float(text)
    except ValueError:
        raise RefError(value) from None


def _and(left: Ref, right: Ref) -> Ref:
    def run(p: Props) -> bool | None:
        lv = left(p)
        if lv is False:
            return False
        rv = right(p)
        if rv is False:
            return False
        return None if None in (lv, rv) else True

    return run


def _or(left: Ref, right: Ref) -> Ref:
    def run(p: Props) -> bool | None:
        lv = left(p)
        if lv is True:
            return True
        rv = right(p)
        if rv is True:
            return True
        return None if None in (lv, rv) else False

    return run


def _not(inner: Ref) -> Ref:
    def run(p: Props) -> bool | None:
        value = inner(p)
        return None if value is None else not value

    return run


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


@dataclass(frozen=True)
class Case:
    sql: str
    ref: Ref


def _present(name: str, test: Callable[[str], bool | None]) -> Ref:
    return lambda p: None if p.get(name) is None else test(p[name])


def _leaves(draw: st.DrawFn) -> Case:
    name = draw(st.sampled_from(NAMES))
    kind = draw(st.integers(0, 10))
    if kind == 0:  # string equality
        word = draw(st.sampled_from(WORDS))
        op = draw(st.sampled_from(["=", "<>"]))
        want = op == "="
        return Case(
            f"{name} {op} {_sql_string(word)}", _present(name, lambda v: (v == word) == want)
        )
    if kind == 1:  # ordering against a decimal literal: the property is read as a double
        op = draw(st.sampled_from(list(_OPS)))
        number = draw(st.sampled_from([0.5, 1.5, 10.0, 2.0, 300.0]))
        return Case(
            f"{name} {op} {number!r}", _present(name, lambda v: _OPS[op](_as_float(v), number))
        )
    if kind == 2:  # ordering against an integer literal: Integer.valueOf
        op = draw(st.sampled_from(list(_OPS)))
        number = draw(st.integers(-5, 12))
        text = f"-{-number}" if number < 0 else str(number)
        return Case(f"{name} {op} {text}", _present(name, lambda v: _OPS[op](_as_int(v), number)))
    if kind == 3:  # integer equality
        number = draw(st.integers(0, 12))
        return Case(f"{name} = {number}", _present(name, lambda v: _as_int(v) == number))
    if kind == 4:  # BETWEEN / NOT BETWEEN (decimal bounds)
        low = draw(st.sampled_from([-3.0, 0.5, 1.5]))
        high = low + draw(st.sampled_from([0.0, 1.0, 9.0]))
        negated = draw(st.booleans())
        if negated:
            return Case(
                f"{name} NOT BETWEEN {low!r} AND {high!r}",
                _present(name, lambda v: not low <= _as_float(v) <= high),
            )
        return Case(
            f"{name} BETWEEN {low!r} AND {high!r}",
            _present(name, lambda v: low <= _as_float(v) <= high),
        )
    if kind == 5:  # IN / NOT IN
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
        negated = draw(st.booleans())
        listed = ", ".join(map(_sql_string, words))
        return Case(
            f"{name} {'NOT IN' if negated else 'IN'} ({listed})",
            _present(name, lambda v: (v in words) != negated),
        )
    if kind == 6:  # IS [NOT] NULL
        negated = draw(st.booleans())
        if negated:
            return Case(f"{name} IS NOT NULL", lambda p: name in p)
        return Case(f"{name} IS NULL", lambda p: name not in p)
    if kind == 7:  # boolean literal
        value = draw(st.booleans())
        return Case("TRUE" if value else "FALSE", lambda p: value)
    if kind == 8:  # a property equals a boolean: Boolean.valueOf
        value = draw(st.booleans())
        literal = "TRUE" if value else "FALSE"
        return Case(f"{name} = {literal}", _present(name, lambda v: (v.lower() == "true") == value))
    if kind == 9:  # a property where a condition is wanted: FALSE, or NULL when missing
        return Case(name, _present(name, lambda v: False))
    # two properties ordered: both read as doubles
    other = draw(st.sampled_from(NAMES))
    op = draw(st.sampled_from(list(_OPS)))

    def both(p: Props) -> bool | None:
        if p.get(name) is None or p.get(other) is None:
            return None
        return _OPS[op](_as_float(p[name]), _as_float(p[other]))

    return Case(f"{name} {op} {other}", both)


@st.composite
def cases(draw: st.DrawFn, depth: int = 3) -> Case:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return _leaves(draw)
    kind = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if kind == "NOT":
        inner = draw(cases(depth - 1))
        return Case(f"NOT ({inner.sql})", _not(inner.ref))
    left, right = draw(cases(depth - 1)), draw(cases(depth - 1))
    combine = _and if kind == "AND" else _or
    return Case(f"({left.sql}) {kind} ({right.sql})", combine(left.ref, right.ref))


@st.composite
def properties(draw: st.DrawFn) -> dict[str, str]:
    values = st.sampled_from(INT_STRINGS + DEC_STRINGS + WORDS)
    return draw(st.dictionaries(st.sampled_from(NAMES), values, max_size=len(NAMES)))


_KEYWORD = re.compile(r"\b(AND|OR|NOT|IN|IS|NULL|BETWEEN|TRUE|FALSE)\b")
_STRING = re.compile(r"('(?:''|[^'])*')")


def _restyle(sql: str, case: Callable[[str], str], space: str) -> str:
    """Keywords recased and spaces replaced outside string literals."""
    parts = _STRING.split(sql)
    for i in range(0, len(parts), 2):  # the even parts are outside strings
        parts[i] = _KEYWORD.sub(lambda m: case(m.group()), parts[i]).replace(" ", space)
    return "".join(parts)


def _expected(case: Case, props: Props) -> bool:
    try:
        return case.ref(props) is True
    except RefError:
        return False


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_selectors_match_what_the_python_reference_says(data: st.DataObject) -> None:
    case = data.draw(cases())
    props = data.draw(properties())
    assert compile_sql92(case.sql).matches(props) == _expected(case, props), (case.sql, props)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_keyword_case_whitespace_and_comments_do_not_change_the_meaning(
    data: st.DataObject,
) -> None:
    case = data.draw(cases())
    props = data.draw(properties())
    recase = data.draw(st.sampled_from([str.lower, str.title, str.upper]))
    space = data.draw(st.sampled_from([" ", "\t", "\n  ", " /* c */ ", "-- c\n"]))
    text = _restyle(case.sql, recase, space)
    assert compile_sql92(text).matches(props) == _expected(case, props), (text, props)


_PIECES = [
    *"ab1 .'()=<>-+,*/\n",
    " AND ",
    " OR ",
    " NOT ",
    " IN ",
    " IS ",
    "NULL",
    " BETWEEN ",
    "TRUE",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_any_text_parses_or_raises_sql92error_only(text: str) -> None:
    try:
        selector = compile_sql92(text)
    except Sql92Error as exc:
        where = (exc.line, exc.column)
    else:
        selector.matches({"a": "1", "b": "x"})  # never raises either
        return
    assert where >= (1, 1)
    assert where[1] <= len(text) + 1


# ---------------------------------------------------------------- RocketMQ's rules, pinned
@pytest.mark.parametrize(
    ("sql", "props", "matches"),
    [
        # NULL: a missing property is never equal, unequal, ordered, in or out of a list
        ("a = 'x'", {}, False),
        ("a <> 'x'", {}, False),
        ("a > 1", {}, False),
        ("a IN ('x')", {}, False),
        ("a NOT IN ('x')", {}, False),
        ("a NOT BETWEEN 1 AND 2", {}, False),
        ("a IS NULL", {}, True),
        ("a IS NOT NULL", {"a": ""}, True),
        ("NOT (a = 'x')", {}, False),
        ("a = 'x' OR TRUE", {}, True),
        ("a = 'x' AND FALSE", {}, False),
        # two missing properties are equal; a present one is not equal to a missing one
        ("a = b", {}, True),
        ("a = b", {"b": "1"}, False),
        ("a <> b", {"a": "1"}, True),
        # numbers: the literal's type decides how the property is read
        ("a > 1", {"a": "2"}, True),
        ("a > 1", {"a": "1.5"}, False),  # Integer.valueOf("1.5") fails
        ("a > 1.0", {"a": "1.5"}, True),
        ("a > 1.0", {"a": " 1.5 "}, True),  # Double.valueOf trims
        ("a = 3000000000", {"a": "3000000000"}, True),  # a Long
        ("a = 1", {"a": "3000000000"}, False),  # not an Integer
        ("a = 1", {"a": "+1"}, True),
        ("a = 1", {"a": "01"}, True),
        ("a = 1", {"a": "1_0"}, False),  # Python would read 10
        ("a > 1.0", {"a": "inf"}, False),
        ("a > 1.0", {"a": "Infinity"}, True),
        ("a > 1.0", {"a": "0x1p4"}, True),
        ("a > -1", {"a": "0"}, True),
        ("a BETWEEN -1 AND 1", {"a": "0"}, True),
        ("a = 0.0", {"a": "-0.0"}, False),  # Double.compare
        ("a < b", {"a": "2", "b": "10"}, True),  # numeric, not lexical
        ("a < b", {"a": "x", "b": "10"}, False),
        # a failed conversion fails the whole selector, unless AND/OR did not need it
        ("a = 1 OR b = 'y'", {"a": "x", "b": "y"}, False),
        ("b = 'y' OR a = 1", {"a": "x", "b": "y"}, True),
        # booleans
        ("a = TRUE", {"a": "TRUE"}, True),
        ("a = FALSE", {"a": "no"}, True),
        ("a", {"a": "true"}, False),  # a property is not a boolean
        ("NOT a", {"a": "true"}, True),
        ("NOT a", {}, False),
        ("TRUE = a", {"a": "true"}, False),  # Java's ClassCastException
        # NOT binds tighter than comparisons, as in RocketMQ: (NOT a) = 'x'
        ("NOT a = 'x'", {"a": "y"}, False),
        ("NOT (a = 'x')", {"a": "y"}, True),
        # AND binds tighter than OR
        ("TRUE OR FALSE AND FALSE", {}, True),
        ("(TRUE OR FALSE) AND FALSE", {}, False),
        # strings: '' is a quote, case matters, TAGS is the tag
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = 'Red'", {"a": "red"}, False),
        ("TAGS IN ('t1', 't2') and price >= 10", {"TAGS": "t2", "price": "10"}, True),
        ("a = 1 -- a comment\n OR b = 2", {"b": "2"}, True),
        ("a = 1 /* a comment */ OR b = 2", {"b": "2"}, True),
        ("NULL", {}, False),
        ("1 = 1", {}, True),
        ("'x' = 'x'", {}, True),
    ],
)
def test_rocketmq_semantics(sql: str, props: dict[str, str], matches: bool) -> None:
    assert compile_sql92(sql).matches(props) is matches


def test_java_compare_orders_doubles_like_double_compare() -> None:
    assert java_compare(math.nan, math.nan) == 0
    assert java_compare(math.nan, math.inf) == 1
    assert java_compare(-0.0, 0.0) == -1
    assert java_compare(1, 1.0) == 0


# ---------------------------------------------------------------- parse errors
@pytest.mark.parametrize(
    ("sql", "line", "column", "reason"),
    [
        ("", 1, 1, "found the end"),
        ("a = ", 1, 5, "found the end"),
        ("a = 1 b = 2", 1, 7, "found 'b'"),  # RocketMQ would ignore "b = 2"
        ("a = 'red", 1, 5, "unterminated string"),
        ("a == 1", 1, 4, "found '='"),
        ("a != 1", 1, 3, "unexpected '!'"),
        ("a > 'x'", 1, 5, "only numbers"),
        ("a >= TRUE", 1, 6, "only numbers"),
        ("(a = 1) > 2", 1, 1, "a condition"),
        ("a BETWEEN 5 AND 1", 1, 11, "greater than its upper bound"),
        ("a BETWEEN 1 OR 5", 1, 13, "expected AND"),
        ("a BETWEEN 'x' AND 'y'", 1, 11, "only numbers"),
        ("a IN (1, 2)", 1, 7, "string literal"),
        ("a IN ()", 1, 7, "string literal"),
        ("a IN ('x'", 1, 10, "')'"),
        ("'x' IN ('x')", 1, 1, "IN needs a property"),
        ("a = NULL", 1, 5, "NULL cannot be compared"),
        ("NULL <> a", 1, 1, "NULL cannot be compared"),
        ("TRUE = 1", 1, 1, "non-boolean"),
        ("a IS 1", 1, 6, "NULL or NOT NULL"),
        ("a IS NOT 1", 1, 10, "NULL after IS NOT"),
        ("1", 1, 1, "not a boolean"),
        ("'x'", 1, 1, "not a boolean"),
        ("a AND 1", 1, 7, "not a boolean"),
        ("NOT 'x'", 1, 5, "not a boolean"),
        ("a = 9223372036854775808", 1, 5, "range of a long"),
        ("a = 1e999", 1, 5, "range of a double"),
        ("a = 0L", 1, 6, "found 'L'"),
        ("a = 1 -- no line break", 1, 7, "found '-'"),
        ("a = 1 AND\n b ? 2", 2, 4, "unexpected '?'"),
        ("(a = 1", 1, 7, "')'"),
        ("a = 1)", 1, 6, "found ')'"),
        ("a.b = 1", 1, 2, "unexpected '.'"),
    ],
)
def test_parse_errors_say_where(sql: str, line: int, column: int, reason: str) -> None:
    with pytest.raises(Sql92Error) as info:
        compile_sql92(sql)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert reason in str(info.value)
    where = f"column {column}" if line == 1 else f"line {line}, column {column}"
    assert str(info.value).endswith(where)


def test_accepted_literals() -> None:
    for sql in ["a = 0.0", "a = .5", "a = 5.", "a = 5E3", "a = 1.5e-3", "a = 10L", "a = 0"]:
        parse(sql)
    assert compile_sql92("a = 5.") is compile_sql92("a = 5.")  # cached per text
