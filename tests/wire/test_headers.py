"""Typed remoting headers (``ledgermq.wire.headers``): each is declared once, as a dataclass, and
read and written by one rule per field type. Every header written by ``to_ext_fields`` reads
back as itself, and a required field that is missing is named in the error."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgermq.errors import BadRequestError
from ledgermq.wire.headers import HEADER_TYPES, UnregisterClientRequestHeader

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_TEXT = st.text(min_size=1, max_size=12)


def _value(kind: str) -> st.SearchStrategy[object]:
    return {
        "str": _TEXT,
        "str | None": st.none() | _TEXT,
        "int": _INT64,
        "int | None": st.none() | _INT64,
        "bool": st.booleans(),
    }[kind]


@st.composite
def _headers(draw: st.DrawFn) -> object:
    header_type = draw(st.sampled_from(sorted(HEADER_TYPES.values(), key=lambda t: t.CODE)))  # type: ignore[attr-defined]
    values = [draw(_value(str(item.type))) for item in dataclasses.fields(header_type)]
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
