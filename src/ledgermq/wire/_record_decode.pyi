"""The consumer's record decoder (``_record_decode.c``); ``message.decode_records`` holds the
reference (its Python fast path and ``_decode_one``)."""

from typing import TypeVar

_Message = TypeVar("_Message", bound=tuple[object, ...])

def decode_plain(
    data: bytes | bytearray | memoryview, pos: int, message_type: type[_Message], /
) -> tuple[list[_Message], int]:
    """The common-path records of ``data`` from ``pos`` as ``message_type`` tuples, and where
    the first other record (or the end) begins."""
