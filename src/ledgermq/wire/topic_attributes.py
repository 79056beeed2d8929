"""Topic attributes as RocketMQ 5's admin changes them: ``+key=value`` adds or sets, ``-key``
removes, comma-separated (``mqadmin updateTopic -a +message.type=FIFO``; the ``attributes``
field of ``UPDATE_AND_CREATE_TOPIC``). Pure.

Only the attributes this broker acts on are accepted, each with RocketMQ's values, so a typo or
an attribute we would silently ignore is refused with a sentence saying which: today
``message.type`` (NORMAL, FIFO, DELAY, TRANSACTION, MIXED; what a v5 send must be, checked by
the gRPC door). A topic updated without attribute changes keeps the attributes it had (RocketMQ's
``AttributeUtil.alterCurrentAttributes``); removing one a topic does not have, or removing
anything while creating, is refused as RocketMQ refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SUPPORTED_ATTRIBUTES", "apply_changes", "format_changes", "parse_changes"]

SUPPORTED_ATTRIBUTES: Final[dict[str, frozenset[str]]] = {
    "message.type": frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}),
}
"""Attribute name -> the values it may take."""


def parse_changes(text: str) -> dict[str, str | None]:
    """``"+a=1,-b"`` -> ``{"a": "1", "b": None}`` (None: remove); ValueError naming the bad
    item, an unsupported key or value, or a key given twice."""
    changes: dict[str, str | None] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            key, value = key.strip(), value.strip()
            allowed = SUPPORTED_ATTRIBUTES.get(key)
            if allowed is not None and value not in allowed:
                raise ValueError(
                    f"topic attribute {key} may be {', '.join(sorted(allowed))}, not {value!r}"
                )
            change: str | None = value
        elif item.startswith("-") and "=" not in item:
            key, change = item[1:].strip(), None
        else:
            raise ValueError(
                f"a topic attribute change is '+key=value' or '-key', not {item!r} "
                "(e.g. +message.type=FIFO)"
            )
        if key not in SUPPORTED_ATTRIBUTES:
            raise ValueError(
                f"unsupported topic attribute {key!r}; this broker knows "
                f"{', '.join(sorted(SUPPORTED_ATTRIBUTES))}"
            )
        if key in changes:
            raise ValueError(f"topic attribute {key} is changed twice in {text!r}")
        changes[key] = change
    return changes


def apply_changes(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, creating: bool
) -> dict[str, str]:
    """The attributes after ``changes``; ValueError for a removal while ``creating`` or of an
    attribute not there."""
    result = dict(current)
    for key, value in changes.items():
        if value is not None:
            result[key] = value
        elif creating:
            raise ValueError(f"a topic being created has no attribute to remove ({key})")
        elif key not in result:
            raise ValueError(f"the topic has no attribute {key} to remove")
        else:
            del result[key]
    return result


def format_changes(changes: Mapping[str, str | None]) -> str:
    """The wire text of ``changes`` (``parse_changes``'s inverse)."""
    return ",".join(f"+{k}={v}" if v is not None else f"-{k}" for k, v in changes.items())
