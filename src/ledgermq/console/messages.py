"""Messages as the Messages page shows them: headers, properties and a body preview as text,
JSON and hex, plus the search form's time fields.

The body is shown three ways because the console cannot know what producers put in it: UTF-8
text when it decodes, pretty JSON when it parses, and always a hex dump (cut at
``PREVIEW_BYTES``, so a 4 MiB message does not become a 12 MiB page).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ledgermq.errors import ConfigError

if TYPE_CHECKING:
    from ledgermq.client.trace import TraceEvent
    from ledgermq.wire import MessageExt

__all__ = [
    "PREVIEW_BYTES",
    "MessageView",
    "format_ms",
    "hex_dump",
    "message_view",
    "parse_local_time",
    "trace_row",
]

PREVIEW_BYTES: Final = 16 * 1024
"""Most body bytes a preview shows (text, JSON or hex); the size says how much more there is."""


def format_ms(epoch_ms: int) -> str:
    """``2026-11-25 10:00:00.123`` in the console's local time zone."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def parse_local_time(text: str) -> int:
    """A ``datetime-local`` form value (``2026-11-25T10:00``, local time unless it has a zone)
    or epoch milliseconds, as epoch milliseconds.

    Raises:
        ConfigError: anything else, with the forms it takes.
    """
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"{text!r} is not a time: use 2026-11-25T10:00 (local time) or epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time is the console's local time
    return int(moment.timestamp() * 1000)


def hex_dump(data: bytes, limit: int = PREVIEW_BYTES) -> str:
    """``hexdump -C`` style lines: offset, 16 bytes in hex, the printable ASCII."""
    lines = []
    for start in range(0, min(len(data), limit), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  |{text}|")
    if len(data) > limit:
        lines.append(f"... {len(data) - limit} more bytes")
    return "\n".join(lines)


@dataclass(frozen=True)
class MessageView:
    """One message, ready to show."""

    msg_id: str
    offset_msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    headers: list[tuple[str, str]]
    properties: list[tuple[str, str]]
    body_size: int
    text: str | None
    """The body as UTF-8 (cut at PREVIEW_BYTES), None when it is not UTF-8."""
    json: str | None
    """The body re-indented, None when it is not JSON (or is too big to preview whole)."""
    hex: str
    keys: str
    tags: str
    store_time: str

    @property
    def preferred(self) -> str:
        """The preview to open first: JSON, else text, else hex."""
        if self.json is not None:
            return "json"
        return "text" if self.text is not None else "hex"


def _text(body: bytes) -> str | None:
    try:
        return body[:PREVIEW_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(body) > PREVIEW_BYTES and exc.start >= PREVIEW_BYTES - 3:
            return body[: exc.start].decode("utf-8")  # a character cut by the limit
        return None


def _json(body: bytes) -> str | None:
    if len(body) > PREVIEW_BYTES or body.strip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def message_view(message: MessageExt) -> MessageView:
    headers = [
        ("Message id", message.msg_id),
        ("Offset message id", message.offset_msg_id),
        ("Topic", message.topic),
        ("Queue", str(message.queue_id)),
        ("Queue offset", str(message.queue_offset)),
        ("Commit log offset", str(message.commit_log_offset)),
        ("Born", f"{format_ms(message.born_timestamp)} at {message.born_host}"),
        ("Stored", f"{format_ms(message.store_timestamp)} at {message.store_host}"),
        ("Reconsume times", str(message.reconsume_times)),
        ("Flag", str(message.flag)),
        ("System flag", str(message.sys_flag)),
        ("Body CRC", f"{message.body_crc:08x}"),
        ("Stored size", f"{message.store_size} bytes"),
    ]
    return MessageView(
        msg_id=message.msg_id,
        offset_msg_id=message.offset_msg_id,
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        headers=headers,
        properties=sorted(message.properties.items()),
        body_size=len(message.body),
        text=_text(message.body),
        json=_json(message.body),
        hex=hex_dump(message.body),
        keys=" ".join(message.keys),
        tags=message.tags or "",
        store_time=format_ms(message.store_timestamp),
    )


@dataclass(frozen=True)
class TraceRow:
    """One trace event as the message page shows it."""

    when: str
    what: str
    group: str
    took: str
    result: str


def trace_row(event: TraceEvent) -> TraceRow:
    """A trace event (``Admin.message_trace``) in words: when (local time), what happened, the
    group that did it, how long it took, and the outcome."""
    when = format_ms(event.timestamp_ms) if event.timestamp_ms >= 0 else "?"
    took = f"{event.cost_ms} ms" if event.cost_ms >= 0 else ""
    if event.kind == "Pub":
        what = f"sent to {event.store_host}" if event.store_host else "sent"
        return TraceRow(when, what, event.group, took, "ok" if event.success else "failed")
    if event.kind == "SubBefore":
        return TraceRow(when, f"delivered (attempt {event.retry_times + 1})", event.group, "", "")
    result = "ok" if event.success else "to consume again later"
    return TraceRow(when, "consumed", event.group, took, result)
