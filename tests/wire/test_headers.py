"""Typed remoting headers (``ledgermq.wire.headers``): each is declared once, as a dataclass, and
read and written by one rule per field type. Every header written by ``to_ext_fields`` reads
back as itself, and a required field that is missing is named in the error."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import BadRequestError
from ledgermq.wire.codes import MQResponseCode
from ledgermq.wire.headers import (
    HEADER_TYPES,
    CheckTransactionStateRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
)
from ledgermq.wire.names import GROUP_MAX_LENGTH

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_TEXT = st.text(min_size=1, max_size=12)
_NAME = st.from_regex(r"[%|a-zA-Z0-9_-]{1,40}", fullmatch=True)
"""A valid topic or group name (``wire.names``)."""
_ALL_TYPES: list[Any] = sorted(
    [
        *HEADER_TYPES.values(),
        SendMessageRequestHeader,
        SendMessageRequestHeaderV2,
        CheckTransactionStateRequestHeader,
        NotifyConsumerIdsChangedRequestHeader,
    ],
    key=lambda t: (t.CODE, t.__name__),
)


def _value(kind: str, name: bool = False) -> st.SearchStrategy[object]:
    text = _NAME if name else _TEXT
    return {
        "str": text,
        "str | None": st.none() | text,
        "int": _INT64,
        "int | None": st.none() | _INT64,
        "bool": st.booleans(),
    }[kind]


@st.composite
def _headers(draw: st.DrawFn) -> object:
    header_type: Any = draw(st.sampled_from(_ALL_TYPES))
    rules = header_type.name_rules()
    values = [
        draw(_value(str(item.type), item.name in rules)) for item in dataclasses.fields(header_type)
    ]
    return header_type(*values)


@given(_headers())
def test_every_header_reads_back_what_it_writes(header: object) -> None:
    fields = header.to_ext_fields()  # type: ignore[attr-defined]
    assert all(isinstance(value, str) for value in fields.values())
    assert type(header).from_ext_fields(fields) == header  # type: ignore[attr-defined]


def test_every_required_field_is_named_when_missing() -> None:
    for header_type in HEADER_TYPES.values():
        for item in dataclasses.fields(header_type):  # type: ignore[arg-type]
            if item.default is not dataclasses.MISSING or str(item.type) == "bool":
                continue
            full = {"x": "1"}
            for other in dataclasses.fields(header_type):  # type: ignore[arg-type]
                key = other.metadata.get("ext") or _camel(other.name)
                full[key] = "true" if str(other.type) == "bool" else "1"
            key = item.metadata.get("ext") or _camel(item.name)
            del full[key]
            with pytest.raises(BadRequestError, match=f"lacks the field '{key}'"):
                header_type.from_ext_fields(full)


def test_empty_group_names_of_unregister_client_read_as_absent_and_are_written_empty() -> None:
    header = UnregisterClientRequestHeader.from_ext_fields(
        {"clientID": "c1", "producerGroup": "", "consumerGroup": "G"}
    )
    assert header == UnregisterClientRequestHeader("c1", None, "G")
    assert header.to_ext_fields() == {"clientID": "c1", "producerGroup": "", "consumerGroup": "G"}
    with pytest.raises(BadRequestError, match="lacks the field 'clientID'"):
        UnregisterClientRequestHeader.from_ext_fields({"clientID": ""})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_topics_and_consumer_groups_are_checked_by_the_parse() -> None:
    """Issue 26 item 2: every header's topic and consumer group is checked with the naming
    rules (``wire.names``) as it is parsed, so no handler sees a name that breaks them."""
    checked = {t.__name__: t.name_rules() for t in _ALL_TYPES}
    for header_type in _ALL_TYPES:
        names = {item.name for item in dataclasses.fields(header_type)}
        expected = dict.fromkeys(names & {"topic"}, "topic")
        expected |= dict.fromkeys(names & {"consumer_group", "group", "group_name"}, "group")
        assert checked[header_type.__name__] == expected, header_type


_BAD = [
    ("orders.v1", "group", "may contain only the characters"),
    ("g" * (GROUP_MAX_LENGTH + 5), "group", f"at most {GROUP_MAX_LENGTH}"),
    ("t" * 128, "topic", "at most 127"),
    ("a/b", "topic", "may contain only the characters"),
    ("", "topic", "the topic name is empty"),
]


@pytest.mark.parametrize(("name", "rule", "message"), _BAD)
def test_a_bad_name_is_refused_with_invalid_parameter_naming_the_rule(
    name: str, rule: str, message: str
) -> None:
    """The refusal the broker's services answered a bad name with: INVALID_PARAMETER and the
    rule as the remark (tests/broker/test_names_doors.py), now from the parse itself."""
    refused = 0
    for header_type in _ALL_TYPES:
        for attr, attr_rule in header_type.name_rules().items():
            item = next(f for f in dataclasses.fields(header_type) if f.name == attr)
            if attr_rule != rule or (not name and item.type != "str"):
                continue  # (an optional name given empty reads as absent)
            fields = _valid_fields(header_type)
            fields[_key(header_type, attr)] = name
            with pytest.raises(BadRequestError, match=message) as caught:
                header_type.from_ext_fields(fields)
            assert caught.value.code == MQResponseCode.INVALID_PARAMETER
            refused += 1
    assert refused >= 10


def _key(header_type: Any, attr: str) -> str:
    item = next(f for f in dataclasses.fields(header_type) if f.name == attr)
    return str(item.metadata.get("ext") or _camel(attr))


def _valid_fields(header_type: Any) -> dict[str, str]:
    """Every field of ``header_type`` with a valid value (a name where one is checked)."""
    fields = {}
    for item in dataclasses.fields(header_type):
        kind = str(item.type)
        fields[_key(header_type, item.name)] = (
            "true" if kind == "bool" else "1" if "int" in kind else "Name1"
        )
    return fields


@given(_headers(), st.data())
def test_the_generated_writer_writes_what_each_field_rule_writes(
    header: Any, data: st.DataObject
) -> None:
    """``to_ext_fields`` and ``writer(**fixed)`` (the producer's send header) are generated
    from the fields' declarations; they write what ``_FieldSpec.write`` writes, field by field,
    whichever fields are fixed."""
    expected = header.to_ext_fields_slowly()
    assert header.to_ext_fields() == expected
    attrs = [item.name for item in dataclasses.fields(header)]
    fixed = data.draw(st.sets(st.sampled_from(attrs)))
    writer = type(header).writer(**{attr: getattr(header, attr) for attr in fixed})
    assert writer(*[getattr(header, a) for a in attrs if a not in fixed]) == expected


def test_a_writer_refuses_a_field_the_header_lacks() -> None:
    with pytest.raises(TypeError, match="has no field nope"):
        SendMessageRequestHeaderV2.writer(nope=1)
